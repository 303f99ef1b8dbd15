"""report.html's opening "In short" list: what the study can and cannot show, and the testset size it needs."""

from __future__ import annotations

import html
import math

from oodcorr.analysis.figure_parts import reliability_label
from oodcorr.analysis.html_parts import _fmt
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


def bottom_line(summary: dict, runs: dict, reliability) -> list[str]:
    """What this study can and cannot show, in plain words: did training move ID accuracy (vs its binomial
    SE), how much of the OOD residual movement is signal, how many pairs are distinguishable from noise,
    what the cross-model verdicts are, and the testset size the observed signal level would need."""
    n_items = None
    if reliability is not None and len(reliability) and "n_items" in reliability:
        vals = reliability["n_items"].dropna()
        n_items = float(vals.median()) if len(vals) else None
    gains = []  # (run, first, last, ID items, gain in SE or None)
    for run, d in runs.items():
        x = [v for v in _id_accuracy(d) if math.isfinite(v)]
        n_id = d.get("n_id") or n_items  # the ID testset's own size; else the OOD testsets' (older metrics files)
        if len(x) >= 2:
            se = math.sqrt(2 * max(x[0] * (1 - x[0]), 1e-9) / n_id) if n_id else None
            gains.append((run, x[0], x[-1], n_id, (x[-1] - x[0]) / se if se else None))
    parts = ["<h2>In short: what this study can and cannot show</h2><ul>"]
    if gains:
        words = "; ".join(
            f"{html.escape(str(run))}: {a:.3f} → {b:.3f} ({100 * (b - a):+.1f} points"
            + (f", {z:+.1f} SE)" if z is not None else ")")
            for run, a, b, _, z in gains
        )
        sized = [g for g in gains if g[4] is not None]
        moved = sum(1 for *_, z in sized if abs(z) >= 2)
        ns = sorted({round(g[3]) for g in sized})
        se_note = f"; SE of a gain ≈ √(2p(1−p)/N), N = {'/'.join(map(str, ns))} ID items" if ns else ""
        parts.append(
            f"<li><b>Training</b> (ID accuracy, first → last checkpoint{se_note}): {words}."
            + (f" {moved} of {len(sized)} runs moved by ≥ 2 SE." if sized else "")
            + "</li>"
        )
    noise = summary.get("noise") or {}
    methods = noise.get("methods") or {}
    first = _partial.primary(summary.get("methods_requested") or summary.get("methods") or [])
    if noise.get("enabled") and methods:
        m = first if first in methods else next(iter(methods))
        s = methods[m]
        rel, share = s.get("median_reliability"), s.get("share_distinguishable")
        n_pairs = summary.get("n_pairs")
        parts.append(
            f"<li><b>Testset noise</b> ({m}): median reliability of the residual trajectories "
            f"<b>{reliability_label(rel)}</b> (0–1: 1 = all signal; none = no signal above testset noise); "
            f"share of pairs "
            f"distinguishable from noise {_fmt(share) if share is not None else '–'}"
            f"{f' of {n_pairs} OOD pairs per run' if n_pairs else ''}.</li>"
        )
        need = items_for(rel, n_items) if n_items else None
        if need is not None:
            parts.append(
                f"<li><b>Size</b>: at this signal level a reliability of 0.8 needs ≈ {need:,.0f} items per "
                f"testset (now ≈ {n_items:.0f}); <code>oodcorr plan --pilot-reliability {rel:.2f} "
                f"--pilot-items {n_items:.0f}</code> (or <code>--pilot "
                f"runs/&lt;run&gt;/eval/metrics.jsonl</code>) also "
                f"sizes the checkpoints.</li>"
            )
        elif n_items:
            parts.append(
                f"<li><b>Size</b>: no residual signal above testset noise at ≈ {n_items:.0f} items per "
                f"testset, so no testset size can be derived from this study; "
                f"<code>oodcorr plan</code> sizes one from stated assumptions.</li>"
            )
        if share is not None and share == 0:
            parts.append(
                "<li><b>Reading</b>: no pair is distinguishable from testset noise, so this study cannot say "
                "whether any OOD improvement goes with another once ID progress is removed, nor whether "
                "such a relation holds across models. Its correlations below demonstrate the pipeline; "
                "they are not a finding.</li>"
            )
        elif share is not None:
            parts.append(
                "<li><b>Reading</b>: only pairs marked <i>distinguishable from noise</i> below (noise-"
                "corrected CI excludes 0, both testsets reliable) carry a sign; every other r is compatible "
                "with testset noise.</li>"
            )
    verdicts = ((summary.get("methods") or {}).get(first) or {}).get("verdicts")
    if verdicts:
        parts.append(
            f"<li><b>Across models</b> ({first}): "
            + ", ".join(f"{v.replace('_', ' ')} {n}" for v, n in verdicts.items() if n)
            + ".</li>"
        )
    parts.append("</ul>")
    return parts
