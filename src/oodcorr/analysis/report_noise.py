"""report.html's "Signal or noise?" section: reliabilities, observed vs disattenuated r, distinguishable pairs."""

from __future__ import annotations

import html
from pathlib import Path

from oodcorr.analysis.figure_parts import reliability_label
from oodcorr.analysis.html_parts import _cell, _details, _fmt, _img, table
from oodcorr.settings.analyze import AnalyzeSettings
from oodcorr.stats import partial as _partial


def _noise_section(summary: dict, partials, reliability, figures: dict, out: Path) -> list[str]:
    """Signal or noise? reliability table/heatmaps, observed vs disattenuated r, distinguishable pairs."""

    info = summary.get("noise") or {}
    if not info.get("enabled"):
        return [
            "<h2>Signal or noise?</h2><p>Not assessed: "
            + html.escape(info.get("note", "noise analysis off"))
            + ". Run <code>oodcorr evaluate</code> (it stores per-example predictions) to get reliabilities "
            "and noise-corrected CIs.</p>"
        ]
    rmin = info.get("reliability_min", AnalyzeSettings.reliability_min)
    parts = [
        "<h2>Signal or noise?</h2>",
        f"<p>Every accuracy is measured on a finite testset. <b>Reliability</b> is the share of a residual "
        f"trajectory's variance (after removing ID progress) that is not testset noise: 1 = all signal, 0 = all "
        f"noise (split-half, Spearman-Brown). <b>r_disattenuated</b> estimates what r would be without testset "
        f"noise "
        f"(in the ID control as well); it is left empty where a reliability is below {rmin}. The "
        f"<b>noise-corrected CI</b> (ci2) is a CI for that noise-free r: it carries testset noise and counts "
        f"checkpoints by their effective number (<code>n_eff</code>; neighbouring checkpoints of a smooth "
        f"trajectory are not independent), and is empty where the data cannot support one (the flag "
        f"<code>ci2_undefined</code> says why); ci_low/ci_high are the CI of the observed r. <b>r_even</b> "
        f"(CI: ci2 even), checkpoints weighted alike, is wider but steady in the item count: the guide to size. "
        f"A pair is <b>distinguishable from noise</b> when its noise-corrected CI "
        f"excludes 0 and both testsets are reliable. Metric analysed: <code>{html.escape(str(info.get('metric')))}"
        f"</code>.</p>",
    ]
    rows = []
    for m, s in (info.get("methods") or {}).items():
        rows.append(
            f"<tr><td class='l'>{m}</td><td>{reliability_label(s['median_reliability'])}</td>"
            + "".join(
                f"<td>{_fmt(float(v)) if v is not None else '–'}</td>"
                for v in (
                    s["share_reliable"],
                    s["share_distinguishable"],
                    s["mean_abs_r"],
                    s["mean_abs_r_disattenuated"],
                )
            )
            + "</tr>"
        )
    parts.append(
        "<table><tr><th>method</th><th>median reliability</th><th>share reliable</th>"
        "<th>share distinguishable</th><th>mean |r|</th><th>mean |r_disattenuated|</th></tr>"
        + "".join(rows)
        + "</table>"
    )
    fin = partials[partials["method"].map(lambda m: _partial.METHODS[m].controls)]
    fin = fin[fin["r"].notna()] if "r" in fin else fin
    words = []
    for _, row in fin.head(60).iterrows():
        if row.get("distinguishable"):
            verdict = "distinguishable from noise"
        elif "unreliable" in str(row.get("flag", "")):
            verdict = "not distinguishable: a testset's residual trajectory is mostly noise"
        else:
            verdict = "not distinguishable: the noise-corrected CI includes 0"
        words.append(
            f"<tr><td class='l'>{html.escape(str(row['run']))}</td><td class='l'>{row['method']}</td>"
            f"<td class='l'>{html.escape(str(row['testset_a']))} ~ {html.escape(str(row['testset_b']))}</td>"
            f"<td>{_fmt(float(row['r']))}</td>{_cell(row, 'r_disattenuated')}{_cell(row, 'ci2')}"
            f"{_cell(row, 'rel a / b')}"
            f"<td class='l'>{verdict}</td></tr>"
        )
    parts.append(
        "<h3>Observed vs disattenuated r</h3>"
        + _details(
            "every run and pair",
            (
                "<table><tr><th>run</th><th>method</th><th>pair</th><th>r</th><th>r_disattenuated</th>"
                "<th>noise-corrected CI</th><th>reliability a / b</th><th>in plain words</th></tr>"
                + "".join(words)
                + "</table>"
            ),
            len(words),
        )
    )
    if reliability is not None and len(reliability):
        parts.append("<h3>Reliability per run x testset</h3>")
        parts.append(
            "<p>Reliability is on its own scale: 0–1, <i>none</i> where the two halves of a testset share "
            "no signal (a split-half estimate at or below 0).</p>"
        )
        parts.append(
            table(
                reliability,
                ["run", "metric", "method", "testset", "n_items", "n", "reliability", "flag"],
                label="every run x testset x metric x method",
            )
        )
    parts += [_img(out / "figures" / f, figures[f]) for f in sorted(figures) if f.startswith("reliability_")]
    parts += [f"<p>{html.escape(n)}</p>" for n in summary.get("figures_not_drawn") or [] if n.startswith("reliability")]
    return parts
