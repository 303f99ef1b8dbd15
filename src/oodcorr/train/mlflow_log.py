"""The training run's tracking record: params and tags once, train/loss and train/lr per step, appended to
runs/<run>/tracking/train.jsonl first (oodcorr.tracking.mirror), then mirrored into MLflow on each checkpoint and
at the end (best effort: a store that is down costs one warning, `oodcorr sync` replays it later)."""

from __future__ import annotations

import hashlib
import json
import time

from oodcorr.settings.project import Project
from oodcorr.settings.run_settings import RunSettings
from oodcorr.tracking import mirror


class MetricLog:
    """train/* metrics: each step appended locally at once; mirrored to MLflow on flush()."""

    def __init__(self, project: Project, run: str):
        self.project, self.run, self.t = project, run, time.time()

    def log(self, step: int, **values) -> None:
        mirror.append(self.project, self.run, mirror.metric_rows(values, step))
        if time.time() - self.t > 30:
            self.flush()

    def flush(self) -> None:
        mirror.push(self.project, self.run)
        self.t = time.time()


def run_identity(cfg_identity: dict, examples_sha256: str) -> str:
    """What makes two attempts the same training run (a resume) rather than a new one."""
    blob = json.dumps({"config": cfg_identity, "examples": examples_sha256}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def run_label(params: dict, run_key: str, cfg: dict) -> tuple[str, dict]:
    """(MLflow run name, extra tags) of a training run: its name beside the study's other runs (tracking.run_name),
    with the DVC experiment it runs in appended (`smollm2-135m s0 · bijou-tabs`), the experiment's name and
    changed params as tags, and its family's colour (tracking.experiments)."""
    from oodcorr.tracking import experiments
    from oodcorr.tracking.store import run_name

    extra = experiments.dvc_experiment(params.get("_path"))
    color = experiments.run_color(cfg, params.get("runs"))
    if color:
        extra[experiments.COLOR_TAG] = color
    extra[experiments.STUDY_TAG] = str((params.get("study") or {}).get("name", "default"))
    return run_name(run_key, cfg, params.get("runs")) + experiments.exp_suffix(extra), extra


def start_record(
    project: Project, run: RunSettings, info: dict, identity: str, name: str, extra: dict | None = None
) -> str | None:
    """Begin (or continue) the run's local record, named `name` in MLflow (run_label) with the `extra` tags, and
    mirror it; the MLflow run id, or None if unreachable."""
    from oodcorr.tracking import experiments
    from oodcorr.tracking import store as tracking

    root = project.resolved_root
    tags = {
        "oodcorr.run_key": run.run,
        tracking.KIND_TAG: tracking.TRAIN_KIND,
        "oodcorr.model": run.model,
        "oodcorr.model_revision": str(info.get("revision")),
        **experiments.dvc_data_hashes(root),
        **(extra or {}),
    }
    commit = experiments.git_commit(root)
    if commit:
        tags["mlflow.source.git.commit"] = commit
    cfg = run.as_dict()
    mirror.start_train(project, run.run, identity, tags, tracking.param_values(cfg), name)
    return mirror.push(project, run.run)


def finish_record(project: Project, run: str, run_json_sha: str) -> str | None:
    mirror.append(
        project,
        run,
        [
            {"type": "artifact", "path": "run.json", "artifact_path": None, "sha256": run_json_sha},
            {"type": "status", "status": "FINISHED"},
        ],
    )
    return mirror.push(project, run)
