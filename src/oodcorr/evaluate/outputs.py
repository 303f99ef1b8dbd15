"""Evaluation outputs, assembled from the cache: metrics.jsonl, accuracy.csv (plot), summary.json (metric),
predictions/ (per checkpoint x testset), and the eval/* metrics in the training run's MLflow record."""

from __future__ import annotations

import re
import time
from pathlib import Path

from oodcorr import io


def _metric_key(*parts: str) -> str:
    """MLflow keys allow [A-Za-z0-9_-. /]; slice names (e.g. `lexical_overlap/entailment`) may hold others."""
    return "/".join(re.sub(r"[^A-Za-z0-9_\-. /]", "_", str(p)) for p in parts)


def write_outputs(params, cfg, run, run_json, done, cache_dir: Path, eval_dir: Path) -> dict:
    """metrics.jsonl, accuracy.csv, summary.json and predictions/ from the cache (atomically), then MLflow."""
    import pyarrow.parquet as pq

    from oodcorr.evaluate.scoring import metrics_by_slice

    base = {"run": run, "model": cfg["model"], "train_set": cfg["train_set"], "id_testset": cfg["id_testset"],
            "shots": cfg["shots"], "seed": cfg["seed"], "data_seed": cfg.get("data_seed", 0)}
    rows, tables = [], {}
    for step, testset, key in done:
        table = pq.read_table(cache_dir / f"{key}.parquet")
        tables[(step, testset)] = table
        col = table.to_pydict()
        for sl, m in metrics_by_slice(col["label"], col["prediction"], col["slice"]):
            rows.append({**base, "step": step, "testset": testset, "slice": sl, **m})
    rows.sort(key=lambda r: (r["step"], r["testset"], r["slice"] is not None, r["slice"] or ""))
    io.write_jsonl(eval_dir / "metrics.jsonl", rows)
    whole = [r for r in rows if r["slice"] is None]
    io.write_text(eval_dir / "accuracy.csv", "step,testset,accuracy\n" + "".join(
        f"{r['step']},{r['testset']},{r['accuracy']:.6f}\n" for r in whole))
    final = max((r["step"] for r in whole), default=None)
    io.write_json(eval_dir / "summary.json", {"step": final, "accuracy": {
        r["testset"]: r["accuracy"] for r in whole if r["step"] == final}})
    with io.atomic_dir(eval_dir / "predictions") as tmp:
        for (step, testset), table in tables.items():
            (tmp / f"step-{step}").mkdir(exist_ok=True)
            pq.write_table(table.replace_schema_metadata(None), tmp / f"step-{step}" / f"{testset}.parquet")
    from oodcorr import tracking

    logged = _log_mlflow(params, run, run_json, rows, eval_dir) if tracking.enabled(params) else (None, 0)
    return {"metrics": str(eval_dir / "metrics.jsonl"), "rows": rows, "mlflow_run_id": logged[0],
            "mlflow_logged": logged[1]}


def _log_mlflow(params, run, run_json, rows, eval_dir: Path) -> tuple[str, int]:
    """Log into the training run; (testset, step) pairs already logged are skipped (no duplicate steps)."""
    import tarfile
    import tempfile

    import mlflow
    from mlflow.entities import Metric

    from oodcorr import tracking

    exp_id = tracking.setup(params)
    client = mlflow.MlflowClient()
    run_id = tracking.find_run(params, run, run_id=run_json.get("mlflow_run_id"), kind="train")
    if run_id is None:
        run_id = client.create_run(exp_id, run_name=run, tags={"oodcorr.run_key": run, "oodcorr.kind": "train"}).info.run_id
        client.set_terminated(run_id)
    now, metrics, history = int(time.time() * 1000), [], {}
    for r in rows:
        prefix = ("eval", r["testset"]) if r["slice"] is None else ("eval", r["testset"], r["slice"])
        names = ("accuracy", "macro_f1", "f1_non_entailment") if r["slice"] is None else ("accuracy",)
        for name in names:
            key = _metric_key(*prefix, name)
            if key not in history:
                history[key] = {m.step for m in client.get_metric_history(run_id, key)}
            if r["step"] not in history[key] and r[name] == r[name]:  # skip NaN (empty slice)
                metrics.append(Metric(key, float(r[name]), now, int(r["step"])))
                history[key].add(r["step"])
    for i in range(0, len(metrics), 1000):  # MLflow's per-batch limit
        client.log_batch(run_id, metrics=metrics[i: i + 1000])
    with tempfile.TemporaryDirectory() as tmp:  # one compressed artifact, not one file per checkpoint x testset
        with tarfile.open(Path(tmp) / "predictions.tar.gz", "w:gz") as tar:
            tar.add(eval_dir / "predictions", arcname="predictions")
        client.log_artifact(run_id, str(Path(tmp) / "predictions.tar.gz"), "eval")
    return run_id, len(metrics)
