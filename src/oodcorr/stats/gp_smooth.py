"""The ID control's smoother: its latent trajectory by GP regression, kernel and scale by restricted likelihood."""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import null_space

from oodcorr.stats.gp_model import KERNELS

ID_KERNEL = "se"  # the ID smoother's kernel (smooth_id); "auto": chosen by restricted likelihood among
ID_KERNEL_CHOICE = ("se", "matern32", "exp")
BMA = "bma"  # the posterior averaged over ID_KERNEL_CHOICE and the (s2, ell) grid, weights by restricted likelihood
BMA_DROP, BMA_POINTS = 7.0, 120  # grid points within BMA_DROP log-likelihood units of the best, at most BMA_POINTS
ROUGH_TEST, ROUGH_LR = "rough_test", 2.71  # exp where se+exp beats se by this likelihood ratio (5 %, one-sided)
SUM_KERNEL = "se+exp"  # a smooth curve plus a rough wiggle, both by restricted likelihood (_fit_sum)


def smooth_id(x: np.ndarray, Vx: np.ndarray, t: np.ndarray, kernel: str = ID_KERNEL, fit: dict | None = None):
    """The ID control's latent trajectory: x = trend + GP(s2, ell) + noise (covariance Vx, known), the trend linear
    in t. Returns (posterior mean of the noise-free series, its posterior covariance), s2 and ell by restricted
    maximum likelihood on a small grid of ell (coarse is enough: only the smoother's error is carried on).
    kernel: one of KERNELS, or "auto": the one of ID_KERNEL_CHOICE with the highest restricted likelihood.
    fit: a dict that receives the chosen kernel, ell, s2 and the restricted log-likelihood (for checks)."""
    n = len(x)
    if not np.trace(Vx) > 0:  # an exact control: nothing to smooth, nothing leaks
        return x.astype(float), np.zeros((n, n))
    F = np.column_stack([np.ones(n), t])
    W = null_space(F.T)  # REML: contrasts free of the trend
    d = np.abs(np.subtract.outer(t, t))
    WVW = W.T @ Vx @ W
    L = np.linalg.cholesky(WVW + 1e-10 * np.trace(WVW) / len(WVW) * np.eye(len(WVW)))
    wx = np.linalg.solve(L, W.T @ x)  # whitened by the noise: S = L (s2 B + I) L'
    s2s = np.geomspace(1e-3, 1e4, 71) * np.trace(WVW) / len(WVW)  # signal variance, from noise-sized up
    best = None
    single = (
        ("se", "exp")
        if kernel in (SUM_KERNEL, ROUGH_TEST)
        else ID_KERNEL_CHOICE
        if kernel in ("auto", BMA)
        else (kernel,)
    )
    per_kernel, points = {}, []
    for kern in single:
        for ell in np.geomspace(0.5 * float(np.median(np.diff(t))), 2.0, 16):
            Li_R = np.linalg.solve(L, W.T @ KERNELS[kern](d, ell)[0] @ W)
            lam, U = np.linalg.eigh(np.linalg.solve(L, Li_R.T))  # L^-1 WRW L^-T
            lam = np.clip(lam, 0, None)
            q = (U.T @ wx) ** 2
            ll = -0.5 * (np.log1p(s2s[:, None] * lam).sum(1) + (q / (1 + s2s[:, None] * lam)).sum(1))
            i = int(np.argmax(ll))
            if kernel == BMA:
                points += [(float(v), float(s2), float(ell), kern) for v, s2 in zip(ll[::3], s2s[::3])]
            if kern not in per_kernel or ll[i] > per_kernel[kern][0]:
                per_kernel[kern] = (float(ll[i]), float(s2s[i]), float(ell))
            if best is None or ll[i] > best[0]:
                best = (float(ll[i]), float(s2s[i]), float(ell), kern)
    if kernel == BMA:  # average over kernels and hyper-parameters, weighted by restricted likelihood
        top = max(p[0] for p in points)
        kept = sorted((p for p in points if p[0] > top - BMA_DROP), reverse=True)[:BMA_POINTS]
        w = np.exp(np.array([p[0] for p in kept]) - top)
        w /= w.sum()
        post = [_posterior(v * KERNELS[k](d, e)[0], Vx, F, x) for _, v, e, k in kept]
        mean = sum(wi * m for wi, (m, _) in zip(w, post))
        P = sum(wi * (Pk + np.outer(m - mean, m - mean)) for wi, (m, Pk) in zip(w, post))
        if fit is not None:
            fit.update(kernel=BMA, points=len(kept), loglik=top)
        return mean, 0.5 * (P + P.T)
    if kernel == ROUGH_TEST:  # exp where a rough component is evident (likelihood ratio of se+exp over se), else se
        ll_sum, _ = _fit_sum(L, W, wx, d, t, per_kernel, s2s)
        kernel = "exp" if 2 * (ll_sum - per_kernel["se"][0]) > ROUGH_LR else "se"
        best = (*per_kernel[kernel], kernel)
    if kernel == SUM_KERNEL:
        llmax, parts = _fit_sum(L, W, wx, d, t, per_kernel, s2s)
        kernel, ell, s2 = SUM_KERNEL, parts, None
        K = sum(v * KERNELS[k](d, e)[0] for k, (v, e) in parts.items())
    else:
        llmax, s2, ell, kernel = best
        K = s2 * KERNELS[kernel](d, ell)[0]
    if fit is not None:  # the restricted log-likelihood up to the terms that do not depend on s2, ell or the kernel
        fit.update(kernel=kernel, ell=ell, s2=s2, loglik=llmax)
    mean, P = _posterior(K, Vx, F, x)
    return mean, 0.5 * (P + P.T)


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


def _fit_sum(L, W, wx, d, t, per_kernel: dict, s2s) -> tuple[float, dict]:
    """Restricted likelihood of the sum kernel s_se SE(l_se) + s_exp exp(l_exp) (smooth curve plus rough
    wiggle), maximised over the four log parameters by L-BFGS-B from the two single-kernel fits."""
    from scipy.optimize import minimize

    lo_l = math.log(0.5 * float(np.median(np.diff(t))))
    bounds = [(math.log(s2s[0]), math.log(s2s[-1])), (lo_l, math.log(2.0))] * 2

    def nll(p):
        R = math.exp(p[0]) * KERNELS["se"](d, math.exp(p[1]))[0] + math.exp(p[2]) * KERNELS["exp"](d, math.exp(p[3]))[0]
        B = np.linalg.solve(L, np.linalg.solve(L, W.T @ R @ W).T)  # L^-1 W'RW L^-T
        lam, U = np.linalg.eigh(0.5 * (B + B.T))
        lam = np.clip(lam, 0, None)
        return 0.5 * (np.log1p(lam).sum() + ((U.T @ wx) ** 2 / (1 + lam)).sum())

    (_, v_se, l_se), (_, v_ex, l_ex) = per_kernel["se"][0:3], per_kernel["exp"][0:3]
    starts = [
        [math.log(v_se), math.log(l_se), math.log(v_se * 1e-2), math.log(l_ex)],
        [math.log(v_ex * 1e-2), math.log(l_se), math.log(v_ex), math.log(l_ex)],
        [math.log(v_se / 2), math.log(l_se), math.log(v_ex / 2), math.log(l_ex)],
    ]
    fits = [
        minimize(nll, np.clip(s0, [b[0] for b in bounds], [b[1] for b in bounds]), method="L-BFGS-B", bounds=bounds)
        for s0 in starts
    ]
    p = min(fits, key=lambda f: f.fun).x
    return float(-nll(p)), {"se": (math.exp(p[0]), math.exp(p[1])), "exp": (math.exp(p[2]), math.exp(p[3]))}
