"""report.html's opening "In short" list: what the study can and cannot show, and the testset size it needs."""

from __future__ import annotations

import math

from oodcorr.analysis.figure_parts import reliability_label
from oodcorr.analysis.html_parts import _fmt
from oodcorr.analysis.templating import render
from oodcorr.stats import partial as _partial
from oodcorr.stats.metrics import BASELINE_METRIC


def items_for(reliability: float, n_items: float, target: float = 0.8) -> float | None:
    """Items per testset for `target` reliability at the same signal level (Spearman-Brown), None if no signal."""
    if reliability is None or not math.isfinite(reliability) or reliability <= 0 or reliability >= 1:
        return None
    return n_items * (target / (1 - target)) / (reliability / (1 - reliability))


def _id_accuracy(d: dict):
    """The run's ID accuracy per checkpoint: from its metric series when the analysis attached them (d["x"] is
    then the analysed metric, e.g. balanced_margin), else d["x"] (accuracy itself)."""
    series = d.get("series")
    if series is None:
        return d["x"]
    return series.get(BASELINE_METRIC, {}).get(d["meta"]["id_testset"], [])


def shows_nothing(summary: dict) -> bool:
    """True where no pair is distinguishable from testset noise under the verdicts' method: the study can show
    no relation, and the report says so above its verdict table, not under it."""
    methods = (summary.get("noise") or {}).get("methods") or {}
    first = _partial.primary(summary.get("methods_requested") or summary.get("methods") or [])
    share = (
        (methods.get(first) or {}).get("share_distinguishable") if (summary.get("noise") or {}).get("enabled") else None
    )
    return share is not None and share == 0


def _training(runs: dict, n_items) -> dict | None:
    """Did training move ID accuracy: per run first -> last (and the gain in binomial SEs), as words."""
    gains = []  # (run, first, last, ID items, gain in SE or None)
    for run, d in runs.items():
        x = [v for v in _id_accuracy(d) if math.isfinite(v)]
        n_id = d.get("n_id") or n_items  # the ID testset's own size; else the OOD testsets' (older metrics files)
        if len(x) >= 2:
            se = math.sqrt(2 * max(x[0] * (1 - x[0]), 1e-9) / n_id) if n_id else None
            gains.append((run, x[0], x[-1], n_id, (x[-1] - x[0]) / se if se else None))
    if not gains:
        return None
    words = "; ".join(
        f"{run}: {a:.3f} → {b:.3f} ({100 * (b - a):+.1f} points" + (f", {z:+.1f} SE)" if z is not None else ")")
        for run, a, b, _, z in gains
    )
    sized = [g for g in gains if g[4] is not None]
    moved = sum(1 for *_, z in sized if abs(z) >= 2)
    ns = sorted({round(g[3]) for g in sized})
    return {
        "se_note": f"; SE of a gain ≈ √(2p(1−p)/N), N = {'/'.join(map(str, ns))} ID items" if ns else "",
        "words": words,
        "moved": f" {moved} of {len(sized)} runs moved by ≥ 2 SE." if sized else "",
    }


def _noise(summary: dict, first, n_items) -> dict | None:
    """How much of the residual movement is signal, what size it needs and how to read the r's below."""
    noise = summary.get("noise") or {}
    methods = noise.get("methods") or {}
    if not (noise.get("enabled") and methods):
        return None
    m = first if first in methods else next(iter(methods))
    s = methods[m]
    rel, share = s.get("median_reliability"), s.get("share_distinguishable")
    n_pairs = summary.get("n_pairs")
    need = items_for(rel, n_items) if n_items else None
    return {
        "method": m,
        "reliability": reliability_label(rel),
        "share": _fmt(share) if share is not None else "–",
        "of_pairs": f" of {n_pairs} OOD pairs per run" if n_pairs else "",
        "need": f"{need:,.0f}" if need is not None else None,
        "now": f"{n_items:.0f}" if n_items else None,
        "rel": f"{rel:.2f}" if need is not None else None,
        "reading": None if share is None else ("none" if share == 0 else "some"),
    }


def bottom_line(summary: dict, runs: dict, reliability) -> list[str]:
    """What this study can and cannot show, in plain words: did training move ID accuracy (vs its binomial
    SE), how much of the OOD residual movement is signal, how many pairs are distinguishable from noise,
    what the cross-model verdicts are, and the testset size the observed signal level would need."""
    n_items = None
    if reliability is not None and len(reliability) and "n_items" in reliability:
        vals = reliability["n_items"].dropna()
        n_items = float(vals.median()) if len(vals) else None
    first = _partial.primary(summary.get("methods_requested") or summary.get("methods") or [])
    verdicts = ((summary.get("methods") or {}).get(first) or {}).get("verdicts")
    across = ", ".join(f"{v.replace('_', ' ')} {n}" for v, n in verdicts.items() if n) if verdicts else None
    values = {
        "training": _training(runs, n_items),
        "noise": _noise(summary, first, n_items),
        "across": {"method": first, "words": across} if verdicts else None,
    }
    return [render("in_short.html", **values)]
