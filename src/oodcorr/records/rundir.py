"""Where a run lives on disk; the contract between the train, evaluate and analysis stages.

  runs/<run>/run.json                               the resolved config, drawn shots, checkpoint steps
  runs/<run>/checkpoints/checkpoint-<step>/         adapter (or full weights) + oodcorr_checkpoint.json;
                                                    the newest also holds the training state for a resume
  runs/<run>/eval/{metrics.jsonl,predictions/,...}  written by evaluate
  runs/<run>/tracking/                              local tracking records replayed into MLflow
                                                    (oodcorr.tracking.mirror)
Every stage builds these paths with the functions below, never by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

from oodcorr.core.errors import UserError
from oodcorr.settings.project import Project

RUNS = "runs"
RUN_JSON = "run.json"
CHECKPOINTS = "checkpoints"
EVAL = "eval"
METRICS_FILE = "metrics.jsonl"
PREDICTIONS = "predictions"
TRACKING = "tracking"
META_FILE = "oodcorr_checkpoint.json"
ADAPTER_FILE = "adapter_model.safetensors"


def runs_root(project: Project | dict) -> Path:
    return Project.of(project).path(RUNS)


def run_dir(project: Project | dict, run: str) -> Path:
    return runs_root(project) / run


def checkpoints_dir(rdir: Path) -> Path:
    return Path(rdir) / CHECKPOINTS


def checkpoint_dir(rdir: Path, step: int) -> Path:
    return checkpoints_dir(rdir) / f"checkpoint-{step}"


def eval_dir(rdir: Path) -> Path:
    return Path(rdir) / EVAL


def metrics_file(rdir: Path) -> Path:
    return eval_dir(rdir) / METRICS_FILE


def tracking_dir(rdir: Path) -> Path:
    return Path(rdir) / TRACKING


def read_run_json(rdir: Path) -> dict:
    """run.json of a run folder ({} when the run was never started)."""
    path = rdir / RUN_JSON
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise UserError(f"{path}:{e.lineno}: invalid JSON ({e.msg})") from None


def checkpoint_dirs(ckpt_dir: Path) -> dict[int, Path]:
    """Complete checkpoints by step (atomic_dir temporaries start with '.' and are skipped)."""
    out = {}
    for d in ckpt_dir.glob("checkpoint-*") if ckpt_dir.is_dir() else []:
        if (d / META_FILE).exists() and d.name.split("-", 1)[1].isdigit():
            out[int(d.name.split("-", 1)[1])] = d
    return dict(sorted(out.items()))
