"""report.html: one self-contained page (figures inline as data URIs, no scripts or external assets): open it
from a file browser, attach it to an MLflow run, or mail it. The page is templates/report.html; this module
builds the plain values it shows."""

from __future__ import annotations

from pathlib import Path

from oodcorr.analysis.bottom_line import bottom_line, shows_nothing
from oodcorr.analysis.html_parts import OPEN_ROWS, figure, number, table
from oodcorr.analysis.report_noise import _noise_section
from oodcorr.analysis.templating import joined, render
from oodcorr.settings.analyze import AnalyzeSettings
from oodcorr.stats import consistency as _consistency
from oodcorr.stats import flags as _flagwords
from oodcorr.stats import partial as _partial

CONSISTENCY_COLUMNS = [
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
POOLED_COLUMNS = [
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
    "fitted rel a / b",
    "r_accuracy",
    "CI acc",
    "answer_bias",
    "flag",
]
PER_RUN_COLUMNS = [
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
    "fitted rel a / b",
    "distinguishable",
    "equivalent",
    "r_accuracy",
    "CI acc",
    "answer_bias",
    "flag",
]
FIGURE_GROUPS = (
    ("Heatmaps (seeds pooled)", "heatmap_"),
    ("Residual scatter", "scatter_"),
    ("Curves per run", "curves_"),
)


def _methods(summary: dict) -> dict:
    """The summary tables' rows: per method its numbers and verdict counts (analysed metric; accuracy beside)."""
    from oodcorr.analysis import overview

    rows = [
        {
            "label": overview.method_label(m),
            "numbers": [number(s[k]) for k in ("mean_abs_r", "share_significant_bh", "share_sign_flip")]
            + [number(s["share_model_dependent"])],
            "verdicts": [s["verdicts"][v] for v in _consistency.VERDICTS],
        }
        for m, s in summary["methods"].items()
    ]
    accuracy = [
        {
            "label": overview.method_label(m),
            "numbers": [number(s["mean_abs_r"])],
            "verdicts": [s["verdicts"][v] for v in _consistency.VERDICTS],
        }
        for m, s in (summary.get("accuracy") or {}).items()
    ]
    return {"verdict_names": list(_consistency.VERDICTS), "rows": rows, "accuracy": accuracy}


def _consistency_table(consistency) -> str | None:
    setups = consistency[["train_set", "shots"]].drop_duplicates() if len(consistency) else []
    cols = (["train_set", "shots"] if len(setups) > 1 else []) + CONSISTENCY_COLUMNS
    if not len(consistency):
        return None
    order = {v: i for i, v in enumerate(_consistency.VERDICTS)}
    shown = (
        consistency.assign(_o=consistency["verdict"].map(order))
        .sort_values(["method", "_o", "testset_a"])
        .rename(columns={"r_pooled": "observed r pooled", "models": "models: observed r [CI]"})
    )
    return table(shown, cols, css_col="verdict", label="every method and pair")


def _figure_groups(summary: dict, figures: dict, out: Path) -> list[dict]:
    """The figure sections after the tables (reliability_* figures: in "Signal or noise?")."""
    groups = []
    for title, prefix in FIGURE_GROUPS:
        chosen = [f for f in sorted(figures) if f.startswith(prefix) and f != "curves_testsets.png"]
        skipped = [
            n
            for n in summary.get("figures_not_drawn") or []
            if title.startswith("Heatmaps") and "heatmap" in n and not n.startswith("reliability")
        ]
        if chosen or skipped:
            figs = [figure(out / "figures" / f, figures[f]) for f in chosen]
            groups.append({"title": title, "skipped": skipped, "figures": figs})
    return groups


def _runs(runs: dict) -> list[list[str]]:
    return [
        [
            str(v)
            for v in (run, m["model"], m["train_set"], m["shots"], m["seed"], m["id_testset"], len(d["x"]))
            + (", ".join(d["Y"].columns),)
        ]
        for run, d in runs.items()
        for m in (d["meta"],)
    ]


def _head(summary: dict, alpha: float) -> dict:
    metric = summary.get("metric")
    return {
        "n_runs": summary["n_runs"],
        "n_models": summary["n_models"],
        "models": ", ".join(map(str, summary.get("models", []))),
        "n_pairs": summary["n_pairs"],
        "checkpoints": f"{summary['n_checkpoints_median']:.0f}",
        "alpha": alpha,
        "bootstrap": summary.get("bootstrap", 0),
        "metric": str(metric),
        "accuracy_beside": metric not in (None, "accuracy"),
        "flags": [(f, _flagwords.describe(f, str(metric))) for f in summary.get("flags", [])],
    }


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
    from oodcorr.analysis import answer_bias as _bias
    from oodcorr.analysis import overview
    from oodcorr.analysis.html_parts import _img

    out = Path(path).parent
    img = lambda f, c: _img(out / "figures" / f, c)  # noqa: E731
    curves = "curves_testsets.png" in figures
    page = render(
        "report.html",
        head=_head(summary, alpha),
        curves=figure(out / "figures" / "curves_testsets.png", figures["curves_testsets.png"]) if curves else None,
        verdicts=joined(overview.verdict_table(summary, consistency, pooled)),
        in_short=joined(bottom_line(summary, runs, reliability)),
        in_short_first=shows_nothing(summary),
        methods=_methods(summary),
        delta=summary.get("equivalence", AnalyzeSettings.equivalence),
        consistency=_consistency_table(consistency),
        noise=joined(_noise_section(summary, partials, reliability, figures, out)),
        bias=joined(_bias.report_section(answer_bias, partials, figures, img, table)),
        figure_groups=_figure_groups(summary, figures, out),
        pooled=table(pooled, POOLED_COLUMNS, label="every model, method and pair"),
        per_run=table(partials, PER_RUN_COLUMNS, label="every run, method and pair"),
        runs=_runs(runs),
        open_rows=OPEN_ROWS,
        methods_doc=_partial.__doc__.split("Methods", 1)[-1].strip(),
        pooling_doc=_consistency.__doc__.strip(),
        flag_words=[(code, _flagwords.describe(code + ":X")) for code in _flagwords.WORDS],
    )
    Path(path).write_text(page)
