"""The item-noise covariance over checkpoints of a testset's series, from its per-item scores (stratified, shrunk)."""

from __future__ import annotations

import numpy as np

SHRINK_GRID = np.array([0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1.0])
SHRINK_FOLDS = 5


def cv_shrinkage(Z: np.ndarray, folds: int = SHRINK_FOLDS, grid: np.ndarray = SHRINK_GRID) -> float:
    """Z (items, dims), centred: the pull delta towards a scaled identity, (1 - delta) S + delta tr(S)/p I, whose
    covariance best predicts held-out items (summed Gaussian log-likelihood over `folds` contiguous folds)."""
    k, p = Z.shape
    if k < 2 * folds or p < 2:
        return 0.0
    total = np.zeros(len(grid))
    for test in np.array_split(np.arange(k), folds):
        train = np.setdiff1d(np.arange(k), test)
        mu = Z[train].mean(0)
        A, T = Z[train] - mu, Z[test] - mu
        S = A.T @ A / (len(A) - 1)
        w, U = np.linalg.eigh(S)
        proj = ((T @ U) ** 2).sum(0)  # every shrunk covariance shares S's eigenvectors
        lam = (1 - grid[:, None]) * np.clip(w, 0.0, None) + grid[:, None] * (np.trace(S) / p)
        with np.errstate(divide="ignore", invalid="ignore"):
            ll = -0.5 * ((proj / lam).sum(1) + len(T) * np.log(lam).sum(1))
        total += np.where((lam > 0).all(1), ll, -np.inf)
    return float(grid[int(np.argmax(total))])


def shrunk_cov(sub: np.ndarray, pull=cv_shrinkage) -> tuple[np.ndarray, float]:
    """(n, k) centred item trajectories -> (their (n, n) covariance with the part orthogonal to the constant
    shrunk towards a scaled identity, the pull used): pull(Z) of the trajectories Z (k, n - 1) in an orthonormal
    basis of that part (default cv_shrinkage); the constant direction, item difficulty, is kept as is."""
    n, k = sub.shape
    S = sub @ sub.T / (k - 1)
    if n < 3:
        return S, 0.0
    B = np.linalg.qr(np.column_stack([np.ones(n), np.eye(n)[:, : n - 1]]))[0][:, 1:]  # orthonormal, _|_ 1
    d = float(pull(sub.T @ B))
    SJ = B.T @ S @ B
    SJ = (1 - d) * SJ + d * np.trace(SJ) / (n - 1) * np.eye(n - 1)
    P = B @ B.T
    return S - P @ S @ P + B @ SJ @ B.T, d


def noise_cov(items: np.ndarray, labels=None, coef: dict | None = None, shrink: bool = False) -> np.ndarray:
    """(..., n, n) sampling covariance over checkpoints of a testset's series as an estimate of the item-population
    value, from its per-item scores `items` (..., n, I): C / I for the plain mean; with `labels` (I,) stratified,
    sum_c coef_c^2 C_c / I_c for a series sum_c coef_c * (mean of class c), coef_c = I_c / I (the plain mean)
    unless `coef` {label: weight} says otherwise (1/2 each: the class-balanced mean). Strata with one item
    contribute nothing (their variance is not estimable). shrink: each stratum's C_c shrunk towards a scaled
    identity, away from the constant, by the pull that best predicts held-out items (cv_shrinkage): a sample
    covariance of many checkpoints from few items spreads its eigenvalues, and where it falls short the
    interval reads noise as signal."""
    items = np.asarray(items)
    items = items if items.dtype in (np.float32, np.float64) else items.astype(float)
    n_items = items.shape[-1]
    if labels is None:
        groups = [(None, np.arange(n_items))]
    else:
        labels = np.asarray(labels)
        groups = [(c, np.flatnonzero(labels == c)) for c in np.unique(labels)]
    V = np.zeros(items.shape[:-1] + (items.shape[-2],))
    for c, idx in groups:
        k = len(idx)
        if k < 2:
            continue
        w = coef[c] if coef is not None else k / n_items
        sub = items[..., idx]
        sub = sub - sub.mean(axis=-1, keepdims=True)
        if shrink:
            flat = sub.reshape((-1,) + sub.shape[-2:]).astype(float)
            C = np.stack([shrunk_cov(x)[0] for x in flat]).reshape(V.shape)
            V += w**2 * C / k
        else:
            V += w**2 * (sub @ np.swapaxes(sub, -1, -2)).astype(float) / (k - 1) / k
    return V


def noise_cov_from_halves(half_a: np.ndarray, half_b: np.ndarray) -> np.ndarray:
    """(n, n) sampling covariance of a full-testset series from split halves (splits, n) each: a metric that is
    not a mean of per-item scores (e.g. AUC) computed on the two halves of many random splits; the difference of
    two halves has 4x the full testset's noise covariance (each half has half the items)."""
    d = np.asarray(half_a, float) - np.asarray(half_b, float)
    return np.einsum("si,sj->ij", d, d) / (4 * d.shape[0])
