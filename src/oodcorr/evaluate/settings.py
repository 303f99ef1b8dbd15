"""The evaluate stage's settings: params.yaml `evaluate` resolved once, with its defaults and value checks in
this one place. Unset dtype / max_length mean "as the run was trained" (run_settings.resolve_config)."""

from __future__ import annotations

from dataclasses import dataclass

from oodcorr.errors import UserError


@dataclass(frozen=True)
class EvaluateSettings:
    testsets: tuple[str, ...] = ()  # besides each run's ID testset
    batch_size: int | str = "auto"  # examples per forward pass, or auto (sized from free memory)
    dtype: str | None = None  # None: the run's training dtype
    max_length: int | None = None  # None: the run's training max_length
    quiet: bool = False  # no progress bar or summary

    def __post_init__(self):
        bs = self.batch_size
        if isinstance(bs, str) and bs != "auto" or isinstance(bs, int) and bs < 1:
            raise UserError(f"params: evaluate.batch_size: expected a positive int or 'auto', got {bs!r}")

    @classmethod
    def from_params(cls, params: dict) -> "EvaluateSettings":
        ev = params.get("evaluate") or {}
        return cls(testsets=tuple(str(n) for n in ev.get("testsets") or ()),
                   batch_size=ev.get("batch_size", cls.batch_size), dtype=ev.get("dtype") or None,
                   max_length=ev.get("max_length") or None, quiet=bool(ev.get("quiet")))
