"""Near the reliability gate: how far a silenced family's testsets fell below analyze.reliability_min and how many
more items per testset would lift them over it.

A testset's reliability (the signal share of its residual trajectory) grows with its item count as Spearman-Brown
says for k times the items: rel' = k rel / (1 + (k - 1) rel). Solving rel' = gate for k gives

    k = gate (1 - rel) / (rel (1 - gate)),

the factor on the items that lifts rel to the gate at the same signal level. The fitted reliability's noise part
also holds the ID smoother's leftover error, which more OOD items do not shrink, so k is the least that could
lift it. A reliability at or below 0 (no signal above testset noise) cannot be lifted by items alone: no k. Nor,
in practice, can one that needs more than PRACTICAL_FACTOR times its items: the words say so instead of a factor
of millions.

The reliability here is the interval's fitted reliability of the residual after ID (partial_correlations.csv
rel_a / rel_b), the one the gate reads; reliability.csv's split-half reliability is a separate estimate.
"""

from __future__ import annotations

import math

from oodcorr.stats.defaults import RELIABILITY_MIN

PRACTICAL_FACTOR = 100.0  # more than this many times a testset's items is no practical way to lift it


def spearman_brown(rel: float, k: float) -> float:
    """Reliability of a testset with k times the items: k rel / (1 + (k - 1) rel)."""
    return k * rel / (1 + (k - 1) * rel)


def items_factor(rel: float, target: float = RELIABILITY_MIN) -> float | None:
    """The factor on the items that lifts reliability `rel` to `target` (1.0 where it is there already); None where
    rel is not finite or <= 0 (no signal to lift) or target is not in (0, 1)."""
    if rel is None or not math.isfinite(rel) or rel <= 0 or not 0 < target < 1:
        return None
    if rel >= target:
        return 1.0
    return target * (1 - rel) / (rel * (1 - target))


def gate_gaps(rels: dict, reliability_min: float = RELIABILITY_MIN, n_items: dict | None = None) -> list[dict]:
    """Per testset below the gate ({name: reliability}, in order): {"testset", "reliability", "below_by", "factor",
    "items" (the item count that would lift it, where n_items gives the current one), "lift" (False: no signal)}.
    Testsets at or above the gate are left out; a missing (NaN) reliability counts as below, with no factor."""
    out = []
    for name, rel in rels.items():
        rel = float(rel) if rel is not None else math.nan
        if math.isfinite(rel) and rel >= reliability_min:
            continue
        k = items_factor(rel, reliability_min)
        n = (n_items or {}).get(name)
        out.append(
            {
                "testset": name,
                "reliability": rel,
                "below_by": reliability_min - rel if math.isfinite(rel) else math.nan,
                "factor": k,
                "items": math.ceil(k * n - 1e-9) if k is not None and n else None,
                "lift": k is not None,
            }
        )
    return out


def gate_words(rels: dict, reliability_min: float = RELIABILITY_MIN, n_items: dict | None = None) -> str:
    """The gate's words for one family ("" where every testset clears it), e.g. "held back by the reliability gate
    (0.5, on the fitted reliability): sick 0.42, 0.08 below; about 1.4 times its items (512 -> 704) would lift
    it"."""
    gaps = gate_gaps(rels, reliability_min, n_items)
    if not gaps:
        return ""
    parts = []
    for g in gaps:
        if not math.isfinite(g["reliability"]):
            parts.append(f"{g['testset']}: no reliability (the interval did not fit)")
        elif not g["lift"]:
            parts.append(
                f"{g['testset']} {g['reliability']:.2f}: no signal above testset noise, so more items "
                "alone will not lift it"
            )
        elif g["factor"] > PRACTICAL_FACTOR:
            parts.append(
                f"{g['testset']} {g['reliability']:.2f}, {g['below_by']:.2f} below; no practical number of items "
                f"would lift it (it would take over {PRACTICAL_FACTOR:.0f} times its items)"
            )
        else:
            items = f" ({(n_items or {})[g['testset']]} -> {g['items']})" if g["items"] is not None else ""
            parts.append(
                f"{g['testset']} {g['reliability']:.2f}, {g['below_by']:.2f} below; about "
                f"{g['factor']:.1f} times its items{items} would lift it"
            )
    return (
        f"held back by the reliability gate ({reliability_min:g}, on the fitted reliability): "
        + "; ".join(parts)
        + " (Spearman-Brown at the same signal level; a lower bound, since the ID control's share of the noise "
        "does not shrink with OOD items)"
    )
