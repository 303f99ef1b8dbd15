"""Pooling partial correlations across seeds, then asking whether models agree (the paper's question).

Why Fisher z: r is bounded and skewed, atanh(r) is ~normal with variance 1/(n - 3 - k), so seeds (and
then models) combine as an inverse-variance weighted mean with weights w = n - 3 - k. Heterogeneity is
Cochran's Q = sum w (z - zbar)^2 (chi2 with m - 1 df under homogeneity) and I^2 = max(0, (Q - (m-1))/Q).

Verdict per OOD pair x method across models (after pooling each model's seeds):
  significant model   pooled p, Benjamini-Hochberg adjusted over the pairs of that model x method,
                      below alpha;
  model_dependent     significant models disagree in sign;
  consistent_positive / consistent_negative
                      >= 2 models significant, all with that sign (non-significant models may differ
                      in point estimate; `sign_flip` records that separately);
  insufficient_evidence
                      otherwise (fewer than 2 models with a finite r, or fewer than 2 significant).

With per-example predictions (the noise analysis, see noise.py) the verdict accounts for testset noise:
  significant model   the seed-pooled noise-corrected CI (ci2) excludes 0; seeds are pooled like r (Fisher
                      z, weights n - 3 - k) over the seeds where ci2 is defined (both testsets reliable), and
                      the pooled CI is divided by the same-weighted mean of sqrt(rel_a * rel_b);
  unreliable          fewer than 2 models whose pair is reliable (both testsets' mean reliability over seeds
                      >= reliability_min, default 0.5) among the models with a finite r: the residual
                      trajectories are too noisy to say whether the models agree. Otherwise the other
                      verdicts are taken over the reliable models only.
  consistent_null     no sign verdict, and in every reliable model (>= 2) the noise-corrected CI lies inside
                      (-delta, +delta), delta = analyze.equivalence (default 0.3): no partial correlation
                      stronger than delta in any model. This is a two one-sided test (TOST) on the same 95 %
                      interval, i.e. each one-sided test at 2.5 % (conservative against the 90 % interval of a
                      5 % TOST; one interval is shown and decides both questions). Without the noise analysis
                      the seed-pooled Fisher CI of every model with a finite r plays that role. The same check per
                      model (and per run) is the `equivalent` column of pooled_seeds.csv (partial_correlations.csv).

Seed pooling of the noise-corrected CI: each seed's attenuated r on Fisher z, with its standard error (ci2_se,
from the effective number of checkpoints, see interval.py), is pooled by inverse variance and the interval
divided by the mean attenuation, as for one run.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from oodcorr.stats.defaults import ALPHA, EQUIVALENCE, RELIABILITY_MIN
from oodcorr.stats.noise_pooling import _from_likelihood, _pool_noise
from oodcorr.stats.partial import adjust_pvalues
from oodcorr.stats.verdicts import equivalent, noise_verdict, unreliable_flags, verdict

VERDICTS = (
    "consistent_positive",
    "consistent_negative",
    "consistent_null",
    "model_dependent",
    "insufficient_evidence",
    "unreliable",
)
SETUP = ["train_set", "shots", "id_testset"]
PAIR = ["method", "testset_a", "testset_b"]


def fisher_pool(r, w, alpha: float = ALPHA) -> dict:
    """Inverse-variance pooled r (Fisher z) with CI, z-test p, Cochran's Q (+ p) and I^2."""
    from scipy import stats

    r, w = np.asarray(r, float), np.asarray(w, float)
    ok = np.isfinite(r) & np.isfinite(w) & (w > 0)
    r, w = r[ok], w[ok]
    m = len(r)
    if m == 0:
        return {
            "r": math.nan,
            "ci_low": math.nan,
            "ci_high": math.nan,
            "z": math.nan,
            "se": math.nan,
            "p": math.nan,
            "q": math.nan,
            "q_p": math.nan,
            "i2": math.nan,
            "m": 0,
            "w": 0.0,
        }
    z = np.arctanh(np.clip(r, -1 + 1e-12, 1 - 1e-12))
    zbar = float((w * z).sum() / w.sum())
    se = float(1 / math.sqrt(w.sum()))
    zc = stats.norm.ppf(1 - alpha / 2)
    q = float((w * (z - zbar) ** 2).sum())
    q_p = float(stats.chi2.sf(q, m - 1)) if m > 1 else math.nan
    i2 = float(max(0.0, (q - (m - 1)) / q)) if m > 1 and q > 0 else (0.0 if m > 1 else math.nan)
    return {
        "r": math.tanh(zbar),
        "ci_low": math.tanh(zbar - zc * se),
        "ci_high": math.tanh(zbar + zc * se),
        "z": zbar,
        "se": se,
        "p": float(2 * stats.norm.sf(abs(zbar) / se)),
        "q": q,
        "q_p": q_p,
        "i2": i2,
        "m": m,
        "w": float(w.sum()),
    }


def pool_seeds(
    partials: pd.DataFrame,
    alpha: float = ALPHA,
    equivalence: float = EQUIVALENCE,
    ci2_pooled: dict | None = None,
    reliability_min: float = RELIABILITY_MIN,
) -> pd.DataFrame:
    """One row per model x setup x method x pair: seeds pooled by Fisher z (weights n - 3 - k).

    With a single valid seed the run's own t-test p and Fisher CI are kept (no z approximation). ci2_pooled
    ({(model, *SETUP, method, a, b): pair_ci2.interval}, noise_tables.pooled_intervals): the noise columns of
    those rows come from one likelihood over the seeds' data instead of pooling each seed's interval, and so do
    their `unreliable:<testset>` flags (the reliabilities that likelihood fitted, below reliability_min), not
    the seeds' own: one row tells one story. Without it (rank, gam) the row's mean reliabilities decide its
    `unreliable:` flags, and a seed's `ci2_undefined:` flag is dropped where the pooled interval is defined."""
    keys = ["model", *SETUP, *PAIR]
    out = []
    for key, g in partials.groupby(keys, sort=True, dropna=False):
        valid = g[np.isfinite(g["r"])]
        w = valid["n"] - 3 - valid["k"]
        pooled = fisher_pool(valid["r"], w, alpha)
        row = dict(zip(keys, key))
        row.update(
            n_seeds=int(pooled["m"]),
            seeds=",".join(str(s) for s in sorted(g["seed"].unique())),
            n_total=int(valid["n"].sum()),
            k_mean=float(valid["k"].mean()) if len(valid) else math.nan,
        )
        row.update({c: pooled[c] for c in ("r", "ci_low", "ci_high", "p", "q", "q_p", "i2")})
        if pooled["m"] == 1:
            one = valid.iloc[0]
            row.update(p=float(one["p"]), ci_low=float(one["ci_low"]), ci_high=float(one["ci_high"]))
        row["weight"] = pooled["w"]
        iv = (ci2_pooled or {}).get(tuple(key)) if "ci2_low" in g else None
        if "ci2_low" in g:
            row.update(_pool_noise(valid, alpha) if iv is None else _from_likelihood(iv))
            row["equivalent"] = bool(equivalent(row["ci2_low"], row["ci2_high"], equivalence))
        else:
            row["equivalent"] = bool(equivalent(row["ci_low"], row["ci_high"], equivalence))
        flags = {f for fl in g["flag"].fillna("") for f in str(fl).split(";") if f}
        if iv is not None or "rel_a" in g and g[["rel_a", "rel_b"]].notna().to_numpy().any():
            # the pooled row's own reliabilities and interval decide, as for a run's own row
            flags = {f for f in flags if not f.startswith("unreliable:")} | set(
                unreliable_flags(
                    key[-2], key[-1], row.get("rel_a", math.nan), row.get("rel_b", math.nan), reliability_min
                )
            )
            if np.isfinite(row.get("ci2_low", math.nan)):  # a seed's undefined interval is not the pooled row's
                flags = {f for f in flags if not f.startswith("ci2_undefined:")}
        row["flag"] = "no_valid_seed" if pooled["m"] == 0 else ";".join(sorted(flags))
        out.append(row)
    pooled = pd.DataFrame(out)
    if pooled.empty:
        return pooled
    pooled["p_bh"] = np.nan
    for _, idx in pooled.groupby(["model", *SETUP, "method"]).groups.items():
        pooled.loc[idx, "p_bh"] = adjust_pvalues(pooled.loc[idx, "p"].to_numpy())[1]
    return pooled


def with_shared(consistency: pd.DataFrame, shared: dict) -> pd.DataFrame:
    """consistency.csv with one shared estimate per pair over every model's runs (analyze.pool_models):
    r_shared, ci2_shared_low/high and shared_why; NaN / "" where the pair has none."""
    out = consistency.copy()
    cols = {"r_shared": "r_hat", "ci2_shared_low": "ci_low", "ci2_shared_high": "ci_high", "shared_why": "why"}
    for col, src in cols.items():
        out[col] = [
            (shared.get(tuple(k)) or {}).get(src, "" if col == "shared_why" else math.nan)
            for k in out[[*SETUP, *PAIR]].itertuples(index=False)
        ]
    return out


def _flags(g) -> list[str]:
    return [str(f) if isinstance(f, str) else "" for f in g["flag"]] if "flag" in g else [""] * len(g)


def _first_flag(flag: str) -> str:
    """The reason a model's r or interval is empty, for the per-model summary strings."""
    from oodcorr.stats.flags import first

    return first(flag) or "no r"


def _models_words(g: pd.DataFrame, alpha: float) -> str:
    """consistency.csv `models`: each model's observed r and CI (* where BH-significant), or why it has none."""
    return "; ".join(
        f"{m}: {r:+.3f} [{lo:+.3f}, {hi:+.3f}]{'*' if p < alpha else ''}"
        if np.isfinite(r)
        else f"{m}: — ({_first_flag(fl)})"
        for m, r, lo, hi, p, fl in zip(g["model"], g["r"], g["ci_low"], g["ci_high"], g["p_bh"], _flags(g))
    )


def _two_level_words(g: pd.DataFrame) -> str:
    """consistency.csv `models_two_level`: each model's noise-free r, ci2 and reliabilities, or why it has none."""
    cols = ("model", "r", "ci2_low", "ci2_high", "rel_a", "rel_b", "r_disattenuated")
    return "; ".join(
        (
            f"{m}: r_dis {d:+.3f} [{lo:+.3f}, {hi:+.3f}] rel {ra:.2f}/{rb:.2f}, observed r {r:+.3f}"
            if np.isfinite(lo)
            else f"{m}: — ({_first_flag(fl)})"
        )
        for (m, r, lo, hi, ra, rb, d), fl in zip(zip(*(g[c] for c in cols)), _flags(g))
    )


def cross_model(
    pooled: pd.DataFrame,
    alpha: float = ALPHA,
    reliability_min: float = RELIABILITY_MIN,
    equivalence: float = EQUIVALENCE,
) -> pd.DataFrame:
    """Per setup x method x OOD pair across models: per-model r/CI, sign agreement, Q, I^2, verdict.

    With noise columns (ci2_*, rel_*) in `pooled` the verdict is noise_verdict (raw keeps the old one)."""
    keys = [*SETUP, *PAIR]
    out = []
    if pooled.empty:
        return pd.DataFrame(columns=[*keys, "verdict"])
    for key, g in pooled.groupby(keys, sort=True, dropna=False):
        g = g.sort_values("model")
        fin = g[np.isfinite(g["r"])]
        sig = fin[fin["p_bh"] < alpha]
        across = fisher_pool(fin["r"], fin["weight"], alpha)
        row = dict(zip(keys, key))
        row.update(
            n_models=int(g["model"].nunique()),
            n_models_valid=int(len(fin)),
            n_models_sig=int(len(sig)),
            n_sig_positive=int((sig["r"] > 0).sum()),
            n_sig_negative=int((sig["r"] < 0).sum()),
            sign_flip=bool((fin["r"] > 0).any() and (fin["r"] < 0).any()),
            r_min=float(fin["r"].min()) if len(fin) else math.nan,
            r_max=float(fin["r"].max()) if len(fin) else math.nan,
            r_pooled=across["r"],
            ci_low=across["ci_low"],
            ci_high=across["ci_high"],
            q=across["q"],
            q_p=across["q_p"],
            i2=across["i2"],
            verdict=noise_verdict(
                g["r"], g["ci2_low"], g["ci2_high"], g["rel_a"], g["rel_b"], reliability_min, equivalence
            )
            if "ci2_low" in g and g[["ci2_low", "rel_a", "rel_b"]].notna().any().any()  # noise analysed
            else verdict(g["r"], g["p_bh"], alpha, g["ci_low"], g["ci_high"], equivalence),
            n_models_equivalent=int(g["equivalent"].sum()) if "equivalent" in g else 0,
            models=_models_words(g, alpha),
        )
        if "ci2_low" in g:
            row["models_two_level"] = _two_level_words(g)
        out.append(row)
    return pd.DataFrame(out)


def summarise(partials: pd.DataFrame, consistency: pd.DataFrame, methods, alpha: float = ALPHA) -> dict:
    """Small, flat-ish dict for summary.json (a DVC metric) and MLflow metrics."""
    runs = partials.drop_duplicates("run") if len(partials) else partials
    summary = {
        "n_runs": int(runs["run"].nunique()) if len(partials) else 0,
        "n_models": int(partials["model"].nunique()) if len(partials) else 0,
        "n_pairs": int(partials[["testset_a", "testset_b"]].drop_duplicates().shape[0]) if len(partials) else 0,
        "n_checkpoints_median": float(partials["n"].median()) if len(partials) else 0.0,
        "methods": {},
    }
    for m in methods:
        pm = partials[partials["method"] == m] if len(partials) else partials
        cm = consistency[consistency["method"] == m] if len(consistency) else consistency
        counts = {v: int((cm["verdict"] == v).sum()) if len(cm) else 0 for v in VERDICTS}
        multi = cm[cm["n_models_valid"] >= 2] if len(cm) else cm
        summary["methods"][m] = {
            "mean_abs_r": float(np.nanmean(np.abs(pm["r"]))) if len(pm) and np.isfinite(pm["r"]).any() else None,
            "share_significant_bh": float((pm["p_bh"] < alpha).mean()) if len(pm) else None,
            "share_sign_flip": float(multi["sign_flip"].mean()) if len(multi) else None,
            "share_model_dependent": float((multi["verdict"] == "model_dependent").mean()) if len(multi) else None,
            "n_flagged": int((pm["flag"].fillna("") != "").sum()) if len(pm) else 0,
            "verdicts": counts,
        }
    return summary
