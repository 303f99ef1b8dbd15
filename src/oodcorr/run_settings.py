"""The resolved settings of one run: `runs.<key>` over the `train` section over DEFAULTS, with value checks.

Train and evaluate both read a run through `resolve_config`, so evaluation scores each run with the
settings it was trained with (pattern, verbaliser, max_length, dtype, quantization) and neither stage
imports the other.
"""

from __future__ import annotations

import math

from oodcorr.config import MAX_TEXT, MIN_MAX_LENGTH, deep_merge, resolve_run
from oodcorr.errors import UserError
from oodcorr.prompts import DEFAULT_PATTERN, DEFAULT_VERBALIZER, check_pattern

# Paper-like defaults (few-shot PBFT, Mosbach et al. 2023, with LoRA): 40 epochs over the shots with
# 10% warmup; lr 1e-4 is the usual LoRA rate (their full fine-tuning used 1e-5). Log-spaced checkpoints
# resolve the early training dynamics that the ID/OOD correlation analysis needs.
DEFAULTS = {
    "revision": None, "pattern": DEFAULT_PATTERN, "verbalizer": DEFAULT_VERBALIZER,
    "loss": "full_vocab", "sampling": "balanced",
    "lora": {"r": 8, "alpha": 32, "dropout": 0.1, "target_modules": "auto"}, "finetune": "lora",
    "quantization": "auto", "dtype": "auto", "gradient_checkpointing": "auto", "lr": 1e-4, "weight_decay": 0.0,
    "warmup_ratio": 0.1, "max_grad_norm": 1.0, "batch_size": 8, "grad_accum": 1, "epochs": 40, "max_steps": None,
    "max_length": 256, "checkpoints": {"every": None, "log_spaced": 10}, "quiet": False,
}
# Not in DEFAULTS (so runs trained before it existed keep their identity): optim, default adamw.
OPTIMIZERS = ("adamw", "paged_adamw_8bit")
CHOICES = {"loss": ("full_vocab", "verbalizer"), "sampling": ("balanced", "uniform"), "finetune": ("lora", "full"),
           "quantization": ("auto", "nf4", "none"), "dtype": ("auto", "float32", "bfloat16", "float16")}


def resolve_config(params: dict, run_key: str) -> dict:
    """`runs.<key>` over `train` over DEFAULTS, with value checks (types are checked by config.validate)."""
    cfg = deep_merge(DEFAULTS, resolve_run(params, run_key))
    where = f"params: runs.{run_key}"
    for key in ("lr", "epochs", "weight_decay", "warmup_ratio", "max_grad_norm"):
        value = cfg[key]
        if isinstance(value, float) and not math.isfinite(value):
            raise UserError(f"{where}.{key}: must be a finite number, got {value}")
    for key, allowed in CHOICES.items():
        if cfg[key] not in allowed:
            raise UserError(f"{where}.{key}: expected one of {', '.join(allowed)}, got {cfg[key]!r}")
    for key in ("shots", "batch_size", "grad_accum"):
        if cfg[key] < 1:
            raise UserError(f"{where}.{key}: must be >= 1, got {cfg[key]}")
    if cfg["max_length"] < MIN_MAX_LENGTH:
        raise UserError(f"{where}.max_length: must be >= {MIN_MAX_LENGTH} tokens, got {cfg['max_length']}")
    if not 0 < cfg["lr"] < 1:  # AdamW steps of ~lr per weight: 1 or more destroys any model at once
        raise UserError(f"{where}.lr: must be in (0, 1), got {cfg['lr']}")
    lora = cfg["lora"]
    if not 0 <= lora["dropout"] < 1:
        raise UserError(f"{where}.lora.dropout: must be in [0, 1), got {lora['dropout']}")
    if not lora["alpha"] > 0:
        raise UserError(f"{where}.lora.alpha: must be > 0, got {lora['alpha']}")
    check_pattern(cfg["pattern"], f"{where}.pattern")
    for key in ("pattern", "verbalizer.entailment", "verbalizer.non_entailment"):
        text = cfg["pattern"] if key == "pattern" else cfg["verbalizer"].get(key.split(".")[1], "")
        if len(text) > MAX_TEXT:
            raise UserError(f"{where}.{key}: {len(text)} characters; at most {MAX_TEXT}")
    for key, value in (("lr", cfg["lr"]), ("epochs", cfg["epochs"]), ("lora.r", cfg["lora"]["r"])):
        if value <= 0:
            raise UserError(f"{where}.{key}: must be > 0, got {value}")
    if cfg["gradient_checkpointing"] not in (True, False, "auto"):
        raise UserError(f"{where}.gradient_checkpointing: expected true, false or auto, "
                        f"got {cfg['gradient_checkpointing']!r}")
    if cfg.get("optim", "adamw") not in OPTIMIZERS:
        raise UserError(f"{where}.optim: expected one of {', '.join(OPTIMIZERS)}, got {cfg['optim']!r}")
    if not 0 <= cfg["warmup_ratio"] < 1:
        raise UserError(f"{where}.warmup_ratio: must be in [0, 1), got {cfg['warmup_ratio']}")
    if cfg["max_steps"] is not None and cfg["max_steps"] < 1:
        raise UserError(f"{where}.max_steps: must be >= 1 or null, got {cfg['max_steps']}")
    ck = cfg["checkpoints"]
    if (ck.get("every") is not None and ck["every"] < 1) or (ck.get("log_spaced") is not None and ck["log_spaced"] < 2):
        raise UserError(f"{where}.checkpoints: every must be >= 1 and log_spaced >= 2, got {ck}")
    if cfg["finetune"] == "full" and cfg["quantization"] == "nf4":
        raise UserError(f"{where}: finetune: full cannot train a 4-bit (nf4) model; use quantization: none")
    if cfg["sampling"] == "balanced" and cfg["shots"] % 2:
        raise UserError(f"{where}.shots: balanced sampling needs an even number of shots, got {cfg['shots']}")
    return cfg


def resolve_gradient_checkpointing(value, device: str | None) -> bool:
    """`auto` = on for CUDA (QLoRA of 7-13B models: activations, not weights, decide what fits), off on CPU."""
    if value == "auto":
        return str(device or "").startswith("cuda")
    return bool(value)
