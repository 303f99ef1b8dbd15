"""Partial correlations between OOD testsets across checkpoints, controlling for ID accuracy.

Why a hand-rolled, vectorised core instead of calling `pingouin.partial_corr` per pair: a run with T
OOD testsets has T(T-1)/2 pairs, but every pair shares the same control (ID accuracy), so each testset
only needs to be residualised ONCE; the partial r of every pair is then one correlation matrix of the
residuals. This is the same estimator pingouin uses (Pearson r of OLS residuals; Spearman = the same on
ranks), it is checked against pingouin and against statsmodels OLS in the tests, and it lets the
bootstrap run as batched array algebra (thousands of resamples in milliseconds).

Methods (all return r, n, k, df = n - 2 - k, p from t = r*sqrt(df/(1-r^2)), Fisher-z CI with
se = 1/sqrt(n - 3 - k)):
  raw     unpartialled Pearson r (k = 0): shows how much shared ID progress drives the correlation.
  linear  Pearson partial r, control = ID accuracy (k = 1).
  rank    Spearman partial r: ranks of everything, then `linear` (k = 1). A robustness check, not the
          primary method: when ID saturates (dense ranks near the top) rank-linear residualisation
          leaves shared non-linearity, and in simulations with rho = 0 it rejected ~19% at alpha = .05.
  gam     A ~ s(ID), B ~ s(ID) with a penalised cubic B-spline (statsmodels BSplines/GLMGam penalty),
          smoothing weight chosen per testset by GCV on a fixed log grid; r = Pearson r of the two
          residual series; k = max(edf_A, edf_B) - 1, the effective df of the larger smooth (without
          the intercept), so df shrinks as the smooth gets wigglier. Needs n >= GAM_MIN_N.

Degenerate series give NaN r with a flag, never a number: constant:X (zero variance), one_change:X (X
differs from its most common value at a single checkpoint, e.g. a model that answers one class on X at all
checkpoints but one: any r with X is decided by that one point; as accuracies lie on a k/N grid, the other
series' deviation at that point is often exactly 0, which printed as r = 0.000, p = 1.000 on real data),
residual_constant:X (nothing left after removing ID), too_few_checkpoints.
"""

from __future__ import annotations

import math

import numpy as np

from oodcorr.stats.defaults import ALPHA
from oodcorr.stats.methods import METHODS, REFERENCES, Method, drawn_smooth, primary  # noqa: F401
from oodcorr.stats.residualise import (  # noqa: F401
    COLLINEAR,
    DEGENERATE,
    GAM_ALPHAS,
    GAM_MIN_N,
    RANK_TIE,
    _corr_cols,
    gam_basis_df,
    gam_design,
    gam_fit,
    ranks,
    residualise_linear,
)


def _t_p(r, df):
    from scipy import stats

    r = np.asarray(r, float)
    df = np.asarray(df, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = r * np.sqrt(df / np.clip(1 - r**2, 1e-300, None))
        p = 2 * stats.t.sf(np.abs(t), df)
    return np.where((df > 0) & np.isfinite(r), p, np.nan)


def fisher_ci(r, n, k, alpha: float = ALPHA):
    """Fisher-z confidence interval, se = 1/sqrt(n - 3 - k); NaN where n - 3 - k <= 0."""
    from scipy import stats

    r = np.clip(np.asarray(r, float), -1 + 1e-15, 1 - 1e-15)
    dof = np.asarray(n, float) - 3 - np.asarray(k, float)
    zc = stats.norm.ppf(1 - alpha / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        se = 1 / np.sqrt(dof)
        z = np.arctanh(r)
        lo, hi = np.tanh(z - zc * se), np.tanh(z + zc * se)
    ok = dof > 0
    return np.where(ok, lo, np.nan), np.where(ok, hi, np.nan)


def _bootstrap(method, x, Y, R, n_boot, rng):
    """(n_boot, T, T) bootstrap correlation matrices over checkpoints (rows resampled with replacement).

    raw/linear/rank re-residualise every resample (rank re-ranks it first), batched. gam bootstraps the
    correlation of the already fitted residual pairs (refitting GCV smooths 1000x would dominate the
    runtime; this ignores the smooth's own sampling variability, so its CI is somewhat narrow).
    """
    idx = rng.integers(0, len(x), size=(n_boot, len(x)))
    boot = METHODS[method].boot
    if boot is None:
        return _corr_cols(R[idx])
    with np.errstate(invalid="ignore", divide="ignore"):
        return _corr_cols(boot(x[idx], Y[idx]))


def _column_flags(x, Y, names, controls, R):
    """Per-testset reasons a pair involving it is suspect (flag) or undefined (NaN)."""
    flags = [[] for _ in names]
    bad = np.zeros(len(names), bool)
    sx = x.std()
    for j, name in enumerate(names):
        y = Y[:, j]
        if y.std() <= 1e-12:
            flags[j].append(f"constant:{name}")
            bad[j] = True
            continue
        _, counts = np.unique(np.round(y, 12), return_counts=True)
        if len(y) - counts.max() <= 1:
            # the series leaves its usual value at one checkpoint only (a model that predicts one class on a
            # testset at every checkpoint but one): every r with it is that one point's deviation, and with
            # accuracies on a k/N grid it is often exactly 0 (p = 1); see "Degenerate series" in the module notes
            flags[j].append(f"one_change:{name}")
            bad[j] = True
            continue
        if sx > 1e-12:
            c = abs(np.corrcoef(x, y)[0, 1])
            if controls and c > COLLINEAR:
                flags[j].append(f"collinear_with_id:{name}")
                bad[j] |= c > DEGENERATE
        if R is not None and R[:, j].std() <= 1e-10 * max(y.std(), 1e-12):
            flags[j].append(f"residual_constant:{name}")
            bad[j] = True
    return flags, bad


def _boot_ci(boot, a: int, b: int, r: float, alpha: float) -> tuple[float, float]:
    """The percentile interval of pair (a, b) over the bootstrap resamples (NaN with fewer than 10 or no r)."""
    col = boot[:, a, b] if boot is not None else np.empty(0)
    ok = np.isfinite(col)
    if np.isfinite(r) and ok.sum() >= 10:
        lo, hi = (float(v) for v in np.percentile(col[ok], [100 * alpha / 2, 100 * (1 - alpha / 2)]))
        return lo, hi
    return math.nan, math.nan


def analyse_matrix(x, Y, names, method, alpha=ALPHA, n_boot=0, rng=None) -> list[dict]:
    """All pairs of the columns of Y (checkpoints x testsets, no NaN), control x = ID accuracy."""
    x, Y = np.asarray(x, float), np.asarray(Y, float)
    n, T = Y.shape
    rng = rng if rng is not None else np.random.default_rng(0)
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}")
    spec = METHODS[method]
    k_col = np.ones(T) if spec.controls else np.zeros(T)
    flag_all, R = [], None
    need = max(spec.min_n, 4 if spec.controls else 3)  # df = n - 2 - k > 0 (k = 1 with ID as the control)
    if n < need:  # first: with so few points every series looks constant or moved once
        flag_all.append(f"too_few_checkpoints:n={n}<{need}")
    elif spec.controls and x.std() <= 1e-12:
        flag_all.append("constant:id")
    else:
        R, k_col = spec.residualise(x, Y)
    col_flags, bad = (
        _column_flags(x, Y, names, spec.controls, R) if n >= need else ([[] for _ in names], np.zeros(T, bool))
    )
    C = _corr_cols(R) if R is not None else np.full((T, T), np.nan)
    boot = _bootstrap(method, x, Y, R, n_boot, rng) if (n_boot and R is not None and n >= 3) else None
    rows = []
    for a in range(T):
        for b in range(a + 1, T):
            k = float(max(k_col[a], k_col[b]))
            df = n - 2 - k
            flags = flag_all + col_flags[a] + col_flags[b]
            r = C[a, b]
            if df <= 0 and not flag_all:
                flags.append(f"too_few_checkpoints:n={n}<=k+2")
            if flag_all or bad[a] or bad[b] or df <= 0 or not np.isfinite(r):
                r = math.nan
            row = {
                "testset_a": names[a],
                "testset_b": names[b],
                "r": float(r),
                "n": int(n),
                "k": round(k, 4),
                "df": round(df, 4),
                "flag": ";".join(flags),
            }
            if n_boot:  # the same columns on every path: NaN where no resample could be drawn
                row["boot_ci_low"], row["boot_ci_high"] = _boot_ci(boot, a, b, r, alpha)
            rows.append(row)
    if rows:
        r = np.array([row["r"] for row in rows])
        nn = np.array([row["n"] for row in rows])
        kk = np.array([row["k"] for row in rows])
        p = _t_p(r, nn - 2 - kk)
        lo, hi = fisher_ci(r, nn, kk, alpha)
        for row, pi, l, h in zip(rows, p, lo, hi):
            row["p"], row["ci_low"], row["ci_high"] = float(pi), float(l), float(h)
    return rows


def analyse_run(x, Y, names, method, alpha=ALPHA, n_boot=0, rng=None) -> list[dict]:
    """Like analyse_matrix but tolerates missing cells: pairs then use their complete checkpoints."""
    x, Y = np.asarray(x, float), np.asarray(Y, float)
    if not np.isnan(Y).any():
        return analyse_matrix(x, Y, names, method, alpha, n_boot, rng)
    rows = []
    for a in range(len(names)):
        for b in range(a + 1, len(names)):
            keep = ~np.isnan(Y[:, a]) & ~np.isnan(Y[:, b])
            sub = analyse_matrix(x[keep], Y[keep][:, [a, b]], [names[a], names[b]], method, alpha, n_boot, rng)
            if keep.sum() < len(x):
                sub[0]["flag"] = ";".join(filter(None, [sub[0]["flag"], f"missing_checkpoints:{len(x) - keep.sum()}"]))
            rows += sub
    return rows


def adjust_pvalues(p) -> tuple[np.ndarray, np.ndarray]:
    """Holm and Benjamini-Hochberg adjusted p over the finite entries (NaN stays NaN).

    Same numbers as statsmodels `multipletests(method="holm" / "fdr_bh")` (checked in the tests), but
    that function runs gc.collect() on every call (~80 ms), which dominated a study-sized analysis."""
    p = np.asarray(p, float)
    holm, bh = np.full_like(p, np.nan), np.full_like(p, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = len(ok)
    if m:
        q = p[ok]
        up = np.argsort(q, kind="mergesort")
        h = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * q[up]))
        holm[ok[up]] = h
        down = up[::-1]
        b = np.minimum(1.0, np.minimum.accumulate(q[down] * m / np.arange(m, 0, -1)))
        bh[ok[down]] = b
    return holm, bh


def pingouin_partial(data, x: str, y: str, covar: str | None, method: str = "pearson") -> dict:
    """pingouin.partial_corr (or .corr without covar) as {n, r, p, ci_low, ci_high}; handles both the
    pre-0.7 (`p-val`, `CI95%`) and 0.7+ (`p_val`, `CI95`) column names. Used as the reference in tests."""
    import pingouin as pg

    out = (
        pg.partial_corr(data=data, x=x, y=y, covar=covar, method=method)
        if covar
        else pg.corr(data[x], data[y], method=method)
    )
    row = out.iloc[0]
    pcol = next(c for c in ("p_val", "p-val", "p-unc") if c in out.columns)
    cicol = next(c for c in ("CI95", "CI95%", "ci95") if c in out.columns)
    ci = row[cicol]
    return {
        "n": int(row["n"]),
        "r": float(row["r"]),
        "p": float(row[pcol]),
        "ci_low": float(ci[0]),
        "ci_high": float(ci[1]),
    }
