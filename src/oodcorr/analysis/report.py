"""report.html: one self-contained page (figures inline as data URIs, no scripts or external assets): open it
from a file browser, attach it to an MLflow run, or mail it."""

from __future__ import annotations

import html
from pathlib import Path

from oodcorr.analysis.bottom_line import bottom_line
from oodcorr.analysis.html_parts import CSS, _breakable, _details, _fmt, _img, table
from oodcorr.analysis.report_noise import _noise_section
from oodcorr.settings.analyze import AnalyzeSettings
from oodcorr.stats import consistency as _consistency
from oodcorr.stats import flags as _flagwords
from oodcorr.stats import partial as _partial


def write_report(
    path: Path,
    summary: dict,
    runs: dict,
    partials,
    pooled,
    consistency,
    figures: dict,
    alpha: float = AnalyzeSettings.alpha,
    reliability=None,
    answer_bias=None,
) -> None:
    """Write report.html into the (temporary) output folder; figures are read from the same folder.
    answer_bias: the answer_bias.csv table (None: not assessed). The page opens with what a user came for (the
    accuracy curves and the verdict per pair and family, overview.py) and what the study can show; the details
    follow, long tables collapsed."""
    from oodcorr.analysis import overview

    path = Path(path)
    out = path.parent
    fig = lambda f: _img(out / "figures" / f, figures[f])  # noqa: E731
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>oodcorr analysis</title>"
        f"<style>{CSS}</style></head><body>",
        "<h1>Do generalisation results generalise? — oodcorr analysis</h1>",
        f"<p>{summary['n_runs']} runs, {summary['n_models']} models "
        f"({html.escape(', '.join(map(str, summary.get('models', []))))}), {summary['n_pairs']} OOD testset "
        f"pairs, "
        f"median {summary['n_checkpoints_median']:.0f} checkpoints per run; α = {alpha}, "
        f"bootstrap resamples = {summary.get('bootstrap', 0)}.</p>",
        f"<p>Metric analysed (verdicts and the summary below): <b>{html.escape(str(summary.get('metric')))}</b>"
        + (
            ""
            if summary.get("metric") in (None, "accuracy")
            else "; accuracy, the paper's metric, is shown beside it in every table (<code>*_accuracy</code> "
            "columns) and figure"
        )
        + ". "
        + " ".join(
            f"<code>{html.escape(f)}</code>: " + html.escape(_flagwords.describe(f, str(summary.get("metric")))) + "."
            for f in summary.get("flags", [])
        )
        + (" Their pairs are listed with no r." if summary.get("flags") else "")
        + "</p>",
    ]
    if "curves_testsets.png" in figures:
        parts.append(
            "<h2>Accuracy per testset, every run</h2>"
            + fig("curves_testsets.png").replace("<figure>", "<figure class='first'>", 1)
        )
    parts.append("<h2>Does a relation between OOD testsets hold across model families?</h2>")
    parts += overview.verdict_table(summary, consistency, pooled)
    parts += bottom_line(summary, runs, reliability)

    parts.append("<h2>Summary per method</h2>")
    head = (
        "<tr><th>method</th><th>mean |r|</th><th>share significant (BH)</th><th>share sign flips</th>"
        "<th>share model-dependent</th>" + "".join(f"<th>{_breakable(v)}</th>" for v in _consistency.VERDICTS) + "</tr>"
    )
    rows = []
    for m, s in summary["methods"].items():
        cells = [s["mean_abs_r"], s["share_significant_bh"], s["share_sign_flip"], s["share_model_dependent"]]
        rows.append(
            f"<tr><td class='l'>{overview.method_label(m)}</td>"
            + "".join(f"<td>{_fmt(float(c)) if c is not None else '–'}</td>" for c in cells)
            + "".join(f"<td>{s['verdicts'][v]}</td>" for v in _consistency.VERDICTS)
            + "</tr>"
        )
    parts.append(f"<table>{head}{''.join(rows)}</table>")

    if summary.get("accuracy"):
        parts.append(
            "<h3>Accuracy beside it</h3><table><tr><th>method</th><th>mean |r|</th>"
            + "".join(f"<th>{_breakable(v)}</th>" for v in _consistency.VERDICTS)
            + "</tr>"
            + "".join(
                f"<tr><td class='l'>{overview.method_label(m)}</td><td>"
                f"{_fmt(float(s['mean_abs_r'])) if s['mean_abs_r'] is not None else '–'}"
                "</td>" + "".join(f"<td>{s['verdicts'][v]}</td>" for v in _consistency.VERDICTS) + "</tr>"
                for m, s in summary["accuracy"].items()
            )
            + "</table>"
        )

    parts.append("<h2>Consistency across models</h2>")
    delta = summary.get("equivalence", AnalyzeSettings.equivalence)
    parts.append(
        f"<p><b>consistent_null</b>: in every reliable model the noise-corrected CI lies inside ±{delta} "
        f"(analyze.equivalence): no partial correlation stronger than {delta} in any model. "
        "<i>insufficient_evidence</i> means the data cannot tell a null from a relation. Every method; "
        "<code>raw</code> correlates the OOD testsets without removing ID progress, a reference for the "
        "others, not an answer to the question. r here is the <i>observed</i> partial r (no noise "
        "correction) with its own CI; the verdicts read each model's noise-free r and ci2 (first table).</p>"
    )
    setups = consistency[["train_set", "shots"]].drop_duplicates() if len(consistency) else []
    cols = (["train_set", "shots"] if len(setups) > 1 else []) + [
        "method",
        "pair",
        "verdict",
        "n_models_valid",
        "n_models_sig",
        "n_models_equivalent",
        "sign_flip",
        "observed r pooled",
        "CI",
        "verdict_accuracy",
        "answer_bias",
        "models: observed r [CI]",
    ]
    if len(consistency):
        order = {v: i for i, v in enumerate(_consistency.VERDICTS)}
        shown = (
            consistency.assign(_o=consistency["verdict"].map(order))
            .sort_values(["method", "_o", "testset_a"])
            .rename(columns={"r_pooled": "observed r pooled", "models": "models: observed r [CI]"})
        )
        parts.append(table(shown, cols, css_col="verdict", label="every method and pair"))

    parts += _noise_section(summary, partials, reliability, figures, out)
    from oodcorr.analysis import answer_bias as _bias

    parts += _bias.report_section(answer_bias, partials, figures, lambda f, c: _img(out / "figures" / f, c), table)

    figs = sorted(figures)
    for title, prefix in (
        ("Heatmaps (seeds pooled)", "heatmap_"),
        ("Residual scatter", "scatter_"),
        ("Curves per run", "curves_"),
    ):  # reliability_* figures: in "Signal or noise?"
        chosen = [f for f in figs if f.startswith(prefix) and f != "curves_testsets.png"]
        skipped = [
            n
            for n in summary.get("figures_not_drawn") or []
            if title.startswith("Heatmaps") and "heatmap" in n and not n.startswith("reliability")
        ]
        if chosen or skipped:
            parts.append(
                f"<h2>{title}</h2>"
                + "".join(f"<p>{html.escape(n)}</p>" for n in skipped)
                + "".join(fig(f) for f in chosen)
            )

    parts.append(
        "<h2>Seeds pooled per model</h2>"
        + table(
            pooled,
            [
                "model",
                "method",
                "pair",
                "n_seeds",
                "r",
                "CI",
                "p_bh",
                "r_disattenuated",
                "ci2",
                "r_even",
                "ci2 even",
                "equivalent",
                "rel a / b",
                "r_accuracy",
                "CI acc",
                "answer_bias",
                "flag",
            ],
            label="every model, method and pair",
        )
    )
    parts.append(
        "<h2>Per run partial correlations</h2><p>The page shows the main columns; "
        "partial_correlations.csv has every column (p, Holm, bootstrap CIs, …).</p>"
        + table(
            partials,
            [
                "run",
                "method",
                "pair",
                "r",
                "n",
                "CI",
                "p_bh",
                "r_disattenuated",
                "ci2",
                "n_eff",
                "rel a / b",
                "distinguishable",
                "equivalent",
                "r_accuracy",
                "CI acc",
                "answer_bias",
                "flag",
            ],
            label="every run, method and pair",
        )
    )
    run_rows = []
    for run, d in runs.items():
        m = d["meta"]
        run_rows.append(
            "<tr>"
            + "".join(
                f"<td class='l'>{_breakable(html.escape(str(v)))}</td>"
                for v in (
                    run,
                    m["model"],
                    m["train_set"],
                    m["shots"],
                    m["seed"],
                    m["id_testset"],
                    len(d["x"]),
                    ", ".join(d["Y"].columns),
                )
            )
            + "</tr>"
        )
    parts.append(
        "<h2>Runs</h2>"
        + _details(
            "every run",
            (
                "<table><tr><th>run</th><th>model</th><th>train_set</th><th>shots</th><th>seed</th><th>ID testset</th>"
                "<th>checkpoints</th><th>OOD testsets</th></tr>" + "".join(run_rows) + "</table>"
            ),
            len(run_rows),
        )
    )
    parts.append(
        "<h2>How to read this</h2><details><summary>Methods, pooling and verdict criteria, flags</summary>"
        "<h3>Methods</h3><pre>" + html.escape(_partial.__doc__.split("Methods", 1)[-1].strip()) + "</pre>"
    )
    parts.append("<h3>Pooling and verdict criteria</h3><pre>" + html.escape(_consistency.__doc__.strip()) + "</pre>")
    parts.append(
        "<p>Flags (the <code>flag</code> column of the CSVs; a '—' cell gives the first in words): "
        + "; ".join(
            f"<code>{html.escape(code)}</code>: {html.escape(_flagwords.describe(code + ':X'))}"
            for code in _flagwords.WORDS
        )
        + ". "
        "Flagged entries with NaN r are excluded from pooling.</p></details>"
    )
    parts.append(
        "<p>Files: partial_correlations.csv, pooled_seeds.csv, consistency.csv, summary.json, "
        "plots/accuracy_vs_step.csv.</p></body></html>"
    )
    path.write_text("\n".join(parts))
