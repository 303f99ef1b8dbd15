"""The ID control's smoother: its latent trajectory by GP regression, kernel and scale by restricted likelihood."""

from __future__ import annotations

import numpy as np
from scipy.linalg import null_space

from oodcorr.stats.gp_model import KERNELS

# The ID smoother (gp_interval): "shared": the kernel chosen among ID_KERNEL_CHOICE, and its s2 and ell, by the
# restricted likelihood summed over the seeds (smooth_ids); a name in KERNELS or "auto" (chosen per seed): smooth_id
ID_KERNEL = "shared"
ID_KERNEL_CHOICE = ("se", "matern32", "exp")


def smooth_id(x: np.ndarray, Vx: np.ndarray, t: np.ndarray, kernel: str = "auto", fit: dict | None = None):
    """The ID control's latent trajectory: x = trend + GP(s2, ell) + noise (covariance Vx, known), the trend linear
    in t. Returns (posterior mean of the noise-free series, its posterior covariance), s2 and ell by restricted
    maximum likelihood on a small grid of ell (coarse is enough: only the smoother's error is carried on).
    kernel: one of KERNELS, or "auto" (or "shared", one seed): the one of ID_KERNEL_CHOICE with the highest
    restricted likelihood.
    fit: a dict that receives the chosen kernel, ell, s2 and the restricted log-likelihood (for checks)."""
    n = len(x)
    if not np.trace(Vx) > 0:  # an exact control: nothing to smooth, nothing leaks
        return x.astype(float), np.zeros((n, n))
    g = reml_grid(x, Vx, t, ID_KERNEL_CHOICE if kernel in ("auto", "shared") else (kernel,))
    llmax, s2, ell, kernel = g["best"]
    K = s2 * KERNELS[kernel](g["d"], ell)[0]
    if fit is not None:  # the restricted log-likelihood up to the terms that do not depend on s2, ell or the kernel
        fit.update(kernel=kernel, ell=ell, s2=s2, loglik=llmax)
    mean, P = _posterior(K, Vx, g["F"], x)
    return mean, 0.5 * (P + P.T)


def reml_grid(x: np.ndarray, Vx: np.ndarray, t: np.ndarray, kernels, points: bool = False, s2s=None, ells=None):
    """The restricted likelihood of x = trend + GP + noise over a grid of (s2, ell) for each of `kernels`: its best
    point overall ("best": (loglik, s2, ell, kernel)) and per kernel ("per_kernel": {kernel: (loglik, s2, ell)}),
    the whole grid ("table": [(kernel, ell, loglik over s2s)]), the trend design F, distances d, the
    noise-whitened contrasts (L, W, wx) and the s2 grid; points: also every third s2 of every ell ("points":
    [(loglik, s2, ell, kernel)]). s2s, ells: the grids (default: from the series' own noise and spacing)."""
    n = len(x)
    F = np.column_stack([np.ones(n), t])
    W = null_space(F.T)  # REML: contrasts free of the trend
    d = np.abs(np.subtract.outer(t, t))
    WVW = W.T @ Vx @ W
    L = np.linalg.cholesky(WVW + 1e-10 * np.trace(WVW) / len(WVW) * np.eye(len(WVW)))
    wx = np.linalg.solve(L, W.T @ x)  # whitened by the noise: S = L (s2 B + I) L'
    if s2s is None:  # signal variance, from noise-sized up
        s2s = np.geomspace(1e-3, 1e4, 71) * np.trace(WVW) / len(WVW)
    if ells is None:
        ells = np.geomspace(0.5 * float(np.median(np.diff(t))), 2.0, 16)
    grid, table = [], []
    for kern in kernels:
        for ell in ells:
            Li_R = np.linalg.solve(L, W.T @ KERNELS[kern](d, ell)[0] @ W)
            lam, U = np.linalg.eigh(np.linalg.solve(L, Li_R.T))  # L^-1 WRW L^-T
            lam = np.clip(lam, 0, None)
            q = (U.T @ wx) ** 2
            ll = -0.5 * (np.log1p(s2s[:, None] * lam).sum(1) + (q / (1 + s2s[:, None] * lam)).sum(1))
            table.append((kern, float(ell), ll))
            if points:
                grid += [(float(v), float(s2), float(ell), kern) for v, s2 in zip(ll[::3], s2s[::3])]
    return {
        "best": _grid_best(table, s2s),
        "per_kernel": {k: _grid_best([r for r in table if r[0] == k], s2s)[:3] for k in kernels},
        "points": grid,
        "table": table,
        "F": F,
        "W": W,
        "d": d,
        "L": L,
        "wx": wx,
        "s2s": s2s,
    }


def _grid_best(table, s2s) -> tuple:
    """(loglik, s2, ell, kernel) at the maximum of a reml_grid table [(kernel, ell, loglik over s2s)]: the first
    one in grid order where several tie."""
    best = None
    for kern, ell, ll in table:
        i = int(np.argmax(ll))
        if best is None or ll[i] > best[0]:
            best = (float(ll[i]), float(s2s[i]), float(ell), kern)
    return best


def _posterior(K, Vx, F, x):
    """GP posterior mean and covariance of the noise-free series, with a flat prior on the trend coefficients
    (universal kriging; the trend's uncertainty included)."""
    Sy = K + Vx + 1e-12 * np.eye(len(x))
    Si = np.linalg.inv(Sy)
    A = F.T @ Si @ F
    coef = np.linalg.solve(A, F.T @ Si @ x)
    mean = F @ coef + K @ Si @ (x - F @ coef)
    Rm = F.T - F.T @ Si @ K  # (2, n)
    return mean, K - K @ Si @ K + Rm.T @ np.linalg.solve(A, Rm)


def smooth_ids(xs: list, Vxs: list, ts: list, kernels=ID_KERNEL_CHOICE, fit: dict | None = None) -> list:
    """The ID control of several seeds of one model, the smoother's kernel (among `kernels`), s2 and ell shared by
    the seeds and chosen by their restricted likelihood summed: the seeds are draws of one training process, and
    one seed's 20-40 checkpoints cannot tell a rough ID curve from a smooth one where several can (a smooth kernel
    on a rough curve understates the smoother's error, which then biases the partial correlation upwards). The s2
    grid is relative to the seeds' mean item noise, the ell grid as reml_grid's. Returns [(mean, P)] per seed as
    smooth_id; a seed with an exact control (no item noise) keeps its series and leaks nothing. fit: receives the
    chosen kernel, ell, s2 and the summed restricted log-likelihood."""
    out: list = [None] * len(xs)
    live = [i for i, V in enumerate(Vxs) if np.trace(V) > 0]
    for i in set(range(len(xs))) - set(live):
        out[i] = (np.asarray(xs[i], float), np.zeros((len(xs[i]),) * 2))
    if not live:
        return out
    spacing = min(float(np.median(np.diff(ts[i]))) for i in live)
    noise = float(np.mean([np.trace(Vxs[i]) / len(Vxs[i]) for i in live]))
    s2s, ells = np.geomspace(1e-3, 1e4, 71) * noise, np.geomspace(0.5 * spacing, 2.0, 16)
    grids = [
        reml_grid(*(np.asarray(v, float) for v in (xs[i], Vxs[i], ts[i])), kernels, s2s=s2s, ells=ells) for i in live
    ]
    summed = [(kern, ell, sum(g["table"][k][2] for g in grids)) for k, (kern, ell, _) in enumerate(grids[0]["table"])]
    llmax, s2, ell, kern = _grid_best(summed, s2s)
    if fit is not None:
        fit.update(kernel=kern, ell=ell, s2=s2, loglik=llmax)
    for i, g in zip(live, grids):
        mean, P = _posterior(
            s2 * KERNELS[kern](g["d"], ell)[0], np.asarray(Vxs[i], float), g["F"], np.asarray(xs[i], float)
        )
        out[i] = (mean, 0.5 * (P + P.T))
    return out
