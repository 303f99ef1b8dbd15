"""The residualisers: each OOD series with ID progress taken out (OLS on ID, OLS on ranks, a penalised spline
chosen by GCV), batched over testsets and bootstrap resamples. oodcorr.stats.methods names them per method."""

from __future__ import annotations

import numpy as np

GAM_MIN_N = 8  # below this a cubic spline with >= 4 basis functions + GCV is not identifiable
GAM_ALPHAS = np.logspace(-6, 4, 41)  # pen weights on an ID axis rescaled to [0, 1]
COLLINEAR = 0.99  # |corr(ID, testset)| above this: flagged (residual is mostly noise)
DEGENERATE = 1 - 1e-9  # above this: r is NaN (residual is numerically zero)


def gam_basis_df(n: int) -> int:
    """Number of B-spline basis functions: ~n/5, between 4 and 10 (penalty does the rest)."""
    return int(min(10, max(4, n // 5)))


def residualise_linear(x: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """OLS residuals of every column of Y (..., n, T) on [1, x] (..., n); batched over leading axes."""
    xc = x - x.mean(axis=-1, keepdims=True)
    Yc = Y - Y.mean(axis=-2, keepdims=True)
    sxx = (xc**2).sum(axis=-1)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        beta = (xc[..., None, :] @ Yc)[..., 0, :] / sxx
    return Yc - xc[..., None] * beta[..., None, :]


def gam_design(x: np.ndarray):
    """[1, B-spline basis] on x rescaled to [0, 1], and the matching penalty matrix (0 for intercept)."""
    from statsmodels.gam.api import BSplines

    span = x.max() - x.min()
    u = (x - x.min()) / (span if span > 0 else 1.0)
    bs = BSplines(u[:, None], df=[gam_basis_df(len(x))], degree=[3])
    basis, pen = bs.basis, bs.penalty_matrices[0]
    p = basis.shape[1]
    Z = np.column_stack([np.ones(len(x)), basis])
    P = np.zeros((p + 1, p + 1))
    P[1:, 1:] = pen
    return Z, P, bs


def gam_fit(x: np.ndarray, Y: np.ndarray, alphas=GAM_ALPHAS):
    """Penalised-spline fits of every column of Y on x; the pen weight per column minimises GCV.

    Solves (Z'Z + 2*alpha*P) b = Z'y, exactly what statsmodels `GLMGam(y, exog=1, smoother=bs,
    alpha=alpha)` fits for a Gaussian family (verified in the tests), but for all columns and all
    alphas at once. Returns (residuals (n, T), edf (T,) incl. intercept, alpha (T,)).
    """
    Z, P, _ = gam_design(x)
    n = len(x)
    ZtZ, ZtY = Z.T @ Z, Z.T @ Y
    best_gcv = np.full(Y.shape[1], np.inf)
    resid = np.full_like(Y, np.nan, dtype=float)
    edf = np.full(Y.shape[1], np.nan)
    chosen = np.full(Y.shape[1], np.nan)
    for a in alphas:
        try:
            A_inv = np.linalg.inv(ZtZ + 2 * a * P)
        except np.linalg.LinAlgError:
            continue
        tr = float(np.einsum("ij,ji->", Z @ A_inv, Z.T))
        R = Y - Z @ (A_inv @ ZtY)
        gcv = n * (R**2).sum(axis=0) / max(n - tr, 1e-9) ** 2
        better = gcv < best_gcv
        best_gcv = np.where(better, gcv, best_gcv)
        resid[:, better] = R[:, better]
        edf[better], chosen[better] = tr, a
    return resid, edf, chosen


RANK_DECIMALS = 12  # values equal to this many decimals tie: sums taken in another order (another machine's
# numerical libraries) differ in the last bits, and would otherwise break a tie one way or the other


def ranks(a: np.ndarray, axis: int = 0) -> np.ndarray:
    """Average ranks along `axis`, near-equal values (to RANK_DECIMALS) tied."""
    from scipy.stats import rankdata

    return rankdata(np.round(np.asarray(a, float), RANK_DECIMALS), axis=axis)


def _corr_cols(R: np.ndarray) -> np.ndarray:
    """Correlation matrix of the columns of R (..., n, T); NaN for zero-variance columns."""
    Rc = R - R.mean(axis=-2, keepdims=True)
    norm = np.sqrt((Rc**2).sum(axis=-2))
    with np.errstate(divide="ignore", invalid="ignore"):
        Rn = Rc / norm[..., None, :]
        C = np.swapaxes(Rn, -1, -2) @ Rn
    return np.clip(C, -1.0, 1.0)


def _raw(x, Y):
    return Y - Y.mean(axis=0), np.zeros(Y.shape[1])


def _linear(x, Y):
    return residualise_linear(x, Y), np.ones(Y.shape[1])


def _rank_linear(x, Y):
    return residualise_linear(ranks(x, 0), ranks(Y, 0)), np.ones(Y.shape[1])


def _gam(x, Y):
    R, edf, _ = gam_fit(x, Y)
    return R, edf - 1


def _boot_linear(xb, Yb):
    return residualise_linear(xb, Yb)


def _boot_rank(xb, Yb):
    return residualise_linear(ranks(xb, axis=1), ranks(Yb, axis=1))
