"""Interval engines the analysis and the planner no longer use, kept for the benchmarks and tests that compare
against them (the package plans and decides with oodcorr.stats.gp_interval / gp_design only):

  power(), checkpoints_for_power(), power_table(), effective_dof()
      AR(1) power of the Fisher interval of the attenuated correlation with the effective number of
      checkpoints of interval.z_dof (the planner's earlier `--detect-r` engine)
  disattenuate(), disattenuated_ci()
      the earlier noise-corrected interval: the observed r's Fisher CI divided by sqrt(rel_a rel_b)
      (independent checkpoints, exact ID)

Import it from a bench script as `import superseded` (with bench/stats/ on sys.path), from a test with
study_helpers.load_script(REPO / "bench" / "stats" / "superseded.py").
"""

from __future__ import annotations

import math

import numpy as np

from oodcorr.core.errors import UserError
from oodcorr.stats.defaults import ALPHA, RELIABILITY_MIN

MAX_CHECKPOINTS = 1024  # larger designs are reported as not reachable
ITEM_COUNTS = (64, 128, 256, 350, 500, 1000, 2000)


def _trend_residual_maker(n: int):
    from oodcorr.stats.interval import residual_maker

    s = np.linspace(0, 1, n)
    return residual_maker(1 - np.exp(-4 * s))  # the ID trend shape of the simulator (saturating)


def effective_dof(n: int, phi: float, rel: float, r1: float = 0.0) -> float:
    """n_eff - 3 - k of the interval (interval.z_dof) for two residual trajectories of n checkpoints: AR(1)
    signals (lag-1 autocorrelation phi, correlation r1) plus independent item noise giving reliability `rel`."""
    from oodcorr.stats.interval import ar1_corr, z_dof

    if n <= 4:
        return 0.0
    M = _trend_residual_maker(n)
    R = ar1_corr(min(max(phi, 0.0), 0.99), n)
    v = float(np.trace(M @ R)) * (1 - rel) / (rel * np.trace(M))  # per-checkpoint noise variance (signal var 1)
    S = R + v * np.eye(n)
    return float(max(z_dof(M, S, S, 0 * R), z_dof(M, S, S, r1 * R)))  # as the interval: the larger


def power(n: int, r1: float, rel: float, phi: float = 0.0, seeds: int = 1, alpha: float = ALPHA) -> float:
    """Probability that the seed-pooled noise-corrected CI excludes 0 when the noise-free partial r is r1: the
    interval excludes 0 iff the Fisher interval of the attenuated r (r1 * rel) does."""
    from scipy import stats

    dof = effective_dof(n, phi, rel, min(abs(r1), 0.99))
    if not dof > 0 or rel <= 0:
        return math.nan
    z = math.atanh(min(abs(r1), 0.995) * rel) * math.sqrt(dof * seeds)
    q = stats.norm.ppf(1 - alpha / 2)
    return float(stats.norm.sf(q - z) + stats.norm.cdf(-q - z))


def checkpoints_for_power(
    r1: float,
    rel: float,
    target: float = 0.8,
    phi: float = 0.0,
    seeds: int = 1,
    alpha: float = ALPHA,
    max_checkpoints: int = MAX_CHECKPOINTS,
):
    """Smallest n with power >= target (None if not reached by max_checkpoints): doubling, then bisection."""

    def ok(n):
        p = power(n, r1, rel, phi, seeds, alpha)
        return np.isfinite(p) and p >= target

    lo, hi = 6, 12
    while not ok(hi):
        if hi >= max_checkpoints:
            return None
        lo, hi = hi + 1, min(2 * hi, max_checkpoints)
    while lo < hi:  # power rises with n
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def power_table(
    signal_var: float,
    noise_var_item: float,
    r1: float,
    target: float = 0.8,
    phi: float = 0.0,
    seeds: int = 1,
    items=ITEM_COUNTS,
    rel_product: float | None = None,
    alpha: float = ALPHA,
) -> list[dict]:
    """Rows {items, reliability, checkpoints, n_eff, power} for each testset size (and one row at a stated
    reliability product rel_a * rel_b when given: items None). `reliability` is each trajectory's (both equal)."""
    if not 0 < abs(r1) < 1:
        raise UserError(f"plan: --detect-r must be in (0, 1) in absolute value, got {r1}")
    if not 0 < target < 1:
        raise UserError(f"plan: --power must be in (0, 1), got {target}")
    if not 0 <= phi < 1:
        raise UserError(f"plan: --phi must be in [0, 1), got {phi}")
    cases = [(k, signal_var / (signal_var + noise_var_item / k)) for k in items] if signal_var > 0 else []
    if rel_product is not None:
        if not 0 < rel_product < 1:
            raise UserError(f"plan: --reliability-product must be in (0, 1), got {rel_product}")
        cases.append((None, math.sqrt(rel_product)))
    rows = []
    for k, rel in cases:
        n = checkpoints_for_power(r1, rel, target, phi, seeds, alpha)
        rows.append(
            {
                "items": k,
                "reliability": rel,
                "checkpoints": n,
                "n_eff": None if n is None else effective_dof(n, phi, rel, r1) + 4,
                "power": None if n is None else power(n, r1, rel, phi, seeds, alpha),
            }
        )
    return rows


def disattenuate(r, rel_a, rel_b, reliability_min: float = RELIABILITY_MIN):
    """r / sqrt(rel_a * rel_b), clipped to [-1, 1]; NaN where a reliability is < reliability_min or NaN."""
    r, ra, rb = (np.asarray(v, float) for v in (r, rel_a, rel_b))
    ok = np.isfinite(r) & np.isfinite(ra) & np.isfinite(rb) & (ra >= reliability_min) & (rb >= reliability_min)
    with np.errstate(invalid="ignore", divide="ignore"):
        d = np.clip(r / np.sqrt(np.where(ok, ra * rb, np.nan)), -1.0, 1.0)
    return np.where(ok, d, np.nan)


def disattenuated_ci(ci_low, ci_high, rel_a, rel_b, reliability_min: float = RELIABILITY_MIN):
    """Noise-corrected CI: the observed r's Fisher CI divided by sqrt(rel_a * rel_b), clipped to [-1, 1];
    (NaN, NaN) where a reliability is < reliability_min or NaN, or the Fisher CI is undefined."""
    return disattenuate(ci_low, rel_a, rel_b, reliability_min), disattenuate(ci_high, rel_a, rel_b, reliability_min)
