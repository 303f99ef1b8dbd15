"""The noise columns of a seed-pooled row: the seeds' noise-corrected intervals pooled, or their joint likelihood."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def _pool_noise(valid: pd.DataFrame, alpha: float) -> dict:
    """Seed pooling of the noise columns: over the seeds where the noise-corrected CI is defined, the attenuated
    r (r_disattenuated * attenuation) pooled on Fisher z by inverse variance (ci2_se: its z-scale standard error),
    the interval divided by the same-weighted mean attenuation (interval.disattenuated_bounds); mean
    reliabilities; disattenuated r: the interval's own centre, tanh(pooled z) / mean attenuation clipped to
    [-1, 1], so it lies inside the interval (where no seed's interval is defined: the Fisher-z mean of the seeds'
    disattenuated r)."""
    from oodcorr.stats.interval import disattenuated_bounds

    out = {"ci2_low": math.nan, "ci2_high": math.nan, "ci2_se": math.nan, "n_eff": math.nan, "attenuation": math.nan}
    cols = ("ci2_low", "ci2_high", "ci2_se", "attenuation", "r_disattenuated")
    lo, hi, se, att, d = (valid[c].to_numpy(float) if c in valid else np.full(len(valid), np.nan) for c in cols)
    ok = np.isfinite(lo) & np.isfinite(hi) & np.isfinite(se) & (se > 0) & np.isfinite(d) & np.isfinite(att)
    if ok.any():
        w = 1 / se[ok] ** 2
        z = float((w * np.arctanh(np.clip(d[ok] * att[ok], -0.995, 0.995))).sum() / w.sum())
        a = float((w * att[ok]).sum() / w.sum())
        s = float(1 / math.sqrt(w.sum()))
        low, high = disattenuated_bounds(math.tanh(z), a, s, alpha)
        out.update(
            ci2_low=float(low),
            ci2_high=float(high),
            ci2_se=s,
            attenuation=a,
            r_disattenuated=float(np.clip(math.tanh(z) / a, -1, 1)),
            n_eff=float(valid["n_eff"].to_numpy(float)[ok].sum()) if "n_eff" in valid else math.nan,
        )
    else:
        d = d[np.isfinite(d)]
        out["r_disattenuated"] = (
            float(np.tanh(np.arctanh(np.clip(d, -1 + 1e-12, 1 - 1e-12)).mean())) if len(d) else math.nan
        )
    out["rel_a"] = float(valid["rel_a"].mean()) if valid["rel_a"].notna().any() else math.nan
    out["rel_b"] = float(valid["rel_b"].mean()) if valid["rel_b"].notna().any() else math.nan
    return out


def _from_likelihood(iv: dict) -> dict:
    """The pooled row's noise columns from the seeds' joint likelihood interval (pair_ci2.interval)."""
    from oodcorr.stats.pair_ci2 import CI2_EXTRA

    ok = not iv["reason"]
    nan = math.nan
    return {
        **{col: iv.get(k, "" if col == "ci2_why" else nan) for col, k in CI2_EXTRA.items()},
        "ci2_low": iv["ci_low"] if ok else nan,
        "ci2_high": iv["ci_high"] if ok else nan,
        "ci2_se": iv["se_z"] if ok else nan,
        "n_eff": iv["n_eff"],
        "attenuation": iv["A"],
        "r_disattenuated": float(np.clip(iv["r_hat"], -1, 1)) if ok else nan,
        "rel_a": iv["rel_a"],
        "rel_b": iv["rel_b"],
    }
