"""Where a run lives on disk; the contract between the train, evaluate and analysis stages.

  runs/<run>/run.json                               the resolved config, drawn shots, checkpoint steps
  runs/<run>/checkpoints/checkpoint-<step>/         adapter (or full weights) + oodcorr_checkpoint.json;
                                                    the newest also holds the training state for a resume
  runs/<run>/eval/{metrics.jsonl,predictions/,...}  written by evaluate
"""

from __future__ import annotations

import json
from pathlib import Path

from oodcorr.config import project_path
from oodcorr.errors import UserError

RUN_JSON = "run.json"
META_FILE = "oodcorr_checkpoint.json"
ADAPTER_FILE = "adapter_model.safetensors"


def run_dir(params: dict, run: str) -> Path:
    return project_path(params, "runs") / run


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
