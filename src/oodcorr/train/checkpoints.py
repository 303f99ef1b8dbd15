"""Checkpoint folders of a training run: atomic writes (adapter or full weights + oodcorr_checkpoint.json;
the newest also holds the training state a resume needs) and loading weights back into a model."""

from __future__ import annotations

from pathlib import Path

from oodcorr.rundir import ADAPTER_FILE, META_FILE, checkpoint_dirs

STATE_FILE = "training_state.pt"


def save_checkpoint(model, ckpt_dir: Path, step: int, meta: dict, state: dict | None) -> Path:
    """Atomically write checkpoint-<step>; the training state lives only in the newest checkpoint."""
    import torch

    from oodcorr.io import atomic_dir, write_json

    target = ckpt_dir / f"checkpoint-{step}"
    with atomic_dir(target) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        if state is not None:
            torch.save(state, tmp / STATE_FILE)
        write_json(tmp / META_FILE, {**meta, "step": step})
    if state is not None:
        for s, d in checkpoint_dirs(ckpt_dir).items():
            if s != step and (d / STATE_FILE).exists():
                (d / STATE_FILE).unlink()
    return target


def load_weights(model, ckpt: Path, finetune: str) -> None:
    from safetensors.torch import load_file

    if finetune == "lora":
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(model, load_file(ckpt / ADAPTER_FILE))
    else:
        state = {}
        for f in sorted(ckpt.glob("*.safetensors")):
            state.update(load_file(f))
        model.load_state_dict(state, strict=False)
