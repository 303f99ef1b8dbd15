"""The analysis pipeline: metrics files -> partial correlations (partial.py), the noise pass
(noise_tables.py), seed pooling and cross-model verdicts (consistency.py) -> the results folder
(outputs.py) and, optionally, one MLflow run (mlflow_log.py).

Everything is written into a temporary folder that replaces `out_dir` only when the whole analysis
succeeded (oodcorr.core.io.atomic_dir), so a failed run never leaves a half-updated results folder that
DVC would cache.
"""

from __future__ import annotations

from pathlib import Path

from oodcorr.analysis import answer_bias, series
from oodcorr.settings.analyze import AnalyzeSettings
from oodcorr.stats.consistency import SETUP
from oodcorr.stats.methods import REFERENCES, primary
from oodcorr.stats.metrics import BASELINE_METRIC


def _answer_bias(runs: dict, tables: dict, settings, all_methods: list, summary: dict):
    """answer_bias.csv, and the tables' answer_bias columns: accuracy against the bias-free metric's partials."""
    metric = settings.metric
    bf = series.bias_free_metric(metric)  # what accuracy is compared with for the answer_bias flag
    bf_runs = series.as_metric(runs, bf) if bf != metric else None
    bf_partials = (
        tables["partials"]
        if bf == metric
        else compute_partials(bf_runs, all_methods, settings.but(bootstrap=0))
        if bf_runs is not None
        else None
    )
    return answer_bias.assess(runs, tables, bf_partials, bf, summary)


def _load(metrics_files, settings: AnalyzeSettings):
    """The runs with the analysed metric's series attached, their per-item scores where the noise pass (or an
    older metrics file's missing metric) needs them, whether the noise pass runs, and the one-class flags."""
    from oodcorr.analysis.noise_tables import noise_enabled
    from oodcorr.records.predictions import load_items
    from oodcorr.records.run_tables import build_runs, load_metrics

    df = load_metrics(list(metrics_files), slices=settings.slices)
    runs = build_runs(df)
    need = series.missing_runs(df, runs, settings.metric)  # older metrics files: the metric from the predictions
    use_noise = noise_enabled(runs, settings, need)
    items = load_items(runs) if use_noise or need else {}
    one_class = series.attach(runs, df, settings.metric, items)
    return runs, items, use_noise, one_class


def run_analysis(
    metrics_files,
    out_dir,
    settings: AnalyzeSettings | None = None,
    *,
    plots: bool = True,
    mlflow: bool = False,
    tracking_uri: str | None = None,
    experiment: str | None = None,
    training_run_ids: list[str] | None = None,
    **overrides,
) -> dict:
    """Run the whole analysis and write every output into `out_dir` (atomically). Returns the summary.

    `settings` (default AnalyzeSettings()) with `overrides` (its field names) on top. Its methods may include
    "raw" (the unpartialled r); it is always computed for the report/summary even when not listed, because it
    shows how much shared ID progress drives each correlation."""
    from oodcorr.analysis.noise_summary import noise_summary
    from oodcorr.analysis.noise_tables import compute_noise, pooled_intervals, seed_inputs
    from oodcorr.analysis.outputs import check_out_dir, curves_table, write_outputs
    from oodcorr.stats.consistency import cross_model, pool_seeds, summarise, with_shared

    settings = (settings or AnalyzeSettings()).but(**overrides) if overrides else settings or AnalyzeSettings()
    check_out_dir(Path(out_dir))  # before any work, and long before the folder is replaced
    methods, alpha, metric = list(settings.methods), settings.alpha, settings.metric
    runs, items, use_noise, one_class = _load(metrics_files, settings)
    all_methods = methods + [m for m in REFERENCES if m not in methods]
    partials = with_one_class(compute_partials(runs, all_methods, settings), runs, all_methods)
    reliability, ci2_pooled, inputs = None, None, None
    if use_noise:
        inputs = seed_inputs(runs, items, metric, settings)  # item noise: once per analysis
        partials, reliability = compute_noise(runs, partials, settings, items, inputs)
        ci2_pooled = pooled_intervals(runs, partials, items, metric, settings, inputs=inputs)
    pooled = pool_seeds(partials, alpha, settings.equivalence, ci2_pooled, settings.reliability_min)
    consistency = cross_model(pooled, alpha, settings.reliability_min, settings.equivalence)
    if use_noise and settings.pool_models:
        consistency = with_shared(consistency, pooled_intervals(runs, partials, items, metric, settings, False, inputs))
    summary = summarise(partials, consistency, all_methods, alpha)
    summary.update(
        alpha=alpha,
        bootstrap=settings.bootstrap,
        methods_requested=methods,
        metric=metric,
        equivalence=settings.equivalence,
        models=sorted(partials["model"].unique().tolist()) if len(partials) else [],
        **({"flags": one_class} if one_class else {}),
    )
    summary["noise"] = noise_summary(use_noise, settings, partials, reliability)
    tables = {"partials": partials, "pooled": pooled, "consistency": consistency, "reliability": reliability}
    tables.update(beside_accuracy(runs, tables, settings, all_methods, summary, items))
    tables["answer_bias"] = _answer_bias(runs, tables, settings, all_methods, summary)
    pair = scatter_pair(runs, partials, settings.scatter_pair, primary(methods) or methods[0])
    out_dir = Path(out_dir)
    write_outputs(out_dir, settings, summary, runs, tables, curves_table(runs), all_methods, pair, plots)
    if mlflow:
        from oodcorr.analysis.mlflow_log import log_analysis

        log_analysis(out_dir, summary, runs, metrics_files, tracking_uri, experiment, training_run_ids)
    return summary


def with_one_class(partials, runs: dict, methods):
    """`partials` plus NaN rows flagged one_class:<testset> for pairs the analysed metric is undefined on."""
    import pandas as pd

    rows = series.one_class_rows(runs, methods)
    if not rows:
        return partials
    extra = pd.DataFrame(rows).reindex(columns=partials.columns)
    out = extra if partials.empty else pd.concat([partials, extra], ignore_index=True)
    numeric = ("r", "n", "k", "df", "p", "p_holm", "p_bh", "ci_low", "ci_high", "boot_ci_low", "boot_ci_high")
    return out.astype({c: float for c in numeric if c in out})


def beside_accuracy(
    runs: dict, tables: dict, settings: AnalyzeSettings, methods, summary: dict, items: dict | None = None
) -> dict:
    """Accuracy (the paper's metric) beside the analysed one: its partial r, Fisher CI and, with the noise
    pass, ci2 and `distinguishable` as <column>_accuracy in partial_correlations.csv, its seed-pooled r and CI
    in pooled_seeds.csv, its verdict in consistency.csv (verdict_accuracy) and summary["accuracy"]."""
    from oodcorr.analysis.noise_tables import noise_columns, pooled_intervals, seed_inputs
    from oodcorr.stats.consistency import cross_model, pool_seeds, summarise

    alpha = settings.alpha
    acc_runs = series.as_metric(runs, BASELINE_METRIC)
    if acc_runs is None:
        return {}
    if settings.metric == BASELINE_METRIC:
        acc, pooled, cons = tables["partials"], tables["pooled"], tables["consistency"]
    else:
        acc = compute_partials(acc_runs, methods, settings.but(bootstrap=0))
        ci2_pooled = None
        if tables["reliability"] is not None:
            inputs = seed_inputs(acc_runs, items, BASELINE_METRIC, settings)
            acc = noise_columns(
                acc, tables["reliability"], BASELINE_METRIC, settings, runs=acc_runs, items=items, inputs=inputs
            )
            ci2_pooled = pooled_intervals(acc_runs, acc, items, BASELINE_METRIC, settings, inputs=inputs)
        pooled = pool_seeds(acc, alpha, settings.equivalence, ci2_pooled, settings.reliability_min)
        cons = cross_model(pooled, alpha, settings.reliability_min, settings.equivalence)
        s = summarise(acc, cons, methods, alpha)
        summary["accuracy"] = {
            m: {"mean_abs_r": v["mean_abs_r"], "verdicts": v["verdicts"]} for m, v in s["methods"].items()
        }
    keys = ["run", "method", "testset_a", "testset_b"]
    pkeys = ["model", *SETUP, "method", "testset_a", "testset_b"]
    ckeys = [*SETUP, "method", "testset_a", "testset_b"]
    return {
        "partials": series.beside(tables["partials"], acc, keys, BASELINE_METRIC),
        "pooled": series.beside(
            tables["pooled"],
            pooled,
            pkeys,
            BASELINE_METRIC,
            ("r", "ci_low", "ci_high", "p_bh", "r_disattenuated", "ci2_low", "ci2_high"),
        ),
        "consistency": series.beside(tables["consistency"], cons, ckeys, BASELINE_METRIC, ("verdict", "r_pooled")),
        "accuracy_partials": acc,
    }


def compute_partials(runs: dict, methods, settings: AnalyzeSettings | None = None):
    """Long table: one row per run x method x OOD pair, with Holm/BH over the pairs of a run x method.
    `settings`: bootstrap, alpha and seed (default: AnalyzeSettings())."""
    import numpy as np
    import pandas as pd

    from oodcorr.stats.partial import adjust_pvalues, analyse_run

    settings = settings or AnalyzeSettings()
    alpha, bootstrap = settings.alpha, settings.bootstrap
    rng = np.random.default_rng(settings.seed)
    frames = []
    for run, data in runs.items():
        names = list(data["Y"].columns)
        for m in methods:
            rows = analyse_run(data["x"], data["Y"].to_numpy(), names, m, alpha, bootstrap, rng)
            if not rows:
                continue
            f = pd.DataFrame(rows)
            f["p_holm"], f["p_bh"] = adjust_pvalues(f["p"].to_numpy())
            for key, value in data["meta"].items():
                f[key] = value
            f["method"] = m
            frames.append(f)
    cols = [
        "run",
        "model",
        "train_set",
        "shots",
        "seed",
        "id_testset",
        "method",
        "testset_a",
        "testset_b",
        "r",
        "n",
        "k",
        "df",
        "p",
        "p_holm",
        "p_bh",
        "ci_low",
        "ci_high",
    ]
    if bootstrap:
        cols += ["boot_ci_low", "boot_ci_high"]
    if not frames:
        return pd.DataFrame(columns=cols + ["flag"])
    return pd.concat(frames, ignore_index=True)[cols + ["flag"]]


def scatter_pair(runs, partials, requested, method):
    """The pair drawn in the residual scatter grid: as requested, else the strongest mean |partial r|."""
    names = sorted({n for d in runs.values() for n in d["Y"].columns})
    if requested:
        from oodcorr.settings.analyze import check_scatter_pair

        check_scatter_pair(requested, names)
        return tuple(requested)
    sub = partials[(partials["method"] == method)].dropna(subset=["r"])
    if sub.empty:
        return tuple(names[:2]) if len(names) >= 2 else None
    best = sub.assign(a=sub["r"].abs()).groupby(["testset_a", "testset_b"])["a"].mean().idxmax()
    return tuple(best)
