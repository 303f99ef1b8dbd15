"""What a run's MLflow record holds, and rebuilding it from the run folder's DVC-tracked outputs.

A collaborator who `dvc pull`s a study gets run.json, the checkpoints and eval/metrics.jsonl, but not the
local tracking records (runs/<run>/tracking: machine-specific, outside DVC and git). `rebuild` writes those
records again from the outputs: params and tags from run.json, train/loss and train/lr from each checkpoint's
metadata (`train_log`), the eval metrics from metrics.jsonl. `oodcorr sync` then mirrors them into MLflow as
it mirrors any record, so the collaborator's MLflow holds complete runs without recomputing anything.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from oodcorr.core import io
from oodcorr.records.rundir import METRICS_FILE

EVAL_NAMES = ("accuracy", "macro_f1", "f1_non_entailment")  # per testset; slices: accuracy and the table's metrics
F1_SHORT = {"macro_f1": "f1", "f1_non_entailment": "f1_non"}  # the other metrics' short names: oodcorr.stats.metrics
LOCAL_SUFFIX = "_real"  # the built-in local copies (registry.REAL) drop it in metric keys when unambiguous


def _extra() -> tuple[str, ...]:
    from oodcorr.stats.metrics import METRICS

    return tuple(m for m in METRICS if m != "accuracy")


def short_metric(name: str) -> str:
    """A metric's name in MLflow keys: `short` of oodcorr.stats.metrics.METRICS (acc, bm, ...), or of the F1s."""
    from oodcorr.stats.metrics import METRICS

    return METRICS[name].short if name in METRICS else F1_SHORT.get(name, name)


def short_testsets(names) -> dict[str, str]:
    """{testset: its name in MLflow keys}: `scitail_real` -> `scitail` unless that name is also among `names`
    (the testsets one run is evaluated on, the same for every run of a study)."""
    names = set(names)
    return {
        t: t[: -len(LOCAL_SUFFIX)] if t.endswith(LOCAL_SUFFIX) and t[: -len(LOCAL_SUFFIX)] not in names else t
        for t in names
    }


def metric_key(*parts: str) -> str:
    """MLflow keys allow [A-Za-z0-9_-. /]; slice names (e.g. `lexical_overlap/entailment`) may hold others."""
    return "/".join(re.sub(r"[^A-Za-z0-9_\-. /]", "_", str(p)) for p in parts)


def metric_name(name: str, testset: str, slice_: str | None = None) -> str:
    """`acc/scitail` (metric, then testset, short names): short enough for a chart title, and MLflow's chart view
    puts every testset's curve of one metric in one section (slices: `slices/<testset>/<slice>/<metric>`).
    `testset` is the short name (short_testsets)."""
    name = short_metric(name)
    return metric_key(name, testset) if slice_ is None else metric_key("slices", testset, slice_, name)


def checkpoint_times(train_records: list[dict], steps: list[int], end_ms: int | None = None) -> dict[int, int]:
    """A timestamp (ms) per checkpoint step for its eval metrics, so MLflow's time axis spreads a curve like its
    step axis: when training reached that step (its train/loss record), else 1 s apart, ending now (or end_ms)."""
    trained = {
        int(r["step"]): int(r["timestamp"])
        for r in train_records
        if r.get("type") == "metric" and r.get("key") == "train/loss"
    }
    now = int(end_ms or time.time() * 1000)
    out, last = {}, None
    for i, step in enumerate(sorted(steps)):
        ts = trained.get(step)
        if ts is None:  # step 0 (the base model), or no training record: keep the order, 1 s apart
            ts = min(trained.values()) - 1000 if trained and step == 0 else now - 1000 * (len(steps) - 1 - i)
        if last is not None and ts <= last:
            ts = last + 1
        out[step] = last = ts
    return out


def eval_records(rows: list[dict], stamps: dict[int, int]) -> list[dict]:
    """The eval metric records of metrics.jsonl rows: accuracy, the F1s and every metric of
    oodcorr.stats.metrics.METRICS the rows hold (NaN values, e.g. an empty slice or one gold class, skipped)."""
    records, extra = [], _extra()
    short = short_testsets(r["testset"] for r in rows)
    for r in rows:
        for name in (*EVAL_NAMES, *extra) if r.get("slice") is None else ("accuracy", *extra):
            value = r.get(name)
            if isinstance(value, (int, float)) and value == value:
                records.append(
                    {
                        "type": "metric",
                        "key": metric_name(name, short[r["testset"]], r.get("slice")),
                        "value": float(value),
                        "step": int(r["step"]),
                        "timestamp": stamps[int(r["step"])],
                    }
                )
    return records


def predictions_artifact(folder) -> dict:
    """The predictions archive record of a run's eval folder (keyed by the metrics file's content)."""
    return {
        "type": "artifact",
        "path": "eval/predictions",
        "archive": "predictions.tar.gz",
        "artifact_path": "eval",
        "sha256": io.sha256_file(folder / METRICS_FILE),
    }


def _run_tags(params: dict, run: str, info: dict) -> dict:
    """The rebuilt training run's tags (its colour where the family has one)."""
    from oodcorr.tracking import store as tracking
    from oodcorr.tracking.experiments import COLOR_TAG, run_color

    cfg = info["config"]
    tags = {
        "oodcorr.run_key": run,
        tracking.KIND_TAG: tracking.TRAIN_KIND,
        "oodcorr.model": cfg["model"],
        "oodcorr.model_revision": str((info.get("model_info") or {}).get("revision")),
        "oodcorr.rebuilt": "from the run folder (dvc pull)",
    }
    color = run_color(cfg, params.get("runs"))
    if color:
        tags[COLOR_TAG] = color
    return tags


def _train_log(rdir: Path, info: dict, end_ms: int | None = None) -> list[dict]:
    """train/loss and train/lr records from the checkpoints' kept training log, 1 s per step, in order, ending
    now or at end_ms."""
    from oodcorr.records.rundir import META_FILE, checkpoint_dirs, checkpoints_dir

    lines = []
    base = int(end_ms or time.time() * 1000) - 1000 * (int(info.get("total_steps") or 0) + 1)
    for step, folder in sorted(checkpoint_dirs(checkpoints_dir(rdir)).items()):
        try:
            meta = json.loads((folder / META_FILE).read_text())
        except (OSError, json.JSONDecodeError):
            continue
        for s, loss, lr in meta.get("train_log") or []:
            ts = base + 1000 * int(s)  # the training times are not in the outputs: 1 s per step, in order
            lines += [
                {"type": "metric", "key": "train/loss", "value": float(loss), "step": int(s), "timestamp": ts},
                {"type": "metric", "key": "train/lr", "value": float(lr), "step": int(s), "timestamp": ts},
            ]
    return lines


def rebuild(params: dict, run: str, end_ms: int | None = None) -> bool:
    """Write runs/<run>/tracking/{train,eval}.jsonl from the run's outputs when there are none; True if written.
    Needs run.json with its tracking identity (written by training); returns False otherwise. The outputs keep no
    times: the records end now, or at end_ms (a saved run: when it was saved), which then also gives the MLflow
    run its start (its first record) and end time."""
    from oodcorr.records.rundir import eval_dir, metrics_file, read_run_json, runs_root, tracking_dir
    from oodcorr.tracking import store as tracking
    from oodcorr.tracking.writable import refuse_dvc_tracked

    rdir = runs_root(params) / run
    refuse_dvc_tracked(rdir)  # a saved study's run folder: its records are built elsewhere (tracking.saved_view)
    records = tracking_dir(rdir)
    info = read_run_json(rdir)
    if (records / "train.jsonl").exists() or not info.get("tracking_identity"):
        return False
    cfg = info["config"]
    tags = _run_tags(params, run, info)
    lines = [
        {
            "type": "run",
            "identity": info["tracking_identity"],
            "run_name": tracking.run_name(run, cfg, params.get("runs")),
            "tags": tags,
            "params": tracking.param_values(cfg),
        }
    ]
    lines += _train_log(rdir, info, end_ms)
    lines.append(
        {"type": "artifact", "path": "run.json", "artifact_path": None, "sha256": io.sha256_file(rdir / "run.json")}
    )
    if info.get("finished"):
        lines.append({"type": "status", "status": "FINISHED"})
    metrics = metrics_file(rdir)
    evals = []
    if metrics.exists():
        rows = io.read_jsonl(metrics)
        evals = eval_records(rows, checkpoint_times(lines, sorted({int(r["step"]) for r in rows}), end_ms))
        if (eval_dir(rdir) / "predictions").is_dir():
            evals.append(predictions_artifact(eval_dir(rdir)))
    if end_ms:  # the MLflow run's own start and end: its first and last record, not the time of this rebuild
        stamps = [int(r["timestamp"]) for r in lines + evals if "timestamp" in r] or [int(end_ms)]
        lines[0]["start_time"] = min(stamps)
        for r in lines:
            if r["type"] == "status":
                r["end_time"] = max(max(stamps), int(end_ms))
    io.write_text(records / "eval.jsonl", "".join(json.dumps(r) + "\n" for r in evals))
    io.write_text(records / "train.jsonl", "".join(json.dumps(r) + "\n" for r in lines))
    return True
