"""Answer bias: is a partial correlation the model's "Yes" share swinging between checkpoints?

A checkpoint that answers "Yes" more often loses accuracy on every testset with fewer gold "Yes" than "No"
and gains on the others, so two such testsets' accuracy residuals correlate through that one shared
number even when the model's abilities on them are unrelated. Class-balanced metrics (balanced_margin,
auc) cancel an additive bias in the log-odds; accuracy and mean_margin do not.

Per run x testset (answer_bias.csv):
  yes_share_gold       share of gold-entailment ("Yes") items;
  yes_rate_min/max     the range of the share of "Yes" answers over the checkpoints;
  r2_<metric>          how much of the metric's residual trajectory (after its own ID series, linear)
                       yes_rate's residual on the same ID series explains (squared correlation), for
                       accuracy and for the bias-free metric.
Per pair (the `answer_bias` column of partial_correlations.csv and pooled_seeds.csv): True where accuracy's
partial r and the bias-free metric's disagree beyond their intervals (each r outside the other's Fisher CI)
or yes_rate explains most (R^2 > R2_MOST) of both testsets' accuracy residuals through a bias they share (their
yes_rate residuals correlate above R2_MOST: on an unbalanced testset item noise alone ties a testset's own
yes_rate to its accuracy, but not to another testset's).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

R2_MOST = 0.5  # "most of a residual": yes_rate's share of its variance
COLUMNS = [
    "run",
    "model",
    "seed",
    "testset",
    "role",
    "yes_share_gold",
    "yes_rate_min",
    "yes_rate_max",
    "r2_accuracy",
    "r2_bias_free",
    "bias_free_metric",
]


def explained_share(x, y, yes) -> float:
    """R^2 of y's residual (OLS on [1, x]) on yes_rate's residual on the same x; NaN when either is constant."""
    from oodcorr.stats.partial import residualise_linear

    x, y, yes = (np.asarray(v, float) for v in (x, y, yes))
    ok = np.isfinite(x) & np.isfinite(y) & np.isfinite(yes)
    if ok.sum() < 4:
        return math.nan
    R = residualise_linear(x[ok], np.column_stack([y[ok], yes[ok]]))
    sd = R.std(axis=0)
    if (sd <= 1e-12 * np.maximum(1.0, np.abs(np.column_stack([y[ok], yes[ok]])).max(axis=0))).any():
        return math.nan
    return float(np.corrcoef(R[:, 0], R[:, 1])[0, 1] ** 2)


def diagnose(series: dict, meta: dict, bias_free: str) -> pd.DataFrame:
    """answer_bias.csv rows. series: {run: {"id_testset": name, "accuracy": {testset: (n,)}, bias_free: {...},
    "yes_rate": {...}, "yes_share_gold": {testset: float}}}; meta: {run: {"model", "seed"}}."""
    rows = []
    for run, s in series.items():
        m = meta[run]
        id_name = s["id_testset"]
        for testset in s["yes_rate"]:
            yes = np.asarray(s["yes_rate"][testset], float)
            role = "id" if testset == id_name else "ood"
            r2 = {
                metric: explained_share(s[metric][id_name], s[metric][testset], yes) if role == "ood" else math.nan
                for metric in ("accuracy", bias_free)
                if metric in s
            }
            fin = yes[np.isfinite(yes)]
            rows.append(
                {
                    "run": run,
                    "model": m["model"],
                    "seed": m["seed"],
                    "testset": testset,
                    "role": role,
                    "yes_share_gold": s["yes_share_gold"].get(testset, math.nan),
                    "yes_rate_min": float(fin.min()) if len(fin) else math.nan,
                    "yes_rate_max": float(fin.max()) if len(fin) else math.nan,
                    "r2_accuracy": r2.get("accuracy", math.nan),
                    "r2_bias_free": r2.get(bias_free, math.nan),
                    "bias_free_metric": bias_free,
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)


def disagree(r_a, lo_a, hi_a, r_b, lo_b, hi_b) -> np.ndarray:
    """Each r outside the other's interval (both finite)."""
    r_a, lo_a, hi_a, r_b, lo_b, hi_b = (np.asarray(v, float) for v in (r_a, lo_a, hi_a, r_b, lo_b, hi_b))
    with np.errstate(invalid="ignore"):
        out = ((r_a < lo_b) | (r_a > hi_b)) & ((r_b < lo_a) | (r_b > hi_a))
    return out & np.isfinite(r_a) & np.isfinite(r_b)


def yes_residual_corr(series: dict) -> dict:
    """{(run, a, b): correlation of testsets a's and b's yes_rate residuals (each on the run's ID accuracy)}:
    near 1 when one answer bias moves both; item noise alone leaves them independent."""
    from oodcorr.stats.partial import _corr_cols, residualise_linear

    out = {}
    for run, s in series.items():
        x = np.asarray(s["accuracy"][s["id_testset"]], float)
        names = [t for t in s["yes_rate"] if t != s["id_testset"]]
        if len(names) < 2:
            continue
        Y = np.column_stack([np.asarray(s["yes_rate"][t], float) for t in names])
        ok = np.isfinite(x) & np.isfinite(Y).all(axis=1)
        if ok.sum() < 4 or x[ok].std() <= 1e-12:
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            C = _corr_cols(residualise_linear(x[ok], Y[ok]))
        for i, a in enumerate(names):
            for j, b in enumerate(names):
                out[(run, a, b)] = float(C[i, j])
    return out


def pair_flags(
    keys: pd.DataFrame,
    accuracy: pd.DataFrame,
    bias_free: pd.DataFrame,
    diag: pd.DataFrame,
    series: dict | None = None,
    on=("run", "method", "testset_a", "testset_b"),
) -> np.ndarray:
    """The answer_bias flag for each row of `keys` (columns `on`): accuracy's and the bias-free metric's partial
    rows (r, ci_low, ci_high on the same keys) disagree beyond their intervals, or yes_rate explains more than
    R2_MOST of both testsets' accuracy residuals (diag: diagnose's run x testset R^2) through a bias the two
    share (their yes_rate residuals correlate above R2_MOST; `series` as for diagnose, None: not required)."""
    on = list(on)
    cols = ["r", "ci_low", "ci_high"]
    m = (
        keys[on]
        .merge(accuracy[on + cols], on=on, how="left")
        .merge(bias_free[on + cols], on=on, how="left", suffixes=("_acc", "_bf"))
    )
    split = disagree(m["r_acc"], m["ci_low_acc"], m["ci_high_acc"], m["r_bf"], m["ci_low_bf"], m["ci_high_bf"])
    r2 = {(r.run, r.testset): r.r2_accuracy for r in diag.itertuples(index=False)} if len(diag) else {}
    shared = yes_residual_corr(series) if series is not None else None
    most = np.array(
        [
            r2.get((run, a), math.nan) > R2_MOST
            and r2.get((run, b), math.nan) > R2_MOST
            and (shared is None or shared.get((run, a, b), math.nan) > R2_MOST)
            for run, a, b in zip(keys["run"], keys["testset_a"], keys["testset_b"])
        ],
        bool,
    )
    return np.asarray(split, bool) | most


def yes_rate_figures(fig_dir, series: dict, steps: dict) -> dict[str, str]:
    """yes_rate_<run>.png: the share of "Yes" answers per checkpoint for every testset, with each testset's
    gold "Yes" share dashed in the same colour. Returns {file name: caption}."""
    from oodcorr.analysis.figure_parts import _plt, safe

    plt = _plt()
    figs = {}
    for run, s in series.items():
        fig, ax = plt.subplots(figsize=(7, 3.6))
        for i, (testset, yes) in enumerate(s["yes_rate"].items()):
            color = f"C{i % 10}"
            ax.plot(steps[run], yes, "-", marker=".", ms=3, lw=1, color=color, label=testset)
            share = s["yes_share_gold"].get(testset)
            if share is not None and np.isfinite(share):
                ax.axhline(share, color=color, ls="--", lw=0.8)
        ax.set(xlabel="step", ylabel='share of "Yes" answers', ylim=(-0.02, 1.02), title=run)
        ax.title.set_fontsize(9)
        ax.legend(fontsize=6, ncol=2, loc="best")
        fig.tight_layout()
        name = f"yes_rate_{safe(run)}.png"
        fig.savefig(fig_dir / name, dpi=80)
        plt.close(fig)
        figs[name] = f'share of "Yes" answers vs step (dashed: the gold "Yes" share): {run}'
    return figs


def report_section(diag: pd.DataFrame, partials: pd.DataFrame, figures: dict, img, table) -> list[str]:
    """The report's "Answer bias" section (templates/answer_bias.html; img/table: the report's figure and table
    helpers)."""
    from oodcorr.analysis.templating import render

    if diag is None or not len(diag):
        return [render("answer_bias.html", assessed=False)]
    bf = str(diag["bias_free_metric"].iloc[0])
    flagged = (
        partials[partials.get("answer_bias", pd.Series(False, index=partials.index)).fillna(False).astype(bool)]
        if len(partials)
        else partials
    )
    pair_cols = ["run", "method", "testset_a", "testset_b", "r", "ci_low", "ci_high"]
    pair_cols += ["r_accuracy", "ci_low_accuracy", "ci_high_accuracy"]
    return [
        render(
            "answer_bias.html",
            assessed=True,
            bf=bf,
            r2_most=f"{R2_MOST:.0%}",
            n_flagged=len(flagged),
            n_rows=len(partials),
            testsets=table(diag[diag["role"] == "ood"], [c for c in COLUMNS if c not in ("role", "bias_free_metric")]),
            pairs=table(flagged, pair_cols) if len(flagged) else None,
            figures=[img(name, cap) for name, cap in sorted(figures.items()) if name.startswith("yes_rate_")],
        )
    ]


def assess(runs: dict, tables: dict, bf_partials, bf: str, summary: dict) -> pd.DataFrame:
    """The analysis' answer-bias pass: answer_bias.csv (returned), the `answer_bias` column of the partials
    (per run), pooled (any seed) and consistency (any model) tables, and summary["answer_bias"]. bf_partials:
    the partial rows of the bias-free metric `bf` (None: unavailable). Skipped (empty table, summary note)
    when the metrics files and predictions hold no yes_rate (older versions)."""
    acc = tables.pop("accuracy_partials", None)
    need = ("accuracy", bf, "yes_rate")
    for key in ("partials", "pooled", "consistency"):
        tables[key] = tables[key].assign(answer_bias=False)
    if acc is None or bf_partials is None or any(m not in d["series"] for d in runs.values() for m in need):
        summary["answer_bias"] = {"assessed": False, "note": "no yes_rate in the metrics files or predictions"}
        return pd.DataFrame(columns=COLUMNS)
    series = {
        run: {
            "id_testset": d["meta"]["id_testset"],
            "yes_share_gold": d["gold_share"],
            **{m: d["series"][m] for m in need},
        }
        for run, d in runs.items()
    }
    diag = diagnose(series, {run: d["meta"] for run, d in runs.items()}, bf)
    partials = tables["partials"]
    partials["answer_bias"] = pair_flags(partials, acc, bf_partials, diag, series)
    pair = ["method", "testset_a", "testset_b"]
    for key, by in (
        ("pooled", ["model", "train_set", "shots", "id_testset", *pair]),
        ("consistency", ["train_set", "shots", "id_testset", *pair]),
    ):
        if len(tables[key]):
            anyb = partials.groupby(by, dropna=False)["answer_bias"].any().reset_index()
            tables[key] = tables[key].drop(columns="answer_bias").merge(anyb, on=by, how="left")
            tables[key]["answer_bias"] = tables[key]["answer_bias"].fillna(False).astype(bool)
    ood = diag[diag["role"] == "ood"]
    summary["answer_bias"] = {
        "assessed": True,
        "bias_free_metric": bf,
        "pairs_flagged": {m: int(g["answer_bias"].sum()) for m, g in partials.groupby("method")},
        "median_r2_accuracy": float(ood["r2_accuracy"].median()) if ood["r2_accuracy"].notna().any() else None,
        "median_r2_bias_free": float(ood["r2_bias_free"].median()) if ood["r2_bias_free"].notna().any() else None,
    }
    return diag
