"""The resolved settings of one run: `runs.<key>` over the `train` section over the defaults below, with
value checks, as one frozen `RunSettings`.

Train and evaluate both read a run through `RunSettings.from_params`, so evaluation scores each run with
the settings it was trained with (pattern, verbaliser, max_length, dtype, quantization) and neither stage
imports the other.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields

from oodcorr.core.choices import DEFAULT_PATTERN, DEFAULT_VERBALIZER, check_pattern, check_seed
from oodcorr.core.errors import UserError, closest
from oodcorr.settings.config import MAX_TEXT, MIN_MAX_LENGTH, RUN_SCHEMA, deep_merge, typename
from oodcorr.settings.names import check_run_key

# Not recorded when unset (so runs trained before it existed keep their identity): optim, default adamw.
OPTIMIZERS = ("adamw", "paged_adamw_8bit")
CHOICES = {
    "loss": ("full_vocab", "verbalizer"),
    "sampling": ("balanced", "uniform"),
    "finetune": ("lora", "full"),
    "quantization": ("auto", "nf4", "none"),
    "dtype": ("auto", "float32", "bfloat16", "float16"),
}
# The run's own entry (no train-section default), recorded after the train settings in params' order.
ENTRY_KEYS = ("model", "train_set", "id_testset", "shots", "data_seed", "seed", "optim")
REQUIRED = ("model", "train_set", "id_testset", "shots")


@dataclass(frozen=True)
class LoraSettings:
    r: int = 8
    alpha: float = 32
    dropout: float = 0.1
    target_modules: str | tuple[str, ...] = "auto"  # auto: the architecture's defaults (model_loading)

    @classmethod
    def of(cls, lora: LoraSettings | dict | None) -> LoraSettings:
        if isinstance(lora, cls):
            return lora
        lora = dict(lora or {})
        if isinstance(lora.get("target_modules"), list):
            lora["target_modules"] = tuple(lora["target_modules"])
        return cls(**lora)

    def as_dict(self) -> dict:
        tm = self.target_modules
        return {**asdict(self), "target_modules": list(tm) if isinstance(tm, tuple) else tm}


@dataclass(frozen=True)
class CheckpointSettings:
    every: int | None = None  # a checkpoint every N steps
    log_spaced: int | None = 10  # N log-spaced checkpoints (the early dynamics the analysis needs)


# Paper-like defaults (few-shot PBFT, Mosbach et al. 2023, with LoRA): 40 epochs over the shots with
# 10% warmup; lr 1e-4 is the usual LoRA rate (their full fine-tuning used 1e-5). Log-spaced checkpoints
# resolve the early training dynamics that the ID/OOD correlation analysis needs.
@dataclass(frozen=True, kw_only=True)
class RunSettings:
    revision: str | None = None
    pattern: str = DEFAULT_PATTERN
    verbalizer: dict = field(default_factory=lambda: dict(DEFAULT_VERBALIZER))
    loss: str = "full_vocab"
    sampling: str = "balanced"
    lora: LoraSettings = LoraSettings()
    finetune: str = "lora"
    quantization: str = "auto"
    dtype: str = "auto"
    gradient_checkpointing: bool | str = "auto"
    lr: float = 1e-4
    weight_decay: float = 0.0
    warmup_ratio: float = 0.1
    max_grad_norm: float | None = 1.0
    batch_size: int = 8
    grad_accum: int = 1
    epochs: float = 40
    max_steps: int | None = None
    max_length: int = 256
    checkpoints: CheckpointSettings = CheckpointSettings()
    quiet: bool = False
    model: str
    train_set: str
    id_testset: str
    shots: int
    data_seed: int = 0
    seed: int = 0
    optim: str | None = None  # None: adamw, and not recorded
    run: str
    entry_order: tuple[str, ...] = field(default=ENTRY_KEYS, repr=False, compare=False)  # as params gave them

    @classmethod
    def from_params(cls, params: dict, run_key: str) -> RunSettings:
        """`runs.<key>` over `train` over the defaults; UserError for an unknown run, a missing key or a bad
        value (types are checked by config.validate)."""
        runs = params.get("runs") or {}
        check_run_key(run_key, "--run")
        if run_key not in runs:
            raise UserError(
                f"unknown run {run_key!r}{closest(run_key, runs)}; runs in params: {', '.join(runs) or 'none'}"
            )
        merged = deep_merge(params.get("train") or {}, runs[run_key] or {})
        for required in REQUIRED:
            if required not in merged:
                raise UserError(
                    f"params: runs.{run_key}.{required}: missing (expected {typename(RUN_SCHEMA[required])})"
                )
        values = {k: v for k, v in merged.items() if k not in ("lora", "checkpoints", "verbalizer")}
        return cls(
            **values,
            run=run_key,
            verbalizer={**DEFAULT_VERBALIZER, **(merged.get("verbalizer") or {})},
            lora=LoraSettings.of(merged.get("lora")),
            checkpoints=CheckpointSettings(**(merged.get("checkpoints") or {})),
            entry_order=tuple(k for k in merged if k in ENTRY_KEYS),
        )

    @property
    def optimizer(self) -> str:
        return self.optim or OPTIMIZERS[0]

    def as_dict(self) -> dict:
        """The resolved run as run.json's `config` and the MLflow params record it (key order included)."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "entry_order"}
        values.update(verbalizer=dict(self.verbalizer), lora=self.lora.as_dict(), checkpoints=asdict(self.checkpoints))
        if self.optim is None:
            del values["optim"]
        head = [k for k in values if k not in ENTRY_KEYS and k != "run"]
        keys = dict.fromkeys([*head, *(k for k in (*self.entry_order, *ENTRY_KEYS) if k in values), "run"])
        return {k: values[k] for k in keys}

    def __post_init__(self):
        where = f"params: runs.{self.run}"
        for key in ("lr", "epochs", "weight_decay", "warmup_ratio", "max_grad_norm"):
            value = getattr(self, key)
            if isinstance(value, float) and not math.isfinite(value):
                raise UserError(f"{where}.{key}: must be a finite number, got {value}")
        for key, allowed in CHOICES.items():
            if getattr(self, key) not in allowed:
                raise UserError(f"{where}.{key}: expected one of {', '.join(allowed)}, got {getattr(self, key)!r}")
        check_seed(self.seed, f"{where}.seed")
        for key in ("shots", "batch_size", "grad_accum"):
            if getattr(self, key) < 1:
                raise UserError(f"{where}.{key}: must be >= 1, got {getattr(self, key)}")
        if self.max_length < MIN_MAX_LENGTH:
            raise UserError(f"{where}.max_length: must be >= {MIN_MAX_LENGTH} tokens, got {self.max_length}")
        if not 0 < self.lr < 1:  # AdamW steps of ~lr per weight: 1 or more destroys any model at once
            raise UserError(f"{where}.lr: must be in (0, 1), got {self.lr}")
        if not 0 <= self.lora.dropout < 1:
            raise UserError(f"{where}.lora.dropout: must be in [0, 1), got {self.lora.dropout}")
        if not self.lora.alpha > 0:
            raise UserError(f"{where}.lora.alpha: must be > 0, got {self.lora.alpha}")
        check_pattern(self.pattern, f"{where}.pattern")
        for key, text in (
            ("pattern", self.pattern),
            ("verbalizer.entailment", self.verbalizer.get("entailment", "")),
            ("verbalizer.non_entailment", self.verbalizer.get("non_entailment", "")),
        ):
            if len(text) > MAX_TEXT:
                raise UserError(f"{where}.{key}: {len(text)} characters; at most {MAX_TEXT}")
        for key, value in (("lr", self.lr), ("epochs", self.epochs), ("lora.r", self.lora.r)):
            if value <= 0:
                raise UserError(f"{where}.{key}: must be > 0, got {value}")
        if self.gradient_checkpointing not in (True, False, "auto"):
            raise UserError(
                f"{where}.gradient_checkpointing: expected true, false or auto, got {self.gradient_checkpointing!r}"
            )
        if self.optim is not None and self.optim not in OPTIMIZERS:
            raise UserError(f"{where}.optim: expected one of {', '.join(OPTIMIZERS)}, got {self.optim!r}")
        if not 0 <= self.warmup_ratio < 1:
            raise UserError(f"{where}.warmup_ratio: must be in [0, 1), got {self.warmup_ratio}")
        if self.max_steps is not None and self.max_steps < 1:
            raise UserError(f"{where}.max_steps: must be >= 1 or null, got {self.max_steps}")
        ck = self.checkpoints
        if (ck.every is not None and ck.every < 1) or (ck.log_spaced is not None and ck.log_spaced < 2):
            raise UserError(f"{where}.checkpoints: every must be >= 1 and log_spaced >= 2, got {asdict(ck)}")
        if self.finetune == "full" and self.quantization == "nf4":
            raise UserError(f"{where}: finetune: full cannot train a 4-bit (nf4) model; use quantization: none")
        if self.sampling == "balanced" and self.shots % 2:
            raise UserError(f"{where}.shots: balanced sampling needs an even number of shots, got {self.shots}")


def resolve_gradient_checkpointing(value, device: str | None) -> bool:
    """`auto` = on for CUDA (QLoRA of 7-13B models: activations, not weights, decide what fits), off on CPU."""
    if value == "auto":
        return str(device or "").startswith("cuda")
    return bool(value)
