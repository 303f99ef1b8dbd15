"""Signal or noise: how much of each partial correlation is testset sampling noise (issue #10).

Every accuracy is a mean over a finite testset, so each checkpoint's residual (after regressing out ID)
carries item sampling noise. This module reads the per-example predictions the evaluate stage stores
(oodcorr.records.predictions reads them) as checkpoints x items score matrices and adds:

  reliability     per run x testset x method x metric: split the items into random halves (many seeded
                  splits), residualise each half's trajectory on the ID series, correlate the two halves,
                  average over splits, Spearman-Brown correct (rel = 2c / (1 + c)). It estimates
                  var(true residual) / var(observed residual); near 0 the residual trajectory is noise.
                  linear/gam use the full-data residual operator (gam: the smoothing weight GCV chose on
                  the whole testset), rank re-ranks each half. Fewer than MIN_ITEMS items: NaN + flag.
  r_disattenuated r / sqrt(rel_a * rel_b), clipped to [-1, 1]; NaN + flag `unreliable:<testset>` where a
                  reliability is below `reliability_min` (default 0.5): too noisy to divide by.
  ci2_low/high    noise-corrected CI for the partial r of the noise-free (infinite-item) scores: interval.py
                  (item-noise covariances from the items, errors-in-variables correction for the ID control's
                  own noise, effective number of checkpoints for autocorrelated trajectories); r_disattenuated
                  is its point estimate. NaN + `unreliable:<testset>` where a split-half reliability is below
                  `reliability_min`, NaN + `ci2_undefined:<why>` where the interval is undefined. Coverage:
                  bench/stats/noise_simulation.py, docs/statistics-reference.md. the earlier ci2
                  (Fisher CI / sqrt(rel_a rel_b): independent checkpoints, exact ID), kept for that comparison,
                  as is the two-level bootstrap (ci2boot; two_level_boot/basic_ci).
  equivalent      ci2 inside +/- analyze.equivalence (two one-sided tests on the same interval).
  distinguishable ci2 excludes 0 (both reliabilities >= reliability_min, else ci2 is NaN).

Metrics (analyze.metric): the table oodcorr.stats.metrics.METRICS. Each metric's testset value comes from its
per-item scores (a mean, a class-balanced mean or an AUC, oodcorr.stats.aggregate), so the same machinery applies;
its reliability residualises its own ID series, with halves stratified by gold label and the metric computed
within each half.
"""

from __future__ import annotations

import math

import numpy as np

from oodcorr.stats.aggregate import stratified_halves
from oodcorr.stats.defaults import ALPHA, RELIABILITY_SPLITS
from oodcorr.stats.partial import METHODS, ranks

NOISE_METHODS = tuple(m for m, spec in METHODS.items() if spec.noise)  # raw: no reliability / two-level CI
MIN_ITEMS = 20
SPLITS = RELIABILITY_SPLITS


# ----------------------------------------------------------------------------- residual operators


def linear_operator(x: np.ndarray) -> np.ndarray:
    """(n, n) residual maker I - H of OLS on [1, x]."""
    n = len(x)
    Z = np.column_stack([np.ones(n), x])
    return np.eye(n) - Z @ np.linalg.pinv(Z)


def gam_operators(x: np.ndarray, Y: np.ndarray) -> list[np.ndarray | None]:
    """Per column of Y: I - H of the penalised spline with the GCV weight chosen on that full column."""
    from oodcorr.stats.partial import GAM_MIN_N, gam_design, gam_fit

    n = len(x)
    if n < GAM_MIN_N or np.std(x) <= 1e-12:
        return [None] * Y.shape[1]
    _, _, alphas = gam_fit(x, Y)
    Z, P, _ = gam_design(x)
    ops = []
    for a in alphas:
        if not np.isfinite(a):
            ops.append(None)
            continue
        ops.append(np.eye(n) - Z @ np.linalg.solve(Z.T @ Z + 2 * a * P, Z.T))
    return ops


def _colcorr(A: np.ndarray, B: np.ndarray, axis: int = 0) -> np.ndarray:
    Ac = A - A.mean(axis=axis, keepdims=True)
    Bc = B - B.mean(axis=axis, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (Ac * Bc).sum(axis) / np.sqrt((Ac**2).sum(axis) * (Bc**2).sum(axis))


# ----------------------------------------------------------------------------- reliability

FLAT = 1e-20  # a residual whose sum of squares is below this share of its half's (at least 1) is zero but rounding


def _flat(resid: np.ndarray, half: np.ndarray) -> np.ndarray:
    """Per split (column): the residual trajectory is numerically zero (the half is constant, or exactly explained
    by the ID control), so a correlation with it would be computed from rounding noise and differ between CPUs."""
    scale = np.maximum((np.asarray(half, float) ** 2).sum(axis=0), 1.0)
    with np.errstate(invalid="ignore"):
        return ~(((resid - resid.mean(axis=0)) ** 2).sum(axis=0) > FLAT * scale)


def spearman_brown(c):
    c = np.asarray(c, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.clip(2 * c / (1 + c), -1.0, 1.0)


def split_masks(n_items: int, n_splits: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Two (n_splits, n_items) averaging weight matrices: random disjoint halves of floor(I/2) items."""
    h = n_items // 2
    order = np.argsort(rng.random((n_splits, n_items)), axis=1)
    rows = np.arange(n_splits)[:, None]
    A = np.zeros((n_splits, n_items))
    B = np.zeros((n_splits, n_items))
    A[rows, order[:, :h]] = 1.0 / h
    B[rows, order[:, h : 2 * h]] = 1.0 / h
    return A, B


def reliability(
    items: np.ndarray,
    x: np.ndarray,
    method: str,
    n_splits: int = SPLITS,
    rng=None,
    operator: np.ndarray | None = None,
    masks=None,
    gold=None,
    aggregate: str = "mean",
) -> tuple[float, str]:
    """Split-half (Spearman-Brown) reliability of the residual trajectory of one testset.

    items: (checkpoints, items) per-item scores; x: the ID series the residual is taken against (the full
    ID testset); operator: the residual maker for linear/gam (computed here for linear when None); masks:
    precomputed halves (shared across metrics/methods of a testset), else drawn from rng; gold/aggregate: see
    reliabilities."""
    return reliabilities(items, x, {method: operator}, n_splits, rng, masks, gold, aggregate)[method]


def reliabilities(
    items: np.ndarray,
    x: np.ndarray,
    operators: dict,
    n_splits: int = SPLITS,
    rng=None,
    masks=None,
    gold=None,
    aggregate: str = "mean",
) -> dict:
    """{method: (reliability, flag)} for several methods from the same split halves (one matmul each).

    gold: (items,) bool gold-entailment labels: halves are then drawn within each gold class (both keep the
    label shares, oodcorr.stats.aggregate.stratified_halves) and `aggregate` (mean | balanced | auc) is computed
    within each half; without gold: random halves and plain means. masks: a precomputed pair of (splits,
    items) halves (bool or weights; non-zero = in the half)."""
    from oodcorr.stats.aggregate import values

    n, n_items = items.shape
    if n_items < MIN_ITEMS:
        return {m: (math.nan, f"too_few_items:{n_items}<{MIN_ITEMS}") for m in operators}
    if n < 4:
        return {m: (math.nan, f"too_few_checkpoints:n={n}<4") for m in operators}
    rng = rng if rng is not None else np.random.default_rng(0)
    if masks is None:
        masks = stratified_halves(gold, n_splits, rng) if gold is not None else split_masks(n_items, n_splits, rng)
    A, B = (np.asarray(m) > 0 for m in masks)
    g = np.ones(n_items, bool) if gold is None else np.asarray(gold, bool)
    ya, yb = values(aggregate, items, g, A), values(aggregate, items, g, B)  # (n, splits)
    if not (np.isfinite(ya).any() and np.isfinite(yb).any()):
        return {m: (math.nan, "one_class_halves") for m in operators}
    out = {}
    for method, operator in operators.items():
        kind = METHODS[method].operator
        if kind == "smooth" and operator is None:
            out[method] = (math.nan, f"{method}_undefined")
            continue
        if kind == "ranked_ols":
            op = linear_operator(ranks(x))
            ha, hb = ranks(ya, 0), ranks(yb, 0)
        else:
            op = operator if operator is not None else linear_operator(x)
            ha, hb = ya, yb
        ra, rb = op @ ha, op @ hb
        c = _colcorr(ra, rb, axis=0)
        c[_flat(ra, ha) | _flat(rb, hb)] = np.nan  # no residual: its correlation would be the last bits' noise
        out[method] = (
            (math.nan, "constant_halves") if not np.isfinite(c).any() else (float(spearman_brown(np.nanmean(c))), "")
        )
    return out


# ----------------------------------------------------------------------------- two-level bootstrap (comparison)
# The analysis reports this interval as ci2boot (linear, rank) beside ci2 but decides nothing on it: the basic
# interval below targets rho only to first order and under-covers under strong attenuation
# (bench/stats/noise_simulation.py measures both).


def item_weights(n_items: int, n_boot: int, rng) -> np.ndarray:
    """(n_boot, n_items) multinomial resampling weights (counts / n_items): a row averages a resample."""
    idx = rng.integers(0, n_items, size=(n_boot, n_items), dtype=np.int64)
    idx += n_items * np.arange(n_boot, dtype=np.int64)[:, None]
    counts = np.bincount(idx.ravel(), minlength=n_boot * n_items)
    return counts.reshape(n_boot, n_items) / n_items


def two_level_resamples(x_items: np.ndarray, Y_items: list, n_boot: int, rng):
    """(checkpoint indices (B, n), ID trajectories (B, n), [OOD trajectories (B, n)]) of B two-level
    resamples; drawn in this order: checkpoints, OOD item weights (testset order), ID item weights."""
    n = x_items.shape[0]
    ck = rng.integers(0, n, size=(n_boot, n))
    trajs = [item_weights(m.shape[1], n_boot, rng) @ m.T for m in Y_items]  # each (B, n)
    xtraj = item_weights(x_items.shape[1], n_boot, rng) @ x_items.T
    return ck, xtraj, trajs


def two_level_boot(
    x_items: np.ndarray, Y_items: list, method: str, n_boot: int, rng, gam_ops: list | None = None, resamples=None
) -> np.ndarray:
    """(n_boot, T, T) correlation matrices of residual trajectories, items and checkpoints resampled.

    x_items: (n, I0) ID item scores; Y_items: T arrays (n, I_j). Vectorised: one matmul per testset
    (weights (B, I) @ items.T (I, n)), one gather for the checkpoints, batched residualisation."""
    from oodcorr.stats.partial import _corr_cols, residualise_linear

    ck, xtraj, trajs = resamples if resamples is not None else two_level_resamples(x_items, Y_items, n_boot, rng)
    kind = METHODS[method].operator
    if kind == "smooth":
        R = np.stack(
            [t @ op.T if op is not None else np.full_like(t, np.nan) for t, op in zip(trajs, gam_ops)], axis=-1
        )  # (B, n, T)
        return _corr_cols(np.take_along_axis(R, ck[:, :, None], axis=1))
    xb = np.take_along_axis(xtraj, ck, axis=1)
    Yb = np.take_along_axis(np.stack(trajs, axis=-1), ck[:, :, None], axis=1)
    if kind == "ranked_ols":
        xb, Yb = ranks(xb, 1), ranks(Yb, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return _corr_cols(residualise_linear(xb, Yb))


def basic_ci(r, boot, alpha: float = ALPHA, n: int | None = None, k: float = 1.0, min_ok: int = 10):
    """Basic (bias-corrected) bootstrap interval on the Fisher-z scale.

    [tanh(2z - m - c (q_hi - m)), tanh(2z - m - c (q_lo - m))] with m the bootstrap median and q the
    alpha/2 quantiles of z*: reflected around z, so the extra attenuation of the replicates is added back
    once. c = sqrt(n / (n - 3 - k)) stretches the spread by the small-sample factor by which the bootstrap
    underestimates the variance of Fisher's z (1/n instead of 1/(n - 3 - k)); c = 1 without n."""
    boot = np.asarray(boot, float)
    ok = np.isfinite(boot)
    if not np.isfinite(r) or ok.sum() < min_ok:
        return math.nan, math.nan
    c = math.sqrt(n / (n - 3 - k)) if n is not None and n - 3 - k > 0 else 1.0
    z = math.atanh(float(np.clip(r, -1 + 1e-12, 1 - 1e-12)))
    zb = np.arctanh(np.clip(boot[ok], -1 + 1e-12, 1 - 1e-12))
    q_lo, m, q_hi = np.percentile(zb, [100 * alpha / 2, 50, 100 * (1 - alpha / 2)])
    return math.tanh(2 * z - m - c * (q_hi - m)), math.tanh(2 * z - m - c * (q_lo - m))


def item_noise(mats: dict, gold: dict, kind: str, rng, splits: int) -> tuple[dict, dict]:
    """({testset: series (n,)}, {testset: item-noise covariance (n, n)}) of one run's analysed metric:
    item_cov.noise_cov stratified by gold label for the plain and the class-balanced mean (coefficients I_c/I and
    1/2 per class), each class's covariance shrunk by the pull that best predicts held-out items; split halves
    within each gold class for AUC (item_cov.noise_cov_from_halves)."""
    import numpy as np

    from oodcorr.stats.aggregate import stratified_halves, values
    from oodcorr.stats.item_cov import noise_cov, noise_cov_from_halves

    series, V = {}, {}
    for name, m in mats.items():
        g = np.asarray(gold[name], bool)
        series[name] = values(kind, m, g)
        if kind == "auc":
            A, B = stratified_halves(g, splits, rng)
            V[name] = noise_cov_from_halves(*(values(kind, m, g, h).T for h in (A, B)))
        else:
            V[name] = noise_cov(m, g, {True: 0.5, False: 0.5} if kind == "balanced" else None, shrink=True)
    return series, V
