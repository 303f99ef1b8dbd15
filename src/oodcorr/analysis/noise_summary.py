"""The summary's "noise" block: reliabilities and noise-corrected shares per method, in plain numbers."""

from __future__ import annotations

from oodcorr.settings.analyze import AnalyzeSettings
from oodcorr.stats.methods import METHODS


def noise_summary(use_noise: bool, settings: AnalyzeSettings, partials, reliability) -> dict:
    """summary.json "noise" block: plain numbers a reader (and MLflow) can compare between analyses."""
    import numpy as np

    metric, reliability_min = settings.metric, settings.reliability_min
    if not use_noise:
        return {
            "enabled": False,
            "metric": metric,
            "note": "no per-example predictions: reliability and noise-corrected CIs skipped",
        }
    out = {
        "enabled": True,
        "metric": metric,
        "reliability_min": reliability_min,
        "ci2": "linear: gp_interval (profile likelihood of a coregionalised Gaussian-process model of the residual "
        "trajectories, seeds pooled in one likelihood); rank/gam: interval.partial_interval",
        "equivalence": settings.equivalence,
        "methods": {},
    }
    for m, g in partials.groupby("method"):
        if not METHODS[m].noise or g["ci2_low"].isna().all() and g["rel_a"].isna().all():
            continue
        rel = reliability[(reliability["method"] == m) & (reliability["metric"] == metric)]["reliability"]
        fin = g[np.isfinite(g["r"])]
        out["methods"][m] = {
            "median_reliability": float(rel.median()) if rel.notna().any() else None,
            "share_reliable": float((rel >= reliability_min).mean()) if len(rel) else None,
            "share_distinguishable": float(fin["distinguishable"].mean()) if len(fin) else None,
            "share_equivalent": float(fin["equivalent"].mean()) if len(fin) else None,
            "mean_abs_r": float(fin["r"].abs().mean()) if len(fin) else None,
            "mean_abs_r_disattenuated": float(fin["r_disattenuated"].abs().mean())
            if fin["r_disattenuated"].notna().any()
            else None,
        }
    # the summary's `_linear_` key (astype: an empty mask would select columns, not rows)
    ols = reliability["method"].map(lambda m: METHODS[m].operator == "ols").astype(bool)
    by_metric = reliability[ols].groupby("metric")["reliability"].median()
    out["median_reliability_linear_by_metric"] = {
        k: (float(v) if np.isfinite(v) else None) for k, v in by_metric.items()
    }
    return out
