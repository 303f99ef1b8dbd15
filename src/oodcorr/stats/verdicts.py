"""The verdicts: whether models agree on a pair of testsets, from their pooled r, p values and intervals."""

from __future__ import annotations

import numpy as np

from oodcorr.stats.defaults import ALPHA, EQUIVALENCE, RELIABILITY_MIN


def unreliable_flags(a: str, b: str, rel_a: float, rel_b: float, reliability_min: float = RELIABILITY_MIN) -> list[str]:
    """`unreliable:<testset>` for each of a pair's testsets whose reliability is missing or below the threshold."""
    return [f"unreliable:{t}" for t, v in ((a, rel_a), (b, rel_b)) if not (np.isfinite(v) and v >= reliability_min)]


def equivalent(ci_low, ci_high, delta: float = EQUIVALENCE):
    """TOST on an interval: True where [ci_low, ci_high] lies inside (-delta, +delta) (NaN ends: False)."""
    lo, hi = np.asarray(ci_low, float), np.asarray(ci_high, float)
    with np.errstate(invalid="ignore"):
        return np.isfinite(lo) & np.isfinite(hi) & (lo > -delta) & (hi < delta)


def verdict(r, p_adj, alpha: float = ALPHA, ci_low=None, ci_high=None, equivalence: float = EQUIVALENCE) -> str:
    """Verdict from per-model pooled r and adjusted p (criteria in consistency.py's docstring); with the models'
    CIs, consistent_null when every model with a finite r (>= 2) has its CI inside +/- equivalence."""
    r, p_adj = np.asarray(r, float), np.asarray(p_adj, float)
    ok = np.isfinite(r)
    sig = ok & np.isfinite(p_adj) & (p_adj < alpha)
    pos, neg = int((sig & (r > 0)).sum()), int((sig & (r < 0)).sum())
    if pos and neg:
        return "model_dependent"
    if ok.sum() >= 2 and pos >= 2:
        return "consistent_positive"
    if ok.sum() >= 2 and neg >= 2:
        return "consistent_negative"
    if (
        ci_low is not None
        and ok.sum() >= 2
        and equivalent(np.asarray(ci_low, float)[ok], np.asarray(ci_high, float)[ok], equivalence).all()
    ):
        return "consistent_null"
    return "insufficient_evidence"


def noise_verdict(
    r, ci2_low, ci2_high, rel_a, rel_b, reliability_min: float = RELIABILITY_MIN, equivalence: float = EQUIVALENCE
) -> str:
    """Verdict counting a model's sign only where its noise-corrected CI (ci2) excludes 0, over reliable models."""
    r, lo, hi, ra, rb = (np.asarray(v, float) for v in (r, ci2_low, ci2_high, rel_a, rel_b))
    fin = np.isfinite(r)
    reliable = fin & np.isfinite(ra) & np.isfinite(rb) & (ra >= reliability_min) & (rb >= reliability_min)
    if fin.sum() >= 2 and reliable.sum() < 2:
        return "unreliable"
    sig = reliable & np.isfinite(lo) & np.isfinite(hi) & ((lo > 0) | (hi < 0))
    pos, neg = int((sig & (r > 0)).sum()), int((sig & (r < 0)).sum())
    if pos and neg:
        return "model_dependent"
    if pos >= 2:
        return "consistent_positive"
    if neg >= 2:
        return "consistent_negative"
    if reliable.sum() >= 2 and equivalent(lo[reliable], hi[reliable], equivalence).all():
        return "consistent_null"
    return "insufficient_evidence"
