"""report.html: one self-contained page (figures inline as data URIs, no scripts or external assets): open it
from a file browser, attach it to an MLflow run, or mail it."""

from __future__ import annotations

import html
import math
from pathlib import Path

from oodcorr.analysis.figure_parts import reliability_label
from oodcorr.analysis.html_parts import CSS, _breakable, _cell, _details, _fmt, _img, table
from oodcorr.metrics import BASELINE_METRIC
from oodcorr.settings.analyze import AnalyzeSettings
from oodcorr.stats import consistency as _consistency
from oodcorr.stats import flags as _flagwords
from oodcorr.stats import partial as _partial


def _noise_section(summary: dict, partials, reliability, figures: dict, out: Path) -> list[str]:
    """Signal or noise? reliability table/heatmaps, observed vs disattenuated r, distinguishable pairs."""

    info = summary.get("noise") or {}
    if not info.get("enabled"):
        return ["<h2>Signal or noise?</h2><p>Not assessed: " + html.escape(info.get("note", "noise analysis off")) +
                ". Run <code>oodcorr evaluate</code> (it stores per-example predictions) to get reliabilities "
                "and noise-corrected CIs.</p>"]
    rmin = info.get("reliability_min", AnalyzeSettings.reliability_min)
    parts = ["<h2>Signal or noise?</h2>",
             f"<p>Every accuracy is measured on a finite testset. <b>Reliability</b> is the share of a residual "
             f"trajectory's variance (after removing ID progress) that is not testset noise: 1 = all signal, 0 = all "
             f"noise (split-half, Spearman-Brown). <b>r_disattenuated</b> estimates what r would be without testset noise "
             f"(in the ID control as well); it is left empty where a reliability is below {rmin}. The "
             f"<b>noise-corrected CI</b> (ci2) is a CI for that noise-free r: it carries testset noise and counts "
             f"checkpoints by their effective number (<code>n_eff</code>; neighbouring checkpoints of a smooth "
             f"trajectory are not independent), and is empty where the data cannot support one (the flag "
             f"<code>ci2_undefined</code> says why); ci_low/ci_high are the CI of the observed r. <b>r_even</b> (CI: ci2 "
             f"even), checkpoints weighted alike, is wider but steady in the item count: the guide to size. A pair is <b>distinguishable from noise</b> when its noise-corrected CI "
             f"excludes 0 and both testsets are reliable. Metric analysed: <code>{html.escape(str(info.get('metric')))}"
             f"</code>.</p>"]
    rows = []
    for m, s in (info.get("methods") or {}).items():
        rows.append(f"<tr><td class='l'>{m}</td><td>{reliability_label(s['median_reliability'])}</td>" + "".join(
            f"<td>{_fmt(float(v)) if v is not None else '–'}</td>" for v in (
                s["share_reliable"], s["share_distinguishable"], s["mean_abs_r"],
                s["mean_abs_r_disattenuated"])) + "</tr>")
    parts.append("<table><tr><th>method</th><th>median reliability</th><th>share reliable</th>"
                 "<th>share distinguishable</th><th>mean |r|</th><th>mean |r_disattenuated|</th></tr>"
                 + "".join(rows) + "</table>")
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
        words.append(f"<tr><td class='l'>{html.escape(str(row['run']))}</td><td class='l'>{row['method']}</td>"
                     f"<td class='l'>{html.escape(str(row['testset_a']))} ~ {html.escape(str(row['testset_b']))}</td>"
                     f"<td>{_fmt(float(row['r']))}</td>{_cell(row, 'r_disattenuated')}{_cell(row, 'ci2')}"
                     f"{_cell(row, 'rel a / b')}"
                     f"<td class='l'>{verdict}</td></tr>")
    parts.append("<h3>Observed vs disattenuated r</h3>" + _details("every run and pair", (
        "<table><tr><th>run</th><th>method</th><th>pair</th><th>r</th><th>r_disattenuated</th>"
        "<th>noise-corrected CI</th><th>reliability a / b</th><th>in plain words</th></tr>" + "".join(words)
        + "</table>"), len(words)))
    if reliability is not None and len(reliability):
        parts.append("<h3>Reliability per run x testset</h3>")
        parts.append("<p>Reliability is on its own scale: 0–1, <i>none</i> where the two halves of a testset share "
                     "no signal (a split-half estimate at or below 0).</p>")
        parts.append(table(reliability, ["run", "metric", "method", "testset", "n_items", "n", "reliability", "flag"],
                           label="every run x testset x metric x method"))
    parts += [_img(out / "figures" / f, figures[f]) for f in sorted(figures) if f.startswith("reliability_")]
    parts += [f"<p>{html.escape(n)}</p>" for n in summary.get("figures_not_drawn") or [] if n.startswith("reliability")]
    return parts


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
        words = "; ".join(f"{html.escape(str(run))}: {a:.3f} → {b:.3f} ({100 * (b - a):+.1f} points"
                          + (f", {z:+.1f} SE)" if z is not None else ")") for run, a, b, _, z in gains)
        sized = [g for g in gains if g[4] is not None]
        moved = sum(1 for *_, z in sized if abs(z) >= 2)
        ns = sorted({round(g[3]) for g in sized})
        se_note = (f"; SE of a gain ≈ √(2p(1−p)/N), N = {'/'.join(map(str, ns))} ID items" if ns else "")
        parts.append(f"<li><b>Training</b> (ID accuracy, first → last checkpoint{se_note}): {words}."
                     + (f" {moved} of {len(sized)} runs moved by ≥ 2 SE." if sized else "") + "</li>")
    noise = summary.get("noise") or {}
    methods = noise.get("methods") or {}
    first = _partial.primary(summary.get("methods_requested") or summary.get("methods") or [])
    if noise.get("enabled") and methods:
        m = first if first in methods else next(iter(methods))
        s = methods[m]
        rel, share = s.get("median_reliability"), s.get("share_distinguishable")
        n_pairs = summary.get("n_pairs")
        parts.append(f"<li><b>Testset noise</b> ({m}): median reliability of the residual trajectories "
                     f"<b>{reliability_label(rel)}</b> (0–1: 1 = all signal; none = no signal above testset noise); "
                     f"share of pairs "
                     f"distinguishable from noise {_fmt(share) if share is not None else '–'}"
                     f"{f' of {n_pairs} OOD pairs per run' if n_pairs else ''}.</li>")
        need = items_for(rel, n_items) if n_items else None
        if need is not None:
            parts.append(f"<li><b>Size</b>: at this signal level a reliability of 0.8 needs ≈ {need:,.0f} items per "
                         f"testset (now ≈ {n_items:.0f}); <code>oodcorr plan --pilot-reliability {rel:.2f} --pilot-items "
                         f"{n_items:.0f}</code> (or <code>--pilot runs/&lt;run&gt;/eval/metrics.jsonl</code>) also "
                         f"sizes the checkpoints.</li>")
        elif n_items:
            parts.append(f"<li><b>Size</b>: no residual signal above testset noise at ≈ {n_items:.0f} items per "
                         f"testset, so no testset size can be derived from this study; "
                         f"<code>oodcorr plan</code> sizes one from stated assumptions.</li>")
        if share is not None and share == 0:
            parts.append("<li><b>Reading</b>: no pair is distinguishable from testset noise, so this study cannot say "
                         "whether any OOD improvement goes with another once ID progress is removed, nor whether "
                         "such a relation holds across models. Its correlations below demonstrate the pipeline; "
                         "they are not a finding.</li>")
        elif share is not None:
            parts.append("<li><b>Reading</b>: only pairs marked <i>distinguishable from noise</i> below (noise-"
                         "corrected CI excludes 0, both testsets reliable) carry a sign; every other r is compatible "
                         "with testset noise.</li>")
    verdicts = ((summary.get("methods") or {}).get(first) or {}).get("verdicts")
    if verdicts:
        parts.append(f"<li><b>Across models</b> ({first}): " + ", ".join(
            f"{v.replace('_', ' ')} {n}" for v, n in verdicts.items() if n) + ".</li>")
    parts.append("</ul>")
    return parts


def write_report(path: Path, summary: dict, runs: dict, partials, pooled, consistency, figures: dict,
                 alpha: float = AnalyzeSettings.alpha, reliability=None, answer_bias=None) -> None:
    """Write report.html into the (temporary) output folder; figures are read from the same folder.
    answer_bias: the answer_bias.csv table (None: not assessed). The page opens with what a user came for (the
    accuracy curves and the verdict per pair and family, overview.py) and what the study can show; the details
    follow, long tables collapsed."""
    from oodcorr.analysis import overview

    path = Path(path)
    out = path.parent
    fig = lambda f: _img(out / "figures" / f, figures[f])  # noqa: E731
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>oodcorr analysis</title>"
             f"<style>{CSS}</style></head><body>",
             "<h1>Do generalisation results generalise? — oodcorr analysis</h1>",
             f"<p>{summary['n_runs']} runs, {summary['n_models']} models "
             f"({html.escape(', '.join(map(str, summary.get('models', []))))}), {summary['n_pairs']} OOD testset pairs, "
             f"median {summary['n_checkpoints_median']:.0f} checkpoints per run; α = {alpha}, "
             f"bootstrap resamples = {summary.get('bootstrap', 0)}.</p>",
             f"<p>Metric analysed (verdicts and the summary below): <b>{html.escape(str(summary.get('metric')))}</b>"
             + ("" if summary.get("metric") in (None, "accuracy") else
                "; accuracy, the paper's metric, is shown beside it in every table (<code>*_accuracy</code> "
                "columns) and figure")
             + ". " + " ".join(f"<code>{html.escape(f)}</code>: "
                               + html.escape(_flagwords.describe(f, str(summary.get("metric")))) + "."
                               for f in summary.get("flags", []))
             + (" Their pairs are listed with no r." if summary.get("flags") else "") + "</p>"]
    if "curves_testsets.png" in figures:
        parts.append("<h2>Accuracy per testset, every run</h2>"
                     + fig("curves_testsets.png").replace("<figure>", "<figure class='first'>", 1))
    parts.append("<h2>Does a relation between OOD testsets hold across model families?</h2>")
    parts += overview.verdict_table(summary, consistency, pooled)
    parts += bottom_line(summary, runs, reliability)

    parts.append("<h2>Summary per method</h2>")
    head = ("<tr><th>method</th><th>mean |r|</th><th>share significant (BH)</th><th>share sign flips</th>"
            "<th>share model-dependent</th>" + "".join(f"<th>{_breakable(v)}</th>" for v in _consistency.VERDICTS)
            + "</tr>")
    rows = []
    for m, s in summary["methods"].items():
        cells = [s["mean_abs_r"], s["share_significant_bh"], s["share_sign_flip"], s["share_model_dependent"]]
        rows.append(f"<tr><td class='l'>{overview.method_label(m)}</td>" + "".join(
            f"<td>{_fmt(float(c)) if c is not None else '–'}</td>" for c in cells) +
            "".join(f"<td>{s['verdicts'][v]}</td>" for v in _consistency.VERDICTS) + "</tr>")
    parts.append(f"<table>{head}{''.join(rows)}</table>")

    if summary.get("accuracy"):
        parts.append("<h3>Accuracy beside it</h3><table><tr><th>method</th><th>mean |r|</th>" +
                     "".join(f"<th>{_breakable(v)}</th>" for v in _consistency.VERDICTS) + "</tr>" + "".join(
                         f"<tr><td class='l'>{overview.method_label(m)}</td><td>"
                         f"{_fmt(float(s['mean_abs_r'])) if s['mean_abs_r'] is not None else '–'}"
                         "</td>" + "".join(f"<td>{s['verdicts'][v]}</td>" for v in _consistency.VERDICTS) + "</tr>"
                         for m, s in summary["accuracy"].items()) + "</table>")

    parts.append("<h2>Consistency across models</h2>")
    delta = summary.get("equivalence", AnalyzeSettings.equivalence)
    parts.append(f"<p><b>consistent_null</b>: in every reliable model the noise-corrected CI lies inside ±{delta} "
                 f"(analyze.equivalence): no partial correlation stronger than {delta} in any model. "
                 "<i>insufficient_evidence</i> means the data cannot tell a null from a relation. Every method; "
                 "<code>raw</code> correlates the OOD testsets without removing ID progress, a reference for the "
                 "others, not an answer to the question. r here is the <i>observed</i> partial r (no noise "
                 "correction) with its own CI; the verdicts read each model's noise-free r and ci2 (first table).</p>")
    setups = consistency[["train_set", "shots"]].drop_duplicates() if len(consistency) else []
    cols = (["train_set", "shots"] if len(setups) > 1 else []) + [
        "method", "pair", "verdict", "n_models_valid", "n_models_sig", "n_models_equivalent", "sign_flip",
        "observed r pooled", "CI", "verdict_accuracy", "answer_bias", "models: observed r [CI]"]
    if len(consistency):
        order = {v: i for i, v in enumerate(_consistency.VERDICTS)}
        shown = consistency.assign(_o=consistency["verdict"].map(order)).sort_values(["method", "_o", "testset_a"]) \
            .rename(columns={"r_pooled": "observed r pooled", "models": "models: observed r [CI]"})
        parts.append(table(shown, cols, css_col="verdict", label="every method and pair"))

    parts += _noise_section(summary, partials, reliability, figures, out)
    from oodcorr.analysis import answer_bias as _bias
    parts += _bias.report_section(answer_bias, partials, figures, lambda f, c: _img(out / "figures" / f, c), table)

    figs = sorted(figures)
    for title, prefix in (("Heatmaps (seeds pooled)", "heatmap_"), ("Residual scatter", "scatter_"),
                          ("Curves per run", "curves_")):  # reliability_* figures: in "Signal or noise?"
        chosen = [f for f in figs if f.startswith(prefix) and f != "curves_testsets.png"]
        skipped = [n for n in summary.get("figures_not_drawn") or [] if title.startswith("Heatmaps") and "heatmap" in n
                   and not n.startswith("reliability")]
        if chosen or skipped:
            parts.append(f"<h2>{title}</h2>" + "".join(f"<p>{html.escape(n)}</p>" for n in skipped)
                         + "".join(fig(f) for f in chosen))

    parts.append("<h2>Seeds pooled per model</h2>" + table(pooled, ["model", "method", "pair", "n_seeds", "r", "CI", "p_bh", "r_disattenuated", "ci2",
                                "r_even", "ci2 even", "equivalent", "rel a / b", "r_accuracy", "CI acc", "answer_bias", "flag"],
                       label="every model, method and pair"))
    parts.append("<h2>Per run partial correlations</h2><p>The page shows the main columns; "
                 "partial_correlations.csv has every column (p, Holm, bootstrap CIs, …).</p>" + table(partials, ["run", "method", "pair", "r", "n", "CI", "p_bh", "r_disattenuated", "ci2", "n_eff",
                                  "rel a / b", "distinguishable", "equivalent", "r_accuracy", "CI acc", "answer_bias", "flag"], label="every run, method and pair"))
    run_rows = []
    for run, d in runs.items():
        m = d["meta"]
        run_rows.append("<tr>" + "".join(f"<td class='l'>{_breakable(html.escape(str(v)))}</td>" for v in (
            run, m["model"], m["train_set"], m["shots"], m["seed"], m["id_testset"], len(d["x"]),
            ", ".join(d["Y"].columns))) + "</tr>")
    parts.append("<h2>Runs</h2>" + _details("every run", (
        "<table><tr><th>run</th><th>model</th><th>train_set</th><th>shots</th><th>seed</th><th>ID testset</th>"
        "<th>checkpoints</th><th>OOD testsets</th></tr>" + "".join(run_rows) + "</table>"), len(run_rows)))
    parts.append("<h2>How to read this</h2><details><summary>Methods, pooling and verdict criteria, flags</summary>"
                 "<h3>Methods</h3><pre>" + html.escape(_partial.__doc__.split("Methods", 1)[-1].strip()) + "</pre>")
    parts.append("<h3>Pooling and verdict criteria</h3><pre>" + html.escape(_consistency.__doc__.strip()) + "</pre>")
    parts.append("<p>Flags (the <code>flag</code> column of the CSVs; a '—' cell gives the first in words): "
                 + "; ".join(f"<code>{html.escape(code)}</code>: {html.escape(_flagwords.describe(code + ':X'))}"
                             for code in _flagwords.WORDS) + ". "
                 "Flagged entries with NaN r are excluded from pooling.</p></details>")
    parts.append("<p>Files: partial_correlations.csv, pooled_seeds.csv, consistency.csv, summary.json, "
                 "plots/accuracy_vs_step.csv.</p></body></html>")
    path.write_text("\n".join(parts))
