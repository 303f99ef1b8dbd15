"""The linear method's noise-corrected interval (ci2) per run and per model, and what it says in words.

Per run: gp_interval on that run alone. Per model (pooled_seeds.csv): one likelihood over all of the model's
seeds (they share the correlation, the signal variances and the length-scale; each keeps its own ID curve,
slopes and item noise), so a pooled interval exists whenever the seeds together carry the information, even
where every seed alone is too short. Optionally one shared estimate over the models (`shared_rows`).

Inputs are plain per-run dicts (noise_tables.seed_inputs): {"t": (n,) training progress in [0, 1], "id": the ID
testset, "series": {testset: (n,)}, "V": {testset: (n, n) item-noise covariance}}.
"""

from __future__ import annotations

import math

from oodcorr.stats.gp_design import seeds_for_power
from oodcorr.stats.gp_even import even_interval
from oodcorr.stats.gp_interval import gp_interval

# columns this module adds to the partial-correlation and pooled tables (the existing ci2 columns are filled too):
# column -> key of interval()'s result
CI2_EXTRA = {
    "ci2_ell": "ell",
    "ci2_why": "why",
    "r_even": "r_even",
    "ci2even_low": "even_low",
    "ci2even_high": "even_high",
}
PLAN_R = 0.5  # the correlation the words size a study for
PLAN_POWER = 0.8
SHOWN = 2  # decimals the words show a reliability, a width and a power with: every choice of words reads them


def seed_dict(data: dict, a: str, b: str) -> dict:
    s, V = data["series"], data["V"]
    return {"x": s[data["id"]], "ya": s[a], "yb": s[b], "Vx": V[data["id"]], "Va": V[a], "Vb": V[b], "t": data["t"]}


def interval(inputs: list[dict], a: str, b: str, alpha: float) -> dict:
    """gp_interval over the runs in `inputs` for the pair (a, b), with the table's columns and its words, and the
    even-weight estimate beside it (gp_even)."""
    res = gp_interval([seed_dict(d, a, b) for d in inputs], alpha)
    even = even_interval(res["terms"], res, alpha) if not res["reason"] else {}
    lo, hi = res["ci_low"], res["ci_high"]
    se = math.nan
    if math.isfinite(lo) and math.isfinite(hi) and -1 < lo and hi < 1:
        se = (math.atanh(hi) - math.atanh(lo)) / (2 * 1.959964)
    return {
        "r_hat": res["r_hat"],
        "ci_low": lo,
        "ci_high": hi,
        "se_z": se,
        "rel_a": res["rel_a"],
        "rel_b": res["rel_b"],
        "A": math.sqrt(res["rel_a"] * res["rel_b"]) if res["rel_a"] >= 0 and res["rel_b"] >= 0 else math.nan,
        "n_eff": res["n_eff"],
        "ell": res["ell"],
        "kernel": res["kernel"],
        "reason": res["reason"],
        "why": words(res, len(inputs)),
        "r_even": even.get("r", math.nan),
        "even_low": even.get("ci_low", math.nan),
        "even_high": even.get("ci_high", math.nan),
    }


def words(res: dict, n_runs: int) -> str:
    """Why an interval says little, in a user's words ("" where it excludes 0 or is narrow). Every threshold reads
    its number rounded to SHOWN decimals, so another CPU's last bits cannot change a word or a count."""
    if res["reason"]:
        return {
            "few_checkpoints": "fewer than 5 checkpoints, or an ID series that does not move",
            "constant": "a testset's residual trajectory does not move",
        }.get(res["reason"], res["reason"])
    lo, hi = res["ci_low"], res["ci_high"]
    if lo > 0 or hi < 0 or round(hi - lo, SHOWN) <= 0.6:
        return ""
    seeds = "seed" if n_runs == 1 else "seeds"
    text = f"about {res['n_eff']:.0f} effectively independent checkpoints over {n_runs} {seeds}"
    low = [f"{t} {r:.2f}" for t, r in (("a", res["rel_a"]), ("b", res["rel_b"])) if round(r, SHOWN) < 0.5]
    if low:
        text += f"; item noise dominates (reliability {', '.join(low)}: more items per testset)"
    need = (
        seeds_for_power(
            res["terms"], res["sa2"], res["sb2"], res["ell"], PLAN_R, PLAN_POWER, kernel=res["kernel"], decimals=SHOWN
        )
        if res["terms"] and res["sa2"] > 0
        else None
    )
    if need is None:
        text += f"; `oodcorr plan`: out of reach by seeds alone at |r| = {PLAN_R}"
    elif need > n_runs:
        text += f"; `oodcorr plan` suggests {need} seeds like these for 80 % power at |r| = {PLAN_R}"
    return text
