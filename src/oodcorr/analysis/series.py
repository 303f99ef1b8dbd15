"""The per-checkpoint series the analysis correlates: the analysed metric's (analyze.metric), accuracy's
beside it, and the bias-free metric's and yes_rate for the answer-bias diagnosis (answer_bias.py).

Each comes from its metrics.jsonl field (the evaluate stage writes every metric of oodcorr.stats.metrics.METRICS),
else from the stored predictions (metrics files of an older version), else it is missing: the analysed
metric then stops with one line naming `oodcorr evaluate --run <run>`. A balanced metric is NaN on a testset
with one gold class: that testset leaves the analysed metric's series with a flag `one_class:<testset>`.
"""

from __future__ import annotations

import math

import numpy as np

from oodcorr.core.errors import UserError
from oodcorr.stats.metrics import BASELINE_METRIC, BIAS_FREE_METRIC, DIAGNOSTIC_METRIC, METRICS


def wanted(metric: str) -> list[str]:
    """The analysed metric first, then accuracy, the bias-free metric and yes_rate."""
    return list(dict.fromkeys([metric, BASELINE_METRIC, bias_free_metric(metric), DIAGNOSTIC_METRIC]))


def bias_free_metric(metric: str) -> str:
    """What accuracy is compared with for the answer_bias flag: the analysed metric when bias-invariant."""
    return metric if METRICS[metric].bias_invariant else BIAS_FREE_METRIC


def in_files(df, runs: dict, metric: str) -> dict[str, bool]:
    """{run: the run's metrics rows hold `metric`} (an older version's rows lack the field: NaN everywhere)."""
    if metric not in df:
        return {run: False for run in runs}
    has = df.groupby("run")[metric].apply(lambda s: bool(s.notna().any()))
    return {run: bool(has.get(run, False)) for run in runs}


def missing_runs(df, runs: dict, metric: str) -> list[str]:
    """Runs whose metrics files lack `metric` (it must then come from the stored predictions)."""
    return [run for run, ok in in_files(df, runs, metric).items() if not ok]


def attach(runs: dict, df, metric: str, items: dict) -> list[str]:
    """Fill d["series"] = {metric: {testset: (n,) array on d["steps"]}} for every wanted metric available,
    d["gold_share"] = {testset: share of gold "Yes"}, and switch d["x"], d["Y"] to the analysed metric.
    OOD testsets where the analysed metric is undefined (one gold class) leave Y; returns their flags."""
    import pandas as pd

    from oodcorr.records.predictions import GOLD
    from oodcorr.stats.aggregate import values

    flags = []
    for run, d in runs.items():
        g = df[df["run"] == run]
        names = [d["meta"]["id_testset"], *d["Y"].columns]
        mats = items.get(run) or {}
        series = {}
        for m in wanted(metric):
            if m in g and g[m].notna().any():
                wide = g.pivot(index="step", columns="testset", values=m).reindex(d["steps"])
                series[m] = {t: wide[t].to_numpy(float) for t in names}
            elif m in mats:
                kind = METRICS[m].aggregate
                series[m] = {t: values(kind, mats[m][t], mats[GOLD][t]) for t in names}
            elif m == metric:
                src = d["sources"][0]
                raise UserError(
                    f"run {run!r}: {src} has no {m} and there are no log-probs to compute it from "
                    f"(written by an older version); run `oodcorr evaluate --run {run}` to rescore "
                    "it, or set analyze.metric: accuracy"
                )
        d["series"] = series
        d["gold_share"] = _gold_share(g, names, mats)
        x = series[metric][names[0]]
        if not np.isfinite(x).any():
            why = _why_undefined(g, names[0], metric)
            if why != "one_class":
                from oodcorr.stats.flags import describe

                raise UserError(
                    f"run {run!r}: {d['sources'][0]}: {describe(f'{why}:{names[0]}', metric)} (the ID testset)"
                )
            raise UserError(
                f"run {run!r}: {metric} is undefined on the ID testset {names[0]!r} (one gold class); "
                "set analyze.metric: accuracy"
            )
        ood = [t for t in names[1:] if np.isfinite(series[metric][t]).any()]
        d["undefined"] = {t: f"{_why_undefined(g, t, metric)}:{t}" for t in names[1:] if t not in ood}
        flags += d["undefined"].values()
        d["one_class"] = list(d["undefined"])
        d["x"] = x
        d["Y"] = pd.DataFrame({t: series[metric][t] for t in ood}, index=d["Y"].index)
    return sorted(set(flags))


def _why_undefined(g, testset: str, metric: str) -> str:
    """Why `metric` has no value on `testset`: nothing was scored on it (no_score: accuracy NaN too), its rows were
    written without the field (no_metric), else it is undefined there (one_class: a balanced metric on a testset
    with one gold class is NaN)."""
    rows = g[g["testset"] == testset]
    if rows["accuracy"].isna().all():
        return "no_score"
    absent = rows["_absent"] if "_absent" in rows else ()
    return "no_metric" if any(metric in str(a).split(",") for a in absent) else "one_class"


def _gold_share(g, names, mats) -> dict:
    from oodcorr.records.predictions import GOLD

    out = {}
    for t in names:
        rows = g[g["testset"] == t]
        if "n_entailment" in rows and rows["n_entailment"].notna().any() and rows["n"].notna().any():
            out[t] = float(rows["n_entailment"].dropna().iloc[-1] / rows["n"].dropna().iloc[-1])
        elif GOLD in mats and t in mats[GOLD]:
            out[t] = float(np.mean(mats[GOLD][t]))
        else:
            out[t] = math.nan
    return out


def as_metric(runs: dict, metric: str) -> dict | None:
    """A copy of `runs` whose x/Y are `metric`'s series (the same OOD testsets, plus those the analysed metric
    is undefined on where `metric` is defined); None when a run lacks it."""
    import pandas as pd

    out = {}
    for run, d in runs.items():
        s = d["series"].get(metric)
        if s is None:
            return None
        names = sorted([*d["Y"].columns, *(t for t in d.get("one_class") or [] if np.isfinite(s[t]).any())])
        out[run] = {
            **d,
            "x": s[d["meta"]["id_testset"]],
            "Y": pd.DataFrame({t: s[t] for t in names}, index=d["Y"].index),
        }
    return out


def one_class_rows(runs: dict, methods) -> list[dict]:
    """Partial-correlation rows (r NaN, flag one_class:<testset>) for every pair with a testset the analysed
    metric is undefined on, so the tables still list them."""
    rows = []
    for run, d in runs.items():
        bad = d.get("one_class") or []
        names = sorted([*d["Y"].columns, *bad])
        for method in methods:
            for i, a in enumerate(names):
                for b in names[i + 1 :]:
                    if a in bad or b in bad:
                        rows.append(
                            {
                                **d["meta"],
                                "method": method,
                                "testset_a": a,
                                "testset_b": b,
                                "r": math.nan,
                                "n": len(d["x"]),
                                "k": 1.0,
                                "df": math.nan,
                                "p": math.nan,
                                "p_holm": math.nan,
                                "p_bh": math.nan,
                                "ci_low": math.nan,
                                "ci_high": math.nan,
                                "flag": ";".join(
                                    (d.get("undefined") or {}).get(t, f"one_class:{t}") for t in (a, b) if t in bad
                                ),
                            }
                        )
    return rows


SIDE = ("r", "ci_low", "ci_high", "r_disattenuated", "ci2_low", "ci2_high", "distinguishable", "flag")


def beside(table, other, keys: list[str], suffix: str, columns=SIDE):
    """`table` with `other`'s `columns` (those it has) merged on `keys` as <column>_<suffix>."""
    cols = [c for c in columns if c in other.columns] if len(other) else list(columns)
    if not len(table) or not len(other):
        return table.assign(**{f"{c}_{suffix}": float("nan") for c in cols})
    right = other[keys + cols].drop_duplicates(keys).rename(columns={c: f"{c}_{suffix}" for c in cols})
    return table.merge(right, on=keys, how="left")
