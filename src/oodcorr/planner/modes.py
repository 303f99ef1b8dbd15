"""`oodcorr plan` without --budget: the half-width mode (checkpoints and items for a target interval width) and
the power mode (--detect-r: checkpoints per testset size for a target power), both planned with the interval that
decides the verdicts (gp_interval's model, planned by gp_design) and the study's reliability gate.

Model (budget.py's, one testset pair): each residual trajectory is a Gaussian-process signal (the interval's kernel,
length-scale ell, variance signal_var) plus item noise of variance item_var / I per checkpoint at I items, and the
ID item noise that leaks through the slope on ID (leak). Seeds are independent copies of a run's design.
  reliability(I, n) = budget.reliability (what gp_interval reports as rel_a / rel_b at n checkpoints)
  half-width        = the interval's half-width on r at r0: tanh(atanh(r0) +/- sqrt(lr_cut(df)) se(r0)), the wider
                      side (gp_design.design_curve's se1 and cut)
  power             = gp_design.design_curve's power at |r| times the chance the gate lets the pair give a
                      verdict (gate_pass at the study's analyze.reliability_min)
"""

from __future__ import annotations

import math

import numpy as np

from oodcorr.core.errors import UserError

ITEM_COUNTS = (64, 128, 256, 350, 500, 1000, 2000)
MAX_CHECKPOINTS = 200  # larger designs are reported as not reachable by checkpoints
MAX_PLAN_SEEDS = 64
SEEDS_AT = 17  # where checkpoints alone cannot reach the power: the seeds that do at this many checkpoints


def _terms(n, noise, leak):
    from oodcorr.stats.gp_design import design_terms

    return [design_terms(n, noise, noise, leak)]


def interval_at(
    n: int, signal_var: float, noise: float, leak: float, ell: float, r0: float, alpha: float, floor: float, seeds=(1,)
) -> dict:
    """Arrays over `seeds`: the interval's expected half-width on r at r0, its power at |r0| counting a gated
    family as no verdict, and the gate's pass rate."""
    from oodcorr.stats.gp_design import design_curve
    from oodcorr.stats.gp_interval import lr_cut, n_eff_of
    from oodcorr.stats.gp_model import KERNEL

    terms = _terms(n, noise, leak)
    c = design_curve(
        terms, signal_var, signal_var, ell, r0 if r0 else 1e-6, alpha, KERNEL, np.asarray(seeds, float), floor
    )
    neff = np.asarray(seeds, float) * n_eff_of(terms[0], ell, KERNEL)
    h = np.sqrt(lr_cut(np.maximum(neff - 2 * np.asarray(seeds) - 1, 0.5), alpha)) * c["se1"]
    z0 = math.atanh(min(abs(r0), 0.999))
    centre = min(abs(r0), 1.0)
    half = np.maximum(np.minimum(np.tanh(z0 + h), 1.0) - centre, centre - np.maximum(np.tanh(z0 - h), -1.0))
    return {"half": half, "power": c["power"] * c["gate"], "gate": c["gate"]}


def items_for(rel: float, signal_var: float, item_var: float, n: int, ell: float, leak: float) -> float:
    """Items per testset for reliability `rel` at n checkpoints (inf where the ID leak alone keeps it below)."""
    from oodcorr.planner.budget import kernel_share

    k = signal_var * kernel_share(n, ell)
    room = k * (1 - rel) / rel - leak
    return math.inf if room <= 0 else math.ceil(item_var / room - 1e-9)


def half_width_plan(signal_var, item_var, leak, ell, half_width, target_rel, seeds, r0, alpha, floor) -> dict:
    """The design with the fewest seeds (at least `seeds`; each is a training run), then the fewest checkpoints,
    whose interval's expected half-width at r0 is within `half_width`, with items per testset for `target_rel` at
    that design."""
    if not 0 < target_rel < 1:
        raise UserError(f"plan: --reliability must be in (0, 1), got {target_rel}")
    if not 0 < half_width < 1:
        raise UserError(f"plan: --half-width must be in (0, 1), got {half_width}")
    best = None
    for n in (5, 7, 9, 12, 17, 20, 25, 33, 40, 50, 65, 80, 100, 130, 160, MAX_CHECKPOINTS):
        items = items_for(target_rel, signal_var, item_var, n, ell, leak)
        if items == math.inf:
            continue
        res = interval_at(
            n, signal_var, item_var / items, leak, ell, r0, alpha, floor, np.arange(1, MAX_PLAN_SEEDS + 1)
        )
        ok = np.flatnonzero(res["half"] <= half_width)
        ok = ok[ok >= seeds - 1]
        if not len(ok):
            continue
        s = int(ok[0]) + 1
        if best is None or s < best["seeds"]:  # seeds cost training runs: the fewest, then the fewest checkpoints
            best = {
                "checkpoints_per_run": n,
                "items_per_testset": int(items),
                "seeds": s,
                "expected_half_width": float(res["half"][s - 1]),
                "power": float(res["power"][s - 1]),
            }
    if best is None:
        raise UserError(
            f"plan: no design with <= {MAX_CHECKPOINTS} checkpoints and <= {MAX_PLAN_SEEDS} seeds reaches "
            f"half-width {half_width} (or reliability {target_rel}): the residuals carry too little signal"
        )
    return best | {"reliability": target_rel, "target_half_width": half_width, "r0": r0}


def power_rows(
    signal_var, item_var, leak, ell, r1, target, seeds, items=ITEM_COUNTS, rel_product=None, alpha=0.05, floor=0.5
) -> list[dict]:
    """Rows {items, reliability, checkpoints, power} per testset size: the fewest checkpoints at which the interval
    excludes 0 with probability `target` at |r1| with `seeds` seeds (a gated family counted as no verdict); a
    row at a stated reliability product rel_a * rel_b (items None) where given."""
    from oodcorr.planner.budget import reliability

    if not 0 < abs(r1) < 1:
        raise UserError(f"plan: --detect-r must be in (0, 1) in absolute value, got {r1}")
    if not 0 < target < 1:
        raise UserError(f"plan: --power must be in (0, 1), got {target}")
    if rel_product is not None and not 0 < rel_product < 1:
        raise UserError(f"plan: --reliability-product must be in (0, 1), got {rel_product}")
    cases = [(k, lambda n, k=k: item_var / k) for k in items]
    if rel_product is not None:
        from oodcorr.planner.budget import kernel_share

        each = math.sqrt(rel_product)
        cases.append((None, lambda n: max(signal_var * kernel_share(n, ell) * (1 - each) / each - leak, 1e-12)))

    def pw(n, noise):
        return float(interval_at(n, signal_var, noise(n), leak, ell, abs(r1), alpha, floor, (seeds,))["power"][0])

    rows = []
    for k, noise in cases:
        lo, found = 5, None
        for hi in (5, 10, 20, 40, 80, 160, MAX_CHECKPOINTS):  # doubling, then bisection (power rises with n)
            if pw(hi, noise) >= target:
                found = hi
                break
            lo = hi + 1
        while found is not None and lo < found:
            mid = (lo + found) // 2
            if pw(mid, noise) >= target:
                found = mid
            else:
                lo = mid + 1
        n = found
        rel = reliability(signal_var, item_var, k, n or MAX_CHECKPOINTS, ell, leak) if k else math.sqrt(rel_product)
        row = {"items": k, "reliability": rel, "checkpoints": n, "power": None if n is None else pw(n, noise)}
        if n is None:  # smooth curves: seeds add what checkpoints cannot; the fewest at SEEDS_AT checkpoints
            many = interval_at(
                SEEDS_AT,
                signal_var,
                noise(SEEDS_AT),
                leak,
                ell,
                abs(r1),
                alpha,
                floor,
                np.arange(1, MAX_PLAN_SEEDS + 1),
            )["power"]
            hit = np.flatnonzero(many >= target)
            row["seeds_at"] = {"checkpoints": SEEDS_AT, "seeds": int(hit[0]) + 1 if len(hit) else None}
        rows.append(row)
    return rows
