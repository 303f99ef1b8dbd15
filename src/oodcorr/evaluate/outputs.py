"""Evaluation outputs, assembled from the cache: metrics.jsonl, accuracy.csv (plot), summary.json (metric),
predictions/ (per checkpoint x testset), and the eval/* metrics in the training run's MLflow record."""

from __future__ import annotations

from pathlib import Path

from oodcorr.core import io
from oodcorr.records.rundir import METRICS_FILE, PREDICTIONS
from oodcorr.settings.project import Project
from oodcorr.settings.run_settings import RunSettings
from oodcorr.stats.metrics import METRICS

LOGPROB_COLUMNS = ("label", "prediction", "logp_entailment", "logp_non_entailment")
# besides accuracy and the F1s (scoring.metrics): every metric of the table, per testset and slice
EXTRA_METRICS = tuple(m for m in METRICS if m != "accuracy")


def _log_curves(client, run_id: str, rows: list[dict]) -> None:
    """One figure, accuracy vs checkpoint step with a curve per testset, logged as an image with a step
    (shown in the run's Model metrics view) and as eval/accuracy_by_testset.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    whole = [r for r in rows if r["slice"] is None]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    for testset in sorted({r["testset"] for r in whole}):
        pts = sorted((r["step"], r["accuracy"]) for r in whole if r["testset"] == testset)
        ax.plot(
            [p[0] for p in pts],
            [p[1] for p in pts],
            marker="o",
            ms=3,
            label=f"{testset} (ID)" if testset == whole[0].get("id_testset") else testset,
        )
    ax.set(xlabel="checkpoint step", ylabel="accuracy", title=f"{whole[0]['run']}: accuracy per testset")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    try:
        client.log_figure(run_id, fig, "eval/accuracy_by_testset.png")
        fig.canvas.draw()
        import numpy as np

        image = np.asarray(fig.canvas.buffer_rgba())[..., :3]
        client.log_image(run_id, image, key="accuracy_by_testset", step=max(r["step"] for r in whole))
    finally:
        plt.close(fig)


def run_summary(whole: list[dict], id_testset: str) -> dict:
    """summary.json, the run's DVC metric: a few numbers `dvc metrics show` / `dvc exp show` print, named
    like the study's results/metrics.json (per-testset accuracies per step: accuracy.csv, metrics.jsonl)."""
    final = max((r["step"] for r in whole), default=None)
    last = {r["testset"]: r["accuracy"] for r in whole if r["step"] == final}
    ood = [a for t, a in last.items() if t != id_testset]
    return {
        "step": final,
        "id_accuracy": last.get(id_testset),
        "ood_accuracy": round(sum(ood) / len(ood), 6) if ood else None,
    }


def metric_rows(base: dict, tables: dict) -> list[dict]:
    """metrics.jsonl's rows: per (step, testset) predictions table (pyarrow), every metric of the whole testset
    and of each slice, computed from the stored per-item values alone (never from the scorer's tensors), so they
    are the same bits whatever thread count scored them; sorted by step, testset, slice."""
    import numpy as np

    from oodcorr.evaluate.scoring import metrics_by_slice
    from oodcorr.stats.metrics import table_metrics

    rows = []
    for (step, testset), table in tables.items():
        col = table.to_pydict()
        arrays = {c: np.asarray(col[c]) for c in LOGPROB_COLUMNS if c in col}
        slices = np.asarray([str(v) if v is not None else "" for v in col["slice"]])
        for sl, m in metrics_by_slice(col["label"], col["prediction"], col["slice"]):
            sub = arrays if sl is None else {c: v[slices == sl] for c, v in arrays.items()}
            rows.append(
                {**base, "step": step, "testset": testset, "slice": sl, **m, **table_metrics(sub, EXTRA_METRICS)}
            )
    rows.sort(key=lambda r: (r["step"], r["testset"], r["slice"] is not None, r["slice"] or ""))
    return rows


def write_outputs(project: Project, trained: RunSettings, run_json, done, cache_dir: Path, eval_dir: Path) -> dict:
    """metrics.jsonl, accuracy.csv, summary.json and predictions/ from the cache (atomically), then MLflow."""
    import pyarrow.parquet as pq

    run = trained.run
    base = {
        "run": run,
        "model": trained.model,
        "train_set": trained.train_set,
        "id_testset": trained.id_testset,
        "shots": trained.shots,
        "seed": trained.seed,
        "data_seed": trained.data_seed,
    }
    tables = {(step, testset): pq.read_table(cache_dir / f"{key}.parquet") for step, testset, key in done}
    rows = metric_rows(base, tables)
    io.write_jsonl(eval_dir / METRICS_FILE, rows)
    whole = [r for r in rows if r["slice"] is None]
    io.write_text(
        eval_dir / "accuracy.csv",
        "step,testset,accuracy\n" + "".join(f"{r['step']},{r['testset']},{r['accuracy']:.6f}\n" for r in whole),
    )
    io.write_json(eval_dir / "summary.json", run_summary(whole, trained.id_testset))
    with io.atomic_dir(eval_dir / PREDICTIONS) as tmp:
        for (step, testset), table in tables.items():
            (tmp / f"step-{step}").mkdir(exist_ok=True)
            pq.write_table(table.replace_schema_metadata(None), tmp / f"step-{step}" / f"{testset}.parquet")
    logged = _log_mlflow(project, run, run_json, rows, eval_dir) if project.tracking_enabled else (None, 0)
    return {
        "metrics": str(eval_dir / METRICS_FILE),
        "rows": rows,
        "mlflow_run_id": logged[0],
        "mlflow_logged": logged[1],
    }


def _log_mlflow(project: Project, run, run_json, rows, eval_dir: Path) -> tuple[str | None, int]:
    """The eval/* metrics (one per testset [x slice] x checkpoint step) and the predictions archive: written
    to the run's local tracking record, then mirrored into the training run's MLflow record (steps already
    there are skipped; a store that is down costs one warning and is replayed later by `oodcorr sync`)."""
    from oodcorr.core import io
    from oodcorr.tracking import mirror, run_records

    train = io.read_jsonl_tolerant(mirror.record_dir(project, run) / "train.jsonl")
    records = run_records.eval_records(
        rows, run_records.checkpoint_times(train, sorted({int(r["step"]) for r in rows}))
    )
    records.append(run_records.predictions_artifact(eval_dir))
    mirror.write_eval(project, run, records)
    m = mirror.mirror(project, run)
    before = len(m.sent)
    run_id = m.push()
    if run_id is not None and len(m.sent) > before:  # the curves figure: derived from the metrics, best effort
        try:
            _log_curves(m.client, run_id, rows)
        except Exception as e:  # noqa: BLE001  a figure must never fail the stage
            import warnings

            warnings.warn(f"MLflow: accuracy figure not logged ({type(e).__name__}: {e})", stacklevel=2)
    return run_id, max(0, len(m.sent) - before)
