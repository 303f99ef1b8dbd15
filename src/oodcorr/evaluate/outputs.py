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
    logged = _log_mlflow(params, run, run_json, rows, eval_dir)
    return {"metrics": str(eval_dir / "metrics.jsonl"), "rows": rows, "mlflow_run_id": logged[0],
            "mlflow_logged": logged[1]}


def _log_mlflow(params, run, run_json, rows, eval_dir: Path) -> tuple[str | None, int]:
    """The eval/* metrics (one per testset [x slice] x checkpoint step) and the predictions archive: written
    to the run's local tracking record, then mirrored into the training run's MLflow record (steps already
    there are skipped; a store that is down costs one warning and is replayed later by `oodcorr sync`)."""
    from oodcorr import io, mirror

    now, records = int(time.time() * 1000), []
    for r in rows:
        prefix = ("eval", r["testset"]) if r["slice"] is None else ("eval", r["testset"], r["slice"])
        names = ("accuracy", "macro_f1", "f1_non_entailment") if r["slice"] is None else ("accuracy",)
        for name in names:
            if r[name] == r[name]:  # skip NaN (empty slice)
                records.append({"type": "metric", "key": _metric_key(*prefix, name), "value": float(r[name]),
                                "step": int(r["step"]), "timestamp": now})
    digest = io.sha256_file(eval_dir / "metrics.jsonl")
    records.append({"type": "artifact", "path": "eval/predictions", "archive": "predictions.tar.gz",
                    "artifact_path": "eval", "sha256": digest})
    mirror.write_eval(params, run, records)
    m = mirror.mirror(params, run)
    before = len(m.sent)
    run_id = m.push()
    return run_id, max(0, len(m.sent) - before)
