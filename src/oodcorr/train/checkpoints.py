"""Checkpoint folders of a training run: atomic writes (adapter or full weights + oodcorr_checkpoint.json;
the newest also holds the training state a resume needs) and loading weights back into a model.

The training state is stored without pickle: tensors (optimizer moments, RNG states) in
training_state.safetensors, everything else (step, scheduler, param groups, Python/NumPy RNG scalars) in
training_state.json. A legacy training_state.pt is read with torch.load(weights_only=True) only."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from oodcorr.core.io import sha256_file
from oodcorr.records.rundir import ADAPTER_FILE, META_FILE, checkpoint_dirs

STATE_FILE = "training_state.json"  # written last: its presence marks a resumable checkpoint
STATE_TENSORS = "training_state.safetensors"
LEGACY_STATE = "training_state.pt"
STATE_FILES = (STATE_FILE, STATE_TENSORS, LEGACY_STATE)


RESUME_DIR = "resume"  # runs/<run>/resume/checkpoint-<step>/: the training state of every older checkpoint
RESUME_INFO = "checkpoint.json"  # {"step", "weights_sha256"}: which weights the state belongs to


def resume_dir(ckpt_dir: Path) -> Path:
    """Where the training states of a run's older checkpoints are kept (next to checkpoints/, listed in
    .dvcignore: never part of the checkpoints' DVC hash), so a deleted checkpoint is rebuilt from the nearest
    earlier one instead of from step 0."""
    return ckpt_dir.parent / RESUME_DIR


def weights_sha256(d: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    for f in sorted(d.glob("*.safetensors")):
        if f.name != STATE_TENSORS:
            h.update(f.name.encode() + bytes.fromhex(sha256_file(f)))
    return h.hexdigest()


def stash_state(ckpt_dir: Path, step: int) -> None:
    """Move checkpoint-<step>'s training state into resume/checkpoint-<step> (with its weights' hash)."""
    from oodcorr.core.io import atomic_dir, write_json

    src = ckpt_dir / f"checkpoint-{step}"
    if not (src / STATE_FILE).exists():
        drop_state(src)
        return
    with atomic_dir(resume_dir(ckpt_dir) / f"checkpoint-{step}") as tmp:
        write_json(tmp / RESUME_INFO, {"step": step, "weights_sha256": weights_sha256(src)})
        for name in (STATE_TENSORS, STATE_FILE):
            os.replace(src / name, tmp / name)
    drop_state(src)


def restore_state(ckpt_dir: Path, step: int) -> bool:
    """Put the kept training state of checkpoint-<step> back into its folder when it belongs to the weights
    there (same hash), so training resumes from that checkpoint; False when there is none that fits."""
    import shutil

    from oodcorr.core.io import atomic_path

    kept, d = resume_dir(ckpt_dir) / f"checkpoint-{step}", ckpt_dir / f"checkpoint-{step}"
    try:
        info = json.loads((kept / RESUME_INFO).read_text())
    except (OSError, ValueError):
        return False
    if not d.is_dir() or not (kept / STATE_TENSORS).is_file() or info.get("weights_sha256") != weights_sha256(d):
        return False
    for name in (STATE_TENSORS, STATE_FILE):  # STATE_FILE last: its presence marks a resumable checkpoint
        with atomic_path(d / name) as tmp:
            shutil.copyfile(kept / name, tmp)
    return True


def keeps_states(run) -> bool:
    """LoRA / QLoRA runs keep every checkpoint's training state (about twice the adapter's size); a full
    fine-tune only the newest (twice the model per checkpoint would be too much)."""
    return run.finetune == "lora"


def put_away_state(ckpt_dir: Path, step: int, run) -> None:
    """checkpoint-<step>'s training state out of the checkpoint folder (a DVC output): kept in resume/ or deleted."""
    d = ckpt_dir / f"checkpoint-{step}"
    if has_state(d):
        stash_state(ckpt_dir, step) if keeps_states(run) else drop_state(d)


def resume_point(ckpt_dir: Path, steps, missing: list[int], run) -> int:
    """Before rebuilding the `missing` checkpoints: every training state goes out of the checkpoint folders,
    then the nearest checkpoint before the first missing one whose weights are intact and whose kept state
    belongs to them gets it back (training resumes there). Its step, or -1 (train from step 0)."""
    for s in checkpoint_dirs(ckpt_dir):
        put_away_state(ckpt_dir, s, run)
    earlier = [s for s in sorted(int(x) for x in steps) if s < missing[0]]
    return next((s for s in reversed(earlier) if restore_state(ckpt_dir, s)), -1)


def has_state(d: Path) -> bool:
    return (d / STATE_FILE).exists() or (d / LEGACY_STATE).exists()


def drop_state(d: Path) -> None:
    for name in STATE_FILES:
        (d / name).unlink(missing_ok=True)


def _split(obj, prefix: str, tensors: dict):
    """Nested state -> JSON-able structure with tensors / arrays replaced by {"__tensor__": key}."""
    import numpy as np
    import torch

    if isinstance(obj, torch.Tensor):
        tensors[prefix] = obj.detach().cpu().contiguous()
        return {"__tensor__": prefix}
    if isinstance(obj, np.ndarray):
        tensors[prefix] = torch.from_numpy(obj.astype(np.int64) if obj.dtype == np.uint32 else obj.copy())
        return {"__ndarray__": prefix, "dtype": str(obj.dtype)}
    if isinstance(obj, dict):
        return {
            "__dict__": [
                [_split(k, f"{prefix}.k{i}", tensors), _split(v, f"{prefix}.{i}", tensors)]
                for i, (k, v) in enumerate(obj.items())
            ]
        }
    if isinstance(obj, tuple):
        return {"__tuple__": [_split(v, f"{prefix}.{i}", tensors) for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_split(v, f"{prefix}.{i}", tensors) for i, v in enumerate(obj)]
    if isinstance(obj, float) and obj != obj:
        return {"__float__": "nan"}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, (np.integer, np.floating)):
        return obj.item()
    raise TypeError(f"training state: cannot store {type(obj).__name__} at {prefix}")


def _join(obj, tensors: dict):
    import numpy as np

    if isinstance(obj, list):
        return [_join(v, tensors) for v in obj]
    if isinstance(obj, dict):
        if "__tensor__" in obj:
            return tensors[obj["__tensor__"]]
        if "__ndarray__" in obj:
            return tensors[obj["__ndarray__"]].numpy().astype(np.dtype(obj["dtype"]))
        if "__tuple__" in obj:
            return tuple(_join(v, tensors) for v in obj["__tuple__"])
        if "__dict__" in obj:
            return {_join(k, tensors): _join(v, tensors) for k, v in obj["__dict__"]}
        if "__float__" in obj:
            return float(obj["__float__"])
    return obj


def save_state(folder: Path, state: dict) -> None:
    from safetensors.torch import save_file

    tensors: dict = {}
    tree = _split(state, "s", tensors)
    save_file(tensors, str(folder / STATE_TENSORS))
    (folder / STATE_FILE).write_text(json.dumps(tree))


def load_state(folder: Path) -> dict:
    if not (folder / STATE_FILE).exists() and (folder / LEGACY_STATE).exists():
        return _load_legacy(folder / LEGACY_STATE)
    from safetensors.torch import load_file

    return _join(json.loads((folder / STATE_FILE).read_text()), load_file(str(folder / STATE_TENSORS)))


def _load_legacy(path: Path) -> dict:
    """A training_state.pt from an older version, without unpickling arbitrary objects."""
    import numpy as np
    import torch

    allowed = (
        [np.ndarray, np.dtype, type(np.dtype("uint32")), np.core.multiarray._reconstruct]
        if hasattr(np, "core")
        else [np.ndarray, np.dtype]
    )
    with torch.serialization.safe_globals(allowed):
        return torch.load(path, weights_only=True, map_location="cpu")


def missing_checkpoints(ckpt_dir: Path, steps, upto: int) -> list[int]:
    """Scheduled steps <= `upto` whose checkpoint folder is gone or incomplete (no metadata or no weights)."""
    have = checkpoint_dirs(ckpt_dir)
    out = []
    for step in sorted(int(s) for s in steps or ()):
        d = have.get(step)
        if step <= upto and (d is None or not any(f.name != STATE_TENSORS for f in d.glob("*.safetensors"))):
            out.append(step)
    return out


def save_checkpoint(model, ckpt_dir: Path, step: int, meta: dict, state: dict | None, run=None) -> Path:
    """Atomically write checkpoint-<step>; the training state lives in the newest checkpoint, older ones' are
    put away (put_away_state)."""
    from oodcorr.core.io import atomic_dir, honour_umask_tree, write_json

    target = ckpt_dir / f"checkpoint-{step}"
    with atomic_dir(target) as tmp:
        try:
            model.save_pretrained(tmp, safe_serialization=True)
            portable_adapter_config(tmp, meta.get("model"))
            if state is not None:
                save_state(tmp, state)
        except OSError:
            raise
        except Exception as e:  # safetensors reports a full disk as SafetensorError
            if re.search(
                r"StorageFull|No space left|File too large|FileTooLarge|Disk quota|os error (27|28|122)\b", str(e)
            ):
                import errno

                raise OSError(errno.ENOSPC, "No space left on device", str(target)) from None
            raise
        write_json(tmp / META_FILE, {**meta, "step": step})
        honour_umask_tree(tmp)
    if state is not None:
        for s, d in checkpoint_dirs(ckpt_dir).items():
            if s != step:
                put_away_state(ckpt_dir, s, run)
    return target


def portable_adapter_config(folder: Path, model: str | None) -> None:
    """peft records the base model's local folder (a machine path) in adapter_config.json and README.md, and
    target_modules in set order (differs per process); record the model alias / hub id and a sorted list
    instead, so checkpoint hashes (dvc.lock) are the same on every machine."""
    if not model:
        return
    cfg = folder / "adapter_config.json"
    if cfg.exists():
        doc = json.loads(cfg.read_text())
        doc["base_model_name_or_path"] = model
        if isinstance(doc.get("target_modules"), list):  # peft keeps a set: its order follows PYTHONHASHSEED
            doc["target_modules"] = sorted(doc["target_modules"])
        cfg.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    readme = folder / "README.md"
    if readme.exists():
        import re

        text = readme.read_text()
        text = re.sub(r"(?m)^base_model: .*$", f"base_model: {model}", text)
        text = re.sub(r"(?m)^(- base_model:)\S.*$", rf"\1{model}", text)
        readme.write_text(text)


def load_weights(model, ckpt: Path, finetune: str) -> None:
    from safetensors.torch import load_file

    if finetune == "lora":
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(model, load_file(ckpt / ADAPTER_FILE))
    else:
        state = {}
        for f in sorted(ckpt.glob("*.safetensors")):
            if f.name != STATE_TENSORS:
                state.update(load_file(f))
        model.load_state_dict(state, strict=False)
