"""What a design is expected to settle: for every pair of kept OOD testsets, the chance that every family gives it
a verdict (the same sign where the true |r| is the design's target, a consistent null where it is 0), each family
with its own signal and item variances where a pilot measured them, through the interval's model (gp_design) and
the study's reliability gate; summed over the pairs, and the hours per settled pair.

A pair is settled when every family's interval excludes 0 on the same side, or every family's lies inside the
equivalence margin: the verdict tables' same-sign / consistent-null rows."""

from __future__ import annotations

import itertools
import math

import numpy as np


def _family_values(t: dict, k: int) -> list[dict]:
    fams = t.get("families") or [t]
    return [fams[i % len(fams)] for i in range(k)]


def pair_settles(n, seeds, a, b, i_ood, leak, ell, r, margin, alpha, floor) -> tuple[float, float]:
    """(P(verdict of the right sign) at |r|, P(consistent null) at 0) for one family's pair, `seeds` seeds."""
    from scipy.stats import norm

    from oodcorr.stats.gp_design import design_curve, design_terms, gate_pass
    from oodcorr.stats.gp_model import KERNEL

    na, nb = a["item_var"] / min(i_ood, a.get("size", i_ood)), b["item_var"] / min(i_ood, b.get("size", i_ood))
    terms = [design_terms(n, na, nb, leak)]
    c = design_curve(terms, a["signal_var"], b["signal_var"], ell, r, alpha, KERNEL, [seeds], floor)
    g0 = gate_pass(terms, a["signal_var"], b["signal_var"], ell, 0.0, floor, KERNEL, [seeds])
    null = float(np.clip(2 * norm.cdf((math.atanh(margin) - c["half"][0]) / c["se0"][0]) - 1, 0, 1))
    return float(c["power"][0] * c["gate"][0]), null * float(g0[0])


def expected_settled(
    model: dict, design: dict, kept: list[str], families: int, margin: float, alpha: float, r: float, floor: float
) -> dict:
    """{"pairs", "if_r" (expected pairs settled if every pair's |r| is r), "if_0" (if every pair's r is 0),
    "per_pair": [{a, b, if_r, if_0}]} for `design` (a budget.search design) over `families` families."""
    ell = model["ell"]
    leak = model["beta"] ** 2 * model["id"]["item_var"] / design["id_items"]
    rows = []
    for name_a, name_b in itertools.combinations(kept, 2):
        ta, tb = model["ood"][name_a], model["ood"][name_b]
        p_r = p_0 = 1.0
        for fa, fb in zip(_family_values(ta, families), _family_values(tb, families)):
            s_r, s_0 = pair_settles(
                design["checkpoints"],
                design["seeds"],
                {**fa, "size": ta["size"]},
                {**fb, "size": tb["size"]},
                design["ood_items"],
                leak,
                ell,
                r,
                margin,
                alpha,
                floor,
            )
            p_r, p_0 = p_r * s_r, p_0 * s_0
        rows.append({"a": name_a, "b": name_b, "if_r": p_r, "if_0": p_0})
    if_r = float(sum(x["if_r"] for x in rows))
    return {
        "pairs": len(rows),
        "if_r": if_r,
        "if_0": float(sum(x["if_0"] for x in rows)),
        "per_pair": rows,
        "hours_per_settled": design["hours"] / if_r if if_r > 0 else math.inf,
    }
