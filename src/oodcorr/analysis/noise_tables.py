"""The noise pass of the analysis: whether it runs, the per-item score matrices it reads from the stored
predictions, the noise columns and reliability table it adds (the statistics are in noise.py; one run's
reliability rows in reliability.py, the summary's "noise" block in noise_summary.py)."""

from __future__ import annotations

from oodcorr.analysis.reliability import analyse_run_noise
from oodcorr.core.errors import UserError
from oodcorr.records.predictions import predictions_dir
from oodcorr.settings.analyze import AnalyzeSettings
from oodcorr.stats.methods import METHODS
from oodcorr.stats.metrics import METRICS

RELIABILITY_COLUMNS = ["run", "model", "seed", "metric", "method", "testset", "n_items", "n", "reliability", "flag"]
BOOT_DEFAULT = 1000  # two-level bootstrap resamples when analyze.bootstrap is 0


def noise_enabled(runs: dict, settings: AnalyzeSettings, need_items=()) -> bool:
    """Whether the noise analysis runs (analyze.noise: auto | true | false); raises for missing predictions.

    auto: on when every run has stored predictions, skipped when none has (older outputs; the report says
    so), an error naming the first run without them when only some have. true: required. `need_items`: runs
    whose metrics files lack the analysed metric, so it must come from their predictions whatever `noise`
    says (an error naming `oodcorr evaluate --run <run>` where they have none)."""
    have = {run: predictions_dir(d).is_dir() for run, d in runs.items()}
    lacking = [run for run in need_items if not have[run]]
    if lacking:
        run = lacking[0]
        raise UserError(
            f"run {run!r}: {runs[run]['sources'][0]} has no {settings.metric} and there are no "
            f"per-example log-probs to compute it from (written by an older version); run `oodcorr "
            f"evaluate --run {run}` to rescore it, or set analyze.metric: accuracy"
        )
    if settings.noise_off:
        return False
    missing = [run for run, ok in have.items() if not ok]
    if missing and (settings.noise_required or len(missing) < len(have)):
        run = missing[0]
        raise UserError(
            f"run {run!r}: no per-example predictions in "
            f"{predictions_dir(runs[run])} (the noise analysis needs them); run `oodcorr evaluate "
            f"--run {run}` to write them, or set analyze.noise: false"
        )
    return not missing


def compute_noise(runs: dict, partials, settings: AnalyzeSettings, items: dict, inputs: dict | None = None):
    """Reliability table and the noise columns of `partials` (noise_columns). `items`: load_items. Each metric's
    reliability residualises its own ID series, over halves stratified by gold label (analyse_run_noise).
    ci2boot is the two-level bootstrap view of the analysed metric (checkpoints and, within each testset,
    items resampled; linear and rank; metrics that are plain means only): reported beside ci2, not used for
    verdicts, since it under-covers under strong attenuation (bench/stats/results/noise_simulation.json); its
    resamples: analyze.bootstrap, else BOOT_DEFAULT. inputs: seed_inputs (built here when not given)."""
    import numpy as np
    import pandas as pd

    from oodcorr.records.predictions import GOLD
    from oodcorr.stats.noise import NOISE_METHODS, two_level_boot, two_level_resamples

    metric, splits = settings.metric, settings.reliability_splits
    bootstrap = settings.bootstrap or BOOT_DEFAULT
    rng = np.random.default_rng(settings.seed + 1)
    methods = [m for m in NOISE_METHODS if m in set(partials["method"])] if len(partials) else []
    rel_rows, boots = [], {}
    for run, data in runs.items():
        names = list(data["Y"].columns)
        mats = items.get(run)
        if mats is None:
            raise UserError(f"run {run!r}: no item matrices")
        id_name = data["meta"]["id_testset"]
        order = [metric, *(m for m in METRICS if m != metric)]
        rr = analyse_run_noise(
            data["x"],
            data["Y"].to_numpy(float),
            names,
            methods,
            splits,
            rng,
            {m: {nm: mats[m][nm] for nm in [id_name, *names]} for m in order},
            gold=mats[GOLD],
            id_name=id_name,
        )
        for row in rr:
            row.update(run=run, model=data["meta"]["model"], seed=data["meta"]["seed"])
        rel_rows += rr
        id_items = mats[metric].get(id_name)
        Y_items = [mats[metric][nm] for nm in names]
        if (
            METRICS[metric].aggregate == "mean"
            and id_items is not None
            and names
            and np.isfinite(data["x"]).all()
            and np.isfinite(data["Y"].to_numpy(float)).all()
        ):
            res = two_level_resamples(id_items, Y_items, bootstrap, rng)  # shared by the methods (paired)
            for method in methods:
                if METHODS[method].ci2boot:
                    boots[(run, method)] = (
                        two_level_boot(id_items, Y_items, method, bootstrap, rng, resamples=res),
                        names,
                    )
    rel = pd.DataFrame(rel_rows)
    if rel.empty:
        rel = pd.DataFrame(columns=RELIABILITY_COLUMNS)
    rel = rel[RELIABILITY_COLUMNS]
    return noise_columns(partials, rel, metric, settings, boots, runs, items, inputs), rel


def seed_inputs(runs: dict, items: dict, metric: str, settings: AnalyzeSettings) -> dict:
    """{run: {"t", "id", "series", "V"}}: each run's analysed series, their item-noise covariances and the
    checkpoints' training progress in [0, 1], the input of the likelihood interval (pair_ci2)."""
    import numpy as np

    from oodcorr.records.predictions import GOLD
    from oodcorr.stats.noise import item_noise

    out = {}
    rng = np.random.default_rng(settings.seed + 2)
    for run, data in runs.items():
        id_name = data["meta"]["id_testset"]
        names = [id_name, *data["Y"].columns]
        if run not in items or any(nm not in items[run][metric] for nm in names):
            continue
        series, V = item_noise(
            {nm: items[run][metric][nm] for nm in names},
            items[run][GOLD],
            METRICS[metric].aggregate,
            rng,
            settings.reliability_splits,
        )
        steps = np.asarray(data["steps"], float)
        span = steps.max() - steps.min()
        out[run] = {
            "t": (steps - steps.min()) / span if span > 0 else steps * 0,
            "id": id_name,
            "series": series,
            "V": V,
        }
    return out


def pooled_intervals(
    runs: dict,
    partials,
    items: dict,
    metric: str,
    settings: AnalyzeSettings,
    by_model: bool = True,
    inputs: dict | None = None,
) -> dict:
    """{(model, train_set, shots, id_testset, "linear", a, b): pair_ci2.interval over the model's seeds}: one
    likelihood per model and pair, whenever at least one of its runs has the pair's series. by_model=False: one
    likelihood over every model's runs per pair (the key without the model): a shared estimate. inputs:
    seed_inputs, when the caller has built them."""
    import numpy as np

    from oodcorr.stats.pair_ci2 import interval

    inputs = seed_inputs(runs, items, metric, settings) if inputs is None else inputs
    joint = partials["method"].map(lambda m: METHODS[m].interval == "seeds_likelihood").astype(bool)
    rows = partials[joint & np.isfinite(partials["r"].astype(float))]
    out = {}
    keys = ["model"] * by_model + ["train_set", "shots", "id_testset", "method", "testset_a", "testset_b"]
    for key, g in rows.groupby(keys, sort=True, dropna=False):
        a, b = key[-2], key[-1]
        seeds = [
            inputs[r]
            for r in sorted(set(g["run"]))
            if r in inputs and all(np.isfinite(inputs[r]["series"][t]).all() for t in (a, b, inputs[r]["id"]))
        ]
        if seeds:
            out[key] = interval(seeds, a, b, settings.alpha)
    return out


def pair_intervals(
    runs: dict, partials, items: dict, metric: str, settings: AnalyzeSettings, inputs: dict | None = None
) -> dict:
    """{row position in partials: its interval} for the linear/rank/gam rows with a finite r, in runs whose
    series of the rows' testsets are all finite: linear, the likelihood interval of that run alone
    (pair_ci2.interval); rank/gam, the moment interval (interval.partial_interval, one batched call per run: the
    row's r disattenuated). inputs: seed_inputs, when the caller has built them."""
    import numpy as np

    from oodcorr.stats.interval import partial_interval
    from oodcorr.stats.pair_ci2 import interval

    inputs = seed_inputs(runs, items, metric, settings) if inputs is None else inputs
    out = {}
    rows = partials[
        partials["method"].map(lambda m: METHODS[m].noise).astype(bool) & np.isfinite(partials["r"].astype(float))
    ]
    for run, g in rows.groupby("run"):
        if run not in inputs:
            continue
        series, V, id_name = inputs[run]["series"], inputs[run]["V"], inputs[run]["id"]
        if not all(np.isfinite(series[nm]).all() for nm in {id_name, *g["testset_a"], *g["testset_b"]}):
            continue
        lin = g["method"].map(lambda m: METHODS[m].interval == "seeds_likelihood").to_numpy(bool)
        for i, row in g[lin].iterrows():  # one story per row: the reliabilities are the interval's own
            out[partials.index.get_loc(i)] = interval([inputs[run]], row["testset_a"], row["testset_b"], settings.alpha)
        g = g[~lin]
        if not len(g):
            continue
        a, b, k = g["testset_a"].tolist(), g["testset_b"].tolist(), len(g)
        res = partial_interval(
            np.broadcast_to(series[id_name], (k, len(series[id_name]))),
            np.stack([series[t] for t in a]),
            np.stack([series[t] for t in b]),
            np.broadcast_to(V[id_name], (k,) + V[id_name].shape),
            np.stack([V[t] for t in a]),
            np.stack([V[t] for t in b]),
            settings.alpha,
            r_obs=g["r"].to_numpy(float),
            reliability_min=settings.reliability_min,
        )
        for j, i in enumerate(g.index):
            out[partials.index.get_loc(i)] = {
                key: (str(v[j]) if key == "reason" else float(v[j])) for key, v in res.items()
            }
    return out


NOISE_COLUMNS = ["rel_a", "rel_b", "r_disattenuated", "ci2_low", "ci2_high", "ci2_se", "attenuation", "n_eff"]


def _noise_row(out, i: int, row, rels: tuple, iv: dict | None, boots: dict, flag: str, settings) -> str:
    """Row i of `out` given its noise columns, from its interval `iv` (None: none) and its split-half reliabilities
    `rels`; returns its flag with the unreliable / ci2_undefined entries added."""
    import math

    import numpy as np

    from oodcorr.stats.noise import basic_ci
    from oodcorr.stats.pair_ci2 import CI2_EXTRA
    from oodcorr.stats.verdicts import equivalent, unreliable_flags

    ra, rb = rels
    if not (np.isfinite(ra) and np.isfinite(rb)):  # too few items to estimate a testset's noise at all
        iv = None
    if iv is not None:  # the row reports the reliabilities its interval used (one story per row)
        ra, rb = (float(np.clip(iv[k], 0, 1)) if np.isfinite(iv[k]) else math.nan for k in ("rel_a", "rel_b"))
    if iv is not None and "why" in iv:
        out.iloc[i, out.columns.get_indexer(list(CI2_EXTRA))] = [iv[k] for k in CI2_EXTRA.values()]
    new = unreliable_flags(row.testset_a, row.testset_b, ra, rb, settings.reliability_min)
    if iv is not None and iv["reason"]:
        new.append(f"ci2_undefined:{iv['reason']}")
    vals = [ra, rb] + [math.nan] * 6
    if iv is not None and not iv["reason"]:
        keys = ("ci_low", "ci_high", "se_z", "A", "n_eff")
        vals[2:] = [float(np.clip(iv["r_hat"], -1, 1)), *(iv[k] for k in keys)]
    out.iloc[i, out.columns.get_indexer(NOISE_COLUMNS)] = vals
    if (row.run, row.method) in boots:
        B, nm = boots[(row.run, row.method)]
        boot = B[:, nm.index(row.testset_a), nm.index(row.testset_b)]
        ci = basic_ci(row.r, boot, settings.alpha, n=int(row.n), k=float(row.k))
        out.iloc[i, out.columns.get_indexer(["ci2boot_low", "ci2boot_high"])] = list(ci)
    lo, hi = vals[3], vals[4]
    reliable = not any(f.startswith("unreliable:") for f in new)
    out.iat[i, out.columns.get_loc("distinguishable")] = bool(reliable and np.isfinite(lo) and (lo > 0 or hi < 0))
    out.iat[i, out.columns.get_loc("equivalent")] = bool(reliable and equivalent(lo, hi, settings.equivalence))
    return ";".join(filter(None, [flag, *new]))


def noise_columns(
    partials,
    rel,
    metric: str,
    settings: AnalyzeSettings,
    boots: dict | None = None,
    runs: dict | None = None,
    items: dict | None = None,
    inputs: dict | None = None,
):
    """`partials` with rel_a, rel_b (the reliabilities of the pair's residual series its interval used; without
    an interval, `metric`'s split-half reliabilities from the table `rel`), the noise-corrected interval
    (pair_intervals, from `runs` and `items`: r_disattenuated, ci2_low, ci2_high, ci2_se, attenuation, n_eff),
    ci2boot_low/high (from `boots`, else NaN), distinguishable (ci2 excludes 0) and equivalent (ci2 inside +/-
    analyze.equivalence); `unreliable:<testset>` and `ci2_undefined:<why>` flags."""
    import math

    from oodcorr.stats.pair_ci2 import CI2_EXTRA

    boots = boots or {}
    sub = rel[rel["metric"] == metric]
    rel_of = {(r.run, r.method, r.testset): r.reliability for r in sub.itertuples(index=False)}
    intervals = pair_intervals(runs, partials, items, metric, settings, inputs) if runs is not None and items else {}
    out = partials.copy()
    for col in NOISE_COLUMNS + ["ci2boot_low", "ci2boot_high"] + list(CI2_EXTRA):
        out[col] = math.nan if col != "ci2_why" else ""
    out["distinguishable"] = False
    out["equivalent"] = False
    flags = out["flag"].fillna("").astype(str).tolist()
    for i, row in enumerate(out.itertuples(index=False)):
        if not METHODS[row.method].noise or (row.run, row.method, row.testset_a) not in rel_of:
            continue
        ra, rb = (float(rel_of.get((row.run, row.method, t), math.nan)) for t in (row.testset_a, row.testset_b))
        flags[i] = _noise_row(out, i, row, (ra, rb), intervals.get(i), boots, flags[i], settings)
    out["flag"] = flags
    return out
