"""The evaluate stage's settings: params.yaml `evaluate` resolved once, with its defaults and value checks in
this one place. Unset dtype / max_length mean "as the run was trained" (run_settings.RunSettings)."""

from __future__ import annotations

from dataclasses import dataclass

from oodcorr.core.errors import UserError
from oodcorr.records.prepared import scored_testsets
from oodcorr.settings.config import MIN_MAX_LENGTH
from oodcorr.settings.run_settings import CHOICES


@dataclass(frozen=True)
class EvaluateSettings:
    testsets: tuple[str, ...] = ()  # besides each run's ID testset (oodcorr.records.prepared.scored_testsets)
    batch_size: int | str = "auto"  # examples per forward pass, or auto (sized from free memory)
    dtype: str | None = None  # None: the run's training dtype
    max_length: int | None = None  # None: the run's training max_length
    quiet: bool = False  # no progress bar or summary

    def __post_init__(self):
        bs = self.batch_size
        if isinstance(bs, str) and bs != "auto" or isinstance(bs, int) and bs < 1:
            raise UserError(f"params: evaluate.batch_size: expected a positive int or 'auto', got {bs!r}")
        if self.dtype is not None and self.dtype not in CHOICES["dtype"]:  # the same choices as a run's dtype
            raise UserError(
                f"params: evaluate.dtype: expected one of {', '.join(CHOICES['dtype'])} (or unset: the "
                f"run's training dtype), got {self.dtype!r}"
            )
        if self.max_length is not None and self.max_length < MIN_MAX_LENGTH:
            raise UserError(f"params: evaluate.max_length: must be >= {MIN_MAX_LENGTH} tokens, got {self.max_length}")

    @classmethod
    def from_params(cls, params: dict) -> EvaluateSettings:
        ev = params.get("evaluate") or {}
        return cls(
            testsets=scored_testsets(params),
            batch_size=ev.get("batch_size", cls.batch_size),
            dtype=ev.get("dtype") or None,
            max_length=ev.get("max_length"),
            quiet=bool(ev.get("quiet")),
        )
