"""`oodcorr plan --budget HOURS`: seeds x checkpoints x items per testset that a compute budget buys, chosen for power.

Model: the interval's own (gp_interval, planned with gp_design). Each OOD testset's residual trajectory is a
Gaussian-process signal (the interval's kernel, gp_model.KERNEL, over training progress, length-scale ell,
variance signal_var) plus item noise of variance item_var / I per checkpoint at I items; the ID testset's item noise
(item_var_id / I_id) leaks into both residuals through the slopes on ID (beta^2 item_var_id / I_id, the
observed-control value: the interval's smoothed control leaks less, so this errs towards more ID items). Seeds
share the correlation; each is an independent copy of the design (design_power's `copies`), so smooth curves
gain information from seeds, not from more checkpoints of the same curve.

  reliability(I, n)  = signal_var k / (signal_var k + item_var / I)   (k: the residual space's mean kernel
                       variance at n checkpoints, as gp_interval reports its rel_a / rel_b)
  power              = design_curve(n checkpoints, the median reliable testset at I items on both sides,
                       rho = 0.5, copies = seeds) times the chance that the reliability gate lets the family give a
                       verdict (gp_design.gate_pass: both fitted reliabilities reach the floor);
                       0 where any kept testset's reliability at I items, with the
                       ID leak, stays below RELIABILITY_FLOOR in any family (a pilot's families each with their
                       own signal and item variances): the verdicts read a pair only when both reach it in both
  consistent null    = P(both ends of the interval inside +/- margin | rho = 0), the estimate normal with the
                       null standard error se0 and the interval's half-width h on atanh rho:
                       2 Phi((atanh(margin) - h) / se0) - 1
  hours              = seeds x families x [train hours per run
                       + checkpoints x (ID items + sum over kept OOD testsets of min(I, size)) / examples_per_s / 3600]
                       less the training of the seeds already trained (cost's trained_seeds: extending a study whose
                       runs exist, at the checkpoint count they were trained with, costs their scoring only; every
                       item is priced as scored again, since a new item count is a new testset)

Search: seeds 1..MAX_SEEDS, checkpoints in CHECKPOINTS, ID and OOD items in 128, 256, ... up to each testset's
size; testsets whose reliability stays below RELIABILITY_FLOOR at their full size in any family are left out (and
not scored): each costs only its own pairs, the rest are planned.
The design with the highest power within the budget wins (ties: the consistent null's power, then fewer hours).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from oodcorr.stats.defaults import ALPHA, EQUIVALENCE, RELIABILITY_MIN

CHECKPOINTS = (9, 12, 17, 20, 25, 33, 40, 50, 65)
MAX_SEEDS = 64
FIRST_ITEMS = 128
RELIABILITY_FLOOR = RELIABILITY_MIN  # the default gate; a study's own analyze.reliability_min replaces it (floor=)
TARGET_R = 0.5
TARGET_POWER = 0.8
# where the predicted power was checked against the interval's simulated power
# (bench/planner/plan_power_check.py): within 0.04 with >= CHECKED_SEEDS seeds carrying >= CHECKED_NEFF effectively
# independent checkpoints each; up to 0.07 too high at about 4.5 per seed (smoother curves) and with one seed
CHECKED_NEFF = 5.0
CHECKED_SEEDS = 3


def one_thread():
    """BLAS on one thread where threadpoolctl is installed: the planner's matrices are small, threads only contend."""
    import contextlib

    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(1)


def item_grid(size: int) -> list[int]:
    """128, 256, ... below `size`, and `size` itself (a testset smaller than 128: its size only)."""
    out, i = [], FIRST_ITEMS
    while i < size:
        out.append(i)
        i *= 2
    return out + [int(size)]


@functools.lru_cache(maxsize=256)
def kernel_share(n: int, ell: float) -> float:
    """Mean signal variance per unit signal_var left in the residual space of n checkpoints (gp_interval's rel)."""
    from oodcorr.stats.gp_design import design_terms
    from oodcorr.stats.gp_model import KERNEL, _kernel_mats

    s = design_terms(n, 1.0, 1.0)
    return float(np.trace(_kernel_mats(s, np.array([ell]), KERNEL)[0][0]) / s["m"])


def reliability(signal_var: float, item_var: float, items: int, n: int, ell: float, leak: float = 0.0) -> float:
    k = signal_var * kernel_share(n, ell)
    return k / (k + item_var / items + leak)


def full_size_reliability(model: dict, checkpoints=CHECKPOINTS) -> tuple[dict, dict]:
    """({testset: reliability}, {testset: family}): each OOD testset's residual reliability at its full size, the ID
    testset's at its full size leaking in, at the checkpoint count that suits it best, in its least reliable family
    (a pilot measures each family; stated values have one). A pair settles only when every family reads both of its
    testsets, so a testset below the floor here could settle no pair: it is left out, and costs only its own pairs."""
    ell, idt = model["ell"], model["id"]
    leak = model["beta"] ** 2 * idt["item_var"] / idt["size"]
    rel, fam = {}, {}
    for name, t in model["ood"].items():
        rel[name], fam[name] = min(
            (
                max(reliability(f["signal_var"], f["item_var"], t["size"], n, ell, leak) for n in checkpoints),
                f.get("name"),
            )
            for f in t.get("families") or [t]
        )
    return rel, fam


def _curve(n, noise, leak, sa2, ell, margin, alpha, seeds, r=TARGET_R, floor=RELIABILITY_FLOOR):
    """(power at |r|, consistent-null probability, gate pass at |r|, gate pass at 0) for each number of seeds
    (module notes); power and null count a family the reliability gate silences as no verdict."""
    from scipy.stats import norm

    from oodcorr.stats.gp_design import design_curve, design_terms, gate_pass
    from oodcorr.stats.gp_model import KERNEL

    terms = [design_terms(n, noise, noise, leak)]
    c = design_curve(terms, sa2, sa2, ell, r, alpha, KERNEL, copies=seeds, floor=floor)
    gate0 = gate_pass(terms, sa2, sa2, ell, 0.0, floor, KERNEL, seeds)
    null = np.clip(2 * norm.cdf((math.atanh(margin) - c["half"]) / c["se0"]) - 1, 0.0, 1.0)
    return c["power"] * c["gate"], null * gate0, c["gate"], gate0


def search(
    model: dict,
    budget: float,
    cost: dict,
    margin: float = EQUIVALENCE,
    alpha: float = ALPHA,
    target: float = TARGET_POWER,
    r: float = TARGET_R,
    checkpoints=CHECKPOINTS,
    floor: float = RELIABILITY_FLOOR,
) -> dict:
    """The best design within `budget` hours, the best per checkpoint count, and the cheapest designs that reach
    `target` power at |r| (for the correlation alone and with the consistent null), over `checkpoints` counts.
    model: {"ood": {name: {signal_var, item_var, size}}, "id": {item_var, size}, "ell", "beta"}; cost:
    {families, train_h, examples_per_s}. margin, alpha, floor: the study's analyze.equivalence, alpha and
    reliability_min (the verdicts' own)."""
    ell, beta = model["ell"], model["beta"]
    rel_full, weakest_family = full_size_reliability(model, checkpoints)
    kept = sorted(name for name, r in rel_full.items() if r >= floor)
    out = {
        "reliability_full": rel_full,
        "weakest_family": weakest_family,
        "kept": kept,
        "target_power": target,
        "target_r": r,
        "floor": floor,
        "dropped": sorted(set(rel_full) - set(kept)),
        "rows": [],
    }
    if len(kept) < 2:
        return out
    ts = [model["ood"][k] for k in kept]
    seeds = np.arange(1, MAX_SEEDS + 1)
    rows = []
    with one_thread():
        for n in checkpoints:
            for i_id in item_grid(model["id"]["size"]):
                leak = beta * beta * model["id"]["item_var"] / i_id
                for i_ood in item_grid(max(t["size"] for t in ts)):
                    design = (n, i_id, i_ood, leak)
                    rows.append(_row(design, ell, kept, ts, cost, (margin, alpha, seeds, r, floor)))
    out["rows"] = rows
    out["best"] = _best(rows, budget, floor=floor)
    per_n = {n: _best([r for r in rows if r["checkpoints"] == n], budget, floor=floor) for n in checkpoints}
    out["by_checkpoints"] = [b for b in per_n.values() if b and b["weakest"] >= floor]
    out["below_floor"] = [n for n, b in per_n.items() if b and b["weakest"] < floor]  # none reaches it
    out["reach"] = _cheapest(rows, lambda r: r["power"] >= target)
    out["reach_both"] = _cheapest(rows, lambda r: (r["power"] >= target) & (r["null"] >= target))
    return out


def _row(design: tuple, ell: float, kept: list, ts: list, cost: dict, verdicts: tuple) -> dict:
    """One design of the search (n checkpoints, ID and OOD items, the ID leak): its power, null and gate curves
    over seeds, priced on the median testset's pair in its weakest family, and its hours per seed."""
    n, i_id, i_ood, leak = design
    floor = verdicts[-1]
    noise = [t["item_var"] / min(i_ood, t["size"]) for t in ts]
    snr = [t["signal_var"] / v for t, v in zip(ts, noise)]
    j = int(np.argsort(snr)[(len(ts) - 1) // 2])  # the median testset (lower middle), both sides
    # the weakest kept testset in its weakest family: every pair kept must be readable
    weakest = min(
        (reliability(f["signal_var"], f["item_var"], min(i_ood, t["size"]), n, ell, leak), k)
        for k, t in zip(kept, ts)
        for f in t.get("families") or [t]
    )
    # the median testset's pair in each family with that family's own variances: the weakest prices it
    fams = ts[j].get("families") or [ts[j]]
    rel, fam = min(
        (reliability(f["signal_var"], f["item_var"], min(i_ood, ts[j]["size"]), n, ell, leak), f.get("name"))
        for f in fams
    )
    if weakest[0] < floor:  # a verdict reads a pair only once both reach the floor
        power = null = gate = gate0 = np.zeros(len(verdicts[2]))
    else:
        size = min(i_ood, ts[j]["size"])
        curves = [_curve(n, f["item_var"] / size, leak, f["signal_var"], ell, *verdicts) for f in fams]
        power, null, gate, gate0 = np.min(curves, axis=0)
    scored = i_id + sum(min(i_ood, t["size"]) for t in ts)
    return {
        "checkpoints": n,
        "id_items": i_id,
        "ood_items": i_ood,
        "score_h": cost["families"] * n * scored / cost["examples_per_s"] / 3600,
        "train_h": cost["families"] * cost["train_h"],
        "trained": int(cost.get("trained_seeds") or 0),
        "power": power,
        "null": null,
        "gate": gate,
        "gate0": gate0,
        "leak": leak,
        "median_testset": kept[j],
        "median_family": fam,
        "reliability": rel,
        "weakest": weakest[0],
        "weakest_testset": weakest[1],
    }


def _hours(row, s):
    """Hours of `s` seeds of a row's design (module notes): every seed scored, the untrained ones trained too."""
    return s * row["score_h"] + np.maximum(np.asarray(s) - row["trained"], 0) * row["train_h"]


def prediction_caveat(design: dict, ell: float) -> str:
    """One line where a design lies outside the regime the prediction was checked in ("" inside it)."""
    from oodcorr.stats.gp_design import design_terms
    from oodcorr.stats.gp_interval import n_eff_of
    from oodcorr.stats.gp_model import KERNEL

    neff = n_eff_of(design_terms(design["checkpoints"], 1.0, 1.0), ell, KERNEL)
    here = (
        [f"each seed carries about {neff:.1f} effectively independent checkpoints"] if neff < CHECKED_NEFF else []
    ) + (
        [f"the design has {design['seeds']} seed{'s' if design['seeds'] > 1 else ''}"]
        if design["seeds"] < CHECKED_SEEDS
        else []
    )
    if not here:
        return ""
    return (
        f"the prediction was checked with >= {CHECKED_SEEDS} seeds of >= {CHECKED_NEFF:g} effectively "
        f"independent checkpoints each; here {' and '.join(here)}, where it has run up to 0.07 above the "
        f"interval's simulated power: measure it with --simulate 100"
    )


def _design(row, s) -> dict:
    keys = ("checkpoints", "id_items", "ood_items", "median_testset", "median_family", "reliability")
    keys += ("weakest", "weakest_testset")
    return {k: row[k] for k in keys} | {
        "seeds": int(s),
        "hours": float(_hours(row, s)),
        "power": float(row["power"][s - 1]),
        "null_power": float(row["null"][s - 1]),
        "gate": float(row["gate"][s - 1]),
        "gate_null": float(row["gate0"][s - 1]),
    }


def _best(rows, budget, tol: float = 0.005, floor: float = RELIABILITY_FLOOR):
    """The cheapest design within `budget` whose power is within `tol` of the most any design there reaches, and
    whose consistent-null power is within `tol` of the most among those."""
    seeds = np.arange(1, MAX_SEEDS + 1)
    afford = [(row, int(np.sum(_hours(row, seeds) <= budget + 1e-9))) for row in rows]  # hours rise with seeds
    afford = [(row, s) for row, s in afford if s >= 1]
    # a design that reaches the reliability floor, however weak, before one that does not (power 0)
    afford = [(row, s) for row, s in afford if row["weakest"] >= floor] or afford
    if not afford:
        return None
    top = max(row["power"][s - 1] for row, s in afford) - tol
    top_null = max(row["null"][s - 1] for row, s in afford if row["power"][s - 1] >= top) - tol
    return _cheapest(
        [
            {
                **row,
                "power": row["power"][:s],
                "null": row["null"][:s],
                "gate": row["gate"][:s],
                "gate0": row["gate0"][:s],
            }
            for row, s in afford
        ],
        lambda r: (r["power"] >= top) & (r["null"] >= top_null),
    )


def _cheapest(rows, ok):
    best = None
    for row in rows:
        hit = np.flatnonzero(ok(row))
        if len(hit):
            d = _design(row, hit[0] + 1)
            if best is None or d["hours"] < best["hours"]:
                best = d
    return best
