"""The method table: per method, its residualiser, whether it controls for ID, its residual operator for item
halves, which noise-corrected interval it gets, which columns it fills, and which requested method is primary.
Nothing outside this table branches on a method's name (tests/test_method_table.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from oodcorr.stats.residualise import GAM_MIN_N, _boot_linear, _boot_rank, _gam, _linear, _rank_linear, _raw


@dataclass(frozen=True)
class Method:
    """One row of the method table: everything the analysis does differently per method is read from here."""

    residualise: Callable  # (x (n,), Y (n, T)) -> (residuals (n, T), k per column: controls' df)
    controls: bool  # regresses out ID (False: raw r, k = 0: a reference, never a verdict)
    boot: Callable | None  # batched (xb, Yb) -> residuals of a resample; None: resample the fitted residuals
    min_n: int = 0  # fewer checkpoints: every pair NaN + too_few_checkpoints
    # the residual operator its reliability and two-level bootstrap apply to item halves: "ols" (OLS on ID),
    # "ranked_ols" (OLS on ranks; halves re-ranked), "smooth" (the GCV spline fitted on the whole testset), None
    operator: str | None = None
    # its noise-corrected interval (ci2): "seeds_likelihood" (stats.pair_ci2: one Gaussian-process likelihood
    # over the seeds), "per_run" (stats.interval.partial_interval, seeds pooled on Fisher z), None (no ci2)
    interval: str | None = None
    ci2boot: bool = False  # the two-level bootstrap view (ci2boot_*) is reported beside ci2

    @property
    def noise(self) -> bool:  # has reliability / noise-corrected CIs
        return self.interval is not None


METHODS: dict[str, Method] = {
    "raw": Method(_raw, controls=False, boot=lambda xb, Yb: Yb),
    "linear": Method(
        _linear, controls=True, boot=_boot_linear, operator="ols", interval="seeds_likelihood", ci2boot=True
    ),
    "rank": Method(
        _rank_linear, controls=True, boot=_boot_rank, operator="ranked_ols", interval="per_run", ci2boot=True
    ),
    "gam": Method(_gam, controls=True, boot=None, min_n=GAM_MIN_N, operator="smooth", interval="per_run"),
}
REFERENCES = tuple(m for m, spec in METHODS.items() if not spec.controls)  # always computed, never a verdict


def primary(methods) -> str | None:
    """The method the verdicts, headline numbers and summary are read from: the first requested (analyze.methods
    order) that regresses out ID."""
    return next((m for m in methods if m in METHODS and METHODS[m].controls), None)


def drawn_smooth(methods) -> str | None:
    """The method whose fit the residual scatter grid draws: a smoother if one is analysed, else the primary."""
    return next((m for m in methods if METHODS[m].operator == "smooth"), None) or primary(methods)
