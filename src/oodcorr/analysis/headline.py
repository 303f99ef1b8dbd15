"""results/metrics.json: the few numbers `dvc metrics show` and `dvc exp show` print for a study.

Everything else stays in results/summary.json (not a DVC metric, so DVC does not print its ~40 keys);
add a key here only when it answers "did this study work?" at a glance."""

from __future__ import annotations

import math


def _num(value):
    if value is None:
        return None
    value = float(value)
    return round(value, 4) if math.isfinite(value) else None


def headline(summary: dict, curves, method: str) -> dict:
    """n runs/models, mean final ID and OOD accuracy over runs, and for the first requested method the
    share of pairs significant after BH, the share model-dependent, the number of consistent_null pairs, and a
    reliability share when the
    summary has one (any top-level `share_reliable*` key, and the noise block's share of reliable testsets,
    share of pairs distinguishable from noise and median reliability)."""
    out = {"n_runs": summary.get("n_runs"), "n_models": summary.get("n_models")}
    if curves is not None and len(curves):
        last = curves[curves["step"] == curves.groupby("run")["step"].transform("max")]
        per_run = last.groupby(["run", "role"])["accuracy"].mean().unstack()
        for role in ("id", "ood"):
            if role in per_run:
                out[f"{role}_accuracy_final"] = _num(per_run[role].mean())
    m = (summary.get("methods") or {}).get(method) or {}
    out[f"{method}_share_significant_bh"] = _num(m.get("share_significant_bh"))
    out[f"{method}_share_model_dependent"] = _num(m.get("share_model_dependent"))
    verdicts = m.get("verdicts") or {}
    if "consistent_null" in verdicts:  # pairs with no partial r stronger than analyze.equivalence in any model
        out[f"{method}_consistent_null"] = verdicts["consistent_null"]
    for key, value in summary.items():
        if key.startswith("share_reliable") and isinstance(value, (int, float)):
            out[key] = _num(value)
    noise = ((summary.get("noise") or {}).get("methods") or {}).get(method) or {}
    for key in ("share_reliable", "share_distinguishable", "median_reliability"):
        if key in noise:  # testset noise (analysis/noise.py): how much of the result is signal
            out[f"{method}_{key}"] = _num(noise[key])
    return out
