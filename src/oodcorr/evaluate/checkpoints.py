"""The checkpoints of a run as evaluation sees them: every folder plus the steps run.json promises,
each checked cheaply (headers only) so a bad one is named and skipped, not a crash."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from oodcorr.core import io
from oodcorr.records.rundir import ADAPTER_FILE, META_FILE, checkpoint_dir, checkpoints_dir


@dataclass
class Checkpoint:
    step: int
    name: str
    path: Path
    sha256: str | None = None
    error: str | None = None


def check_checkpoint(ck: Checkpoint, model: str, model_path: str) -> str | None:
    """Why this checkpoint of a run of base `model` (found at `model_path`) cannot be evaluated, or None.
    Cheap: header reads only, no weights."""
    if not ck.path.is_dir():
        return "missing (listed in run.json, no folder)"
    adapter, config = ck.path / ADAPTER_FILE, ck.path / "adapter_config.json"
    for f in (adapter, config):
        if not f.exists():
            return f"{f.name} missing"
    docs = {}
    for f in (config, ck.path / META_FILE):
        try:
            docs[f.name] = json.loads(f.read_text()) if f.exists() else {}
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            return f"{f.name} is not valid JSON ({e})"
    acfg, meta = docs[config.name], docs[META_FILE]
    if meta.get("model") and meta["model"] != model:
        return f"trained from a different base model ({meta['model']!r}, this run uses {model!r})"
    base = acfg.get("base_model_name_or_path")
    if (
        base
        and base not in (model, model_path, meta.get("model_path"))
        and Path(base).name not in (Path(model_path).name, Path(model).name)
    ):
        return f"trained from a different base model ({base!r}, this run uses {model!r})"
    try:
        from safetensors import safe_open

        with safe_open(str(adapter), framework="pt") as f:
            if not list(f.keys()):
                return f"{ADAPTER_FILE} holds no tensors"
    except Exception as e:  # truncated / not safetensors
        return f"{ADAPTER_FILE} is corrupt ({type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''})"
    return None


def list_checkpoints(rdir: Path, model: str, model_path: str, expected_steps=(), finished=True) -> list[Checkpoint]:
    """Every checkpoint-<step> folder plus steps run.json lists but that are gone; errors filled in."""
    found: dict[int, Checkpoint] = {}
    for d in sorted(checkpoints_dir(rdir).glob("checkpoint-*")):
        if d.is_dir() and (m := re.fullmatch(r"checkpoint-(\d+)", d.name)):  # others (.tmp dirs) are not ours
            found[int(m.group(1))] = Checkpoint(int(m.group(1)), d.name, d)
    newest = max(found, default=-1)
    for step in [s for s in expected_steps or () if finished or s <= newest]:  # later ones: not trained yet
        found.setdefault(int(step), Checkpoint(int(step), f"checkpoint-{step}", checkpoint_dir(rdir, step)))
    out = [found[s] for s in sorted(found)]
    for ck in out:
        ck.error = check_checkpoint(ck, model, model_path)
        if ck.error is None:
            ck.sha256 = io.sha256_file(ck.path / ADAPTER_FILE)
    return out
