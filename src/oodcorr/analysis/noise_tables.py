"""The noise pass of the analysis: whether it runs, the per-item score matrices it reads from the stored
predictions, the noise columns and reliability table it adds (the statistics are in noise.py), and the
summary's "noise" block."""

from __future__ import annotations

from pathlib import Path

from oodcorr.analysis.settings import AnalyzeSettings
from oodcorr.errors import UserError
from oodcorr.metrics import METRICS
from oodcorr.rundir import PREDICTIONS

RELIABILITY_COLUMNS = ["run", "model", "seed", "metric", "method", "testset", "n_items", "n", "reliability", "flag"]
BOOT_DEFAULT = 1000  # two-level bootstrap resamples when analyze.bootstrap is 0


def _predictions(data: dict) -> Path:
    return Path(data["sources"][0]).parent / PREDICTIONS


def noise_enabled(runs: dict, settings: AnalyzeSettings) -> bool:
    """Whether the noise analysis runs (analyze.noise: auto | true | false); raises for missing predictions.

    auto: on when every run has stored predictions, skipped when none has (older outputs; the report says
    so), an error naming the first run without them when only some have. true: required. A metric the
    metrics.jsonl files do not hold (METRICS[...].column is None) needs predictions whatever `noise` says."""
    metric = settings.metric
    needs_predictions = METRICS[metric].needs_predictions
    if settings.noise_off and not needs_predictions:
        return False
    have = {run: _predictions(d).is_dir() for run, d in runs.items()}
    missing = [run for run, ok in have.items() if not ok]
    required = settings.noise_required or needs_predictions
    if missing and (required or len(missing) < len(have)):
        run = missing[0]
        why = f"analyze.metric={metric} needs them" if needs_predictions else "the noise analysis needs them"
        raise UserError(f"run {run!r}: no per-example predictions in "
                        f"{_predictions(runs[run])} ({why}); run `oodcorr evaluate "
                        f"--run {run}` to write them, or set analyze.noise: false")
    return not missing


def load_items(runs: dict, settings: AnalyzeSettings) -> dict:
    """{run: {metric: {testset: (checkpoints x items)}}} for every metric in METRICS; with a
    metric the metrics.jsonl files do not hold, each run's analysed series (x, Y) become its per-checkpoint means."""
    import pandas as pd

    from oodcorr.analysis.noise import load_run_items

    items = {}
    for run, d in runs.items():
        names = [d["meta"]["id_testset"], *d["Y"].columns]
        items[run] = load_run_items(run, _predictions(d).parent, d["steps"], names, METRICS)
        if METRICS[settings.metric].needs_predictions:  # analyse the chosen metric's trajectories instead
            mats = items[run][settings.metric]
            d["x"] = mats[names[0]].mean(axis=1)
            d["Y"] = pd.DataFrame({n: mats[n].mean(axis=1) for n in names[1:]}, index=d["Y"].index)
    return items


def compute_noise(runs: dict, partials, settings: AnalyzeSettings, items: dict):
    """Reliability table and the noise columns of `partials` (rel_a, rel_b, r_disattenuated, ci2_low,
    ci2_high, distinguishable). `items`: {run: {metric: {testset: (n, I)}}} (load_items). ci2 is the
    row's Fisher CI (ci_low, ci_high) disattenuated like r (noise.disattenuated_ci). ci2boot is the
    two-level bootstrap view (checkpoints and, within each testset, items resampled; linear and rank):
    reported beside ci2, not used for verdicts, since it under-covers under strong attenuation
    (bench/results/noise_simulation.json); its resamples: analyze.bootstrap, else BOOT_DEFAULT."""
    import math

    import numpy as np
    import pandas as pd

    from oodcorr.analysis.noise import (NOISE_METHODS, analyse_run_noise, basic_ci, disattenuate,
                                        disattenuated_ci, two_level_boot, two_level_resamples)

    metric, reliability_min, splits = settings.metric, settings.reliability_min, settings.reliability_splits
    alpha, bootstrap = settings.alpha, settings.bootstrap or BOOT_DEFAULT
    rng = np.random.default_rng(settings.seed + 1)
    methods = [m for m in NOISE_METHODS if m in set(partials["method"])] if len(partials) else []
    rel_rows, extra, boots = [], [], {}
    for run, data in runs.items():
        names = list(data["Y"].columns)
        mats = items.get(run)
        if mats is None:
            raise UserError(f"run {run!r}: no item matrices")
        rel_items = {metric: mats[metric], **{m: mats[m] for m in METRICS if m != metric}}
        rr, pr = analyse_run_noise(data["x"], data["Y"].to_numpy(float), names, methods, splits, rng,
                                   {m: {nm: rel_items[m][nm] for nm in names} for m in rel_items})
        for row in rr:
            row.update(run=run, model=data["meta"]["model"], seed=data["meta"]["seed"])
        rel_rows += rr
        for row in pr:
            row["run"] = run
        extra += pr
        id_items = mats[metric].get(data["meta"]["id_testset"])
        Y_items = [mats[metric][nm] for nm in names]
        if id_items is not None and names and np.isfinite(data["x"]).all() and np.isfinite(data["Y"].to_numpy(float)).all():
            res = two_level_resamples(id_items, Y_items, bootstrap, rng)  # shared by the methods (paired)
            for method in ("linear", "rank"):
                if method in methods:
                    boots[(run, method)] = (two_level_boot(id_items, Y_items, method, bootstrap, rng, resamples=res),
                                            names)
    rel = pd.DataFrame(rel_rows)
    if rel.empty:
        rel = pd.DataFrame(columns=RELIABILITY_COLUMNS)
    rel = rel[RELIABILITY_COLUMNS]
    out = partials.copy()
    for col in ("rel_a", "rel_b", "r_disattenuated", "ci2_low", "ci2_high", "ci2boot_low", "ci2boot_high"):
        out[col] = math.nan
    out["distinguishable"] = False
    lookup = {(e["run"], e["method"], e["testset_a"], e["testset_b"]): e for e in extra}
    flags = out["flag"].fillna("").astype(str).tolist()
    for i, row in enumerate(out.itertuples(index=False)):
        e = lookup.get((row.run, row.method, row.testset_a, row.testset_b))
        if e is None:
            continue
        ra, rb = e["rel_a"], e["rel_b"]
        d = float(disattenuate(row.r, ra, rb, reliability_min))
        lo, hi = (float(v) for v in disattenuated_ci(row.ci_low, row.ci_high, ra, rb, reliability_min))
        new = [f"unreliable:{t}" for t, v in ((row.testset_a, ra), (row.testset_b, rb))
               if not (np.isfinite(v) and v >= reliability_min)]
        flags[i] = ";".join(filter(None, [flags[i], *new]))
        out.iloc[i, out.columns.get_indexer(["rel_a", "rel_b", "r_disattenuated", "ci2_low", "ci2_high"])] = \
            [ra, rb, d, lo, hi]
        if (row.run, row.method) in boots:
            B, nm = boots[(row.run, row.method)]
            out.iloc[i, out.columns.get_indexer(["ci2boot_low", "ci2boot_high"])] = list(basic_ci(
                row.r, B[:, nm.index(row.testset_a), nm.index(row.testset_b)], alpha, n=int(row.n), k=float(row.k)))
        out.iat[i, out.columns.get_loc("distinguishable")] = bool(
            np.isfinite(lo) and (lo > 0 or hi < 0) and not new)
    out["flag"] = flags
    return out, rel


def noise_summary(use_noise: bool, settings: AnalyzeSettings, partials, reliability) -> dict:
    """summary.json "noise" block: plain numbers a reader (and MLflow) can compare between analyses."""
    import numpy as np

    metric, reliability_min = settings.metric, settings.reliability_min
    if not use_noise:
        return {"enabled": False, "metric": metric,
                "note": "no per-example predictions: reliability and noise-corrected CIs skipped"}
    out = {"enabled": True, "metric": metric, "reliability_min": reliability_min,
           "ci2": "fisher_ci / sqrt(rel_a * rel_b)", "methods": {}}
    for m, g in partials.groupby("method"):
        if m == "raw" or g["ci2_low"].isna().all() and g["rel_a"].isna().all():
            continue
        rel = reliability[(reliability["method"] == m) & (reliability["metric"] == metric)]["reliability"]
        fin = g[np.isfinite(g["r"])]
        out["methods"][m] = {
            "median_reliability": float(rel.median()) if rel.notna().any() else None,
            "share_reliable": float((rel >= reliability_min).mean()) if len(rel) else None,
            "share_distinguishable": float(fin["distinguishable"].mean()) if len(fin) else None,
            "mean_abs_r": float(fin["r"].abs().mean()) if len(fin) else None,
            "mean_abs_r_disattenuated": float(fin["r_disattenuated"].abs().mean())
            if fin["r_disattenuated"].notna().any() else None,
        }
    by_metric = reliability[reliability["method"] == "linear"].groupby("metric")["reliability"].median()
    out["median_reliability_linear_by_metric"] = {k: (float(v) if np.isfinite(v) else None)
                                                 for k, v in by_metric.items()}
    return out
