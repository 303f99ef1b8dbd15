"""results/metrics.json: the few numbers `dvc metrics show` and `dvc exp show` print for a study.

Everything else stays in results/summary.json (not a DVC metric, so DVC does not print its ~40 keys);
add a key here only when it answers "did this study work?" at a glance: `dvc metrics show` prints one column
per key, and on the quickstart the table stays within 200 characters."""

from __future__ import annotations

import math


def _num(value):
    if value is None:
        return None
    value = float(value)
    return round(value, 4) if math.isfinite(value) else None


# results/metrics.json keys; the per-run runs/<run>/eval/summary.json uses the same names for the same
# numbers (step, id_accuracy, ood_accuracy), so `dvc metrics show` has one column per number.
STUDY_KEYS = (
    "n_runs",
    "id_accuracy",
    "ood_accuracy",
    "significant",
    "model_dependent",
    "consistent_null",
    "distinguishable",
    "reliability",
)


def headline(summary: dict, curves, method: str) -> dict:
    """n_runs, mean final ID and OOD accuracy over runs (as each run's summary.json: id_accuracy,
    ood_accuracy), and for the first requested method the share of pairs significant after BH
    (`significant`), the share model-dependent, the number of consistent_null pairs, the share of pairs
    distinguishable from testset noise and the median reliability of the residual trajectories (when the noise
    analysis ran; null where it is none or undefined)."""
    out = {"n_runs": summary.get("n_runs")}
    if curves is not None and len(curves):
        last = curves[curves["step"] == curves.groupby("run")["step"].transform("max")]
        per_run = last.groupby(["run", "role"])["accuracy"].mean().unstack()
        for role in ("id", "ood"):
            if role in per_run:
                out[f"{role}_accuracy"] = _num(per_run[role].mean())
    m = (summary.get("methods") or {}).get(method) or {}
    out["significant"] = _num(m.get("share_significant_bh"))
    out["model_dependent"] = _num(m.get("share_model_dependent"))
    verdicts = m.get("verdicts") or {}
    if "consistent_null" in verdicts:  # pairs with no partial r stronger than analyze.equivalence in any model
        out["consistent_null"] = verdicts["consistent_null"]
    noise = ((summary.get("noise") or {}).get("methods") or {}).get(method) or {}
    if noise:  # testset noise (stats/noise.py): how much of the result is signal
        out["distinguishable"] = _num(noise.get("share_distinguishable"))
        rel = _num(noise.get("median_reliability"))
        # its own scale, 0..1; at or below 0 the halves share no signal: the report's "none", here missing (null,
        # which `dvc metrics show` prints as "-"), never a number that reads as a measured 0
        out["reliability"] = rel if rel is not None and rel > 0 else None
    return out
