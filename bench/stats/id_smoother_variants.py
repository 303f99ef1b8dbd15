"""ID smoothers measured against the package's (oodcorr.stats.gp_smooth) and not adopted, kept for
bench/stats/id_smoother.py and the tests that compare against them (docs/statistics-reference.md has the numbers):

  se+exp      a smooth plus a rough component, all four parameters by restricted likelihood (_fit_sum)
  bma         the posterior averaged over the package's kernels and its (s2, ell) grid, weights by restricted
              likelihood (carries the uncertainty of the smoother's own fit)
  rough_test  exp where se+exp beats se by a likelihood ratio above ROUGH_LR (5 %, one-sided), else se

smooth_id(x, Vx, t, kernel) takes these names and the package's; `with_smoother(kernel)` puts one in place of the
package's smoother inside gp_interval for a block of code.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from oodcorr.stats import gp_interval as GI
from oodcorr.stats import gp_smooth as GS
from oodcorr.stats.gp_model import KERNELS

BMA = "bma"
BMA_DROP, BMA_POINTS = 7.0, 120  # grid points within BMA_DROP log-likelihood units of the best, at most BMA_POINTS
ROUGH_TEST, ROUGH_LR = "rough_test", 2.71
SUM_KERNEL = "se+exp"
VARIANTS = (SUM_KERNEL, BMA, ROUGH_TEST)


def smooth_id(x: np.ndarray, Vx: np.ndarray, t: np.ndarray, kernel: str = GS.ID_KERNEL, fit: dict | None = None):
    """gp_smooth.smooth_id, with the variants above besides the package's kernels."""
    if kernel not in VARIANTS or not np.trace(Vx) > 0:
        return GS.smooth_id(x, Vx, t, kernel, fit)
    if kernel == BMA:  # average over kernels and hyper-parameters, weighted by restricted likelihood
        g = GS.reml_grid(x, Vx, t, GS.ID_KERNEL_CHOICE, points=True)
        top = max(p[0] for p in g["points"])
        kept = sorted((p for p in g["points"] if p[0] > top - BMA_DROP), reverse=True)[:BMA_POINTS]
        w = np.exp(np.array([p[0] for p in kept]) - top)
        w /= w.sum()
        post = [GS._posterior(v * KERNELS[k](g["d"], e)[0], Vx, g["F"], x) for _, v, e, k in kept]
        mean = sum(wi * m for wi, (m, _) in zip(w, post))
        P = sum(wi * (Pk + np.outer(m - mean, m - mean)) for wi, (m, Pk) in zip(w, post))
        if fit is not None:
            fit.update(kernel=BMA, points=len(kept), loglik=top)
        return mean, 0.5 * (P + P.T)
    g = GS.reml_grid(x, Vx, t, ("se", "exp"))
    per_kernel = g["per_kernel"]
    if kernel == ROUGH_TEST:  # exp where a rough component is evident (likelihood ratio of se+exp over se), else se
        ll_sum, _ = _fit_sum(g["L"], g["W"], g["wx"], g["d"], t, per_kernel, g["s2s"])
        chosen = "exp" if 2 * (ll_sum - per_kernel["se"][0]) > ROUGH_LR else "se"
        llmax, s2, ell = per_kernel[chosen]
        K = s2 * KERNELS[chosen](g["d"], ell)[0]
        kernel = chosen
    else:
        llmax, parts = _fit_sum(g["L"], g["W"], g["wx"], g["d"], t, per_kernel, g["s2s"])
        ell, s2 = parts, None
        K = sum(v * KERNELS[k](g["d"], e)[0] for k, (v, e) in parts.items())
    if fit is not None:
        fit.update(kernel=kernel, ell=ell, s2=s2, loglik=llmax)
    mean, P = GS._posterior(K, Vx, g["F"], x)
    return mean, 0.5 * (P + P.T)


@contextlib.contextmanager
def with_smoother(kernel: str):
    """gp_interval smooths ID with `kernel` (one of VARIANTS) inside the block."""
    real = GI.smooth_id
    GI.smooth_id = lambda x, Vx, t, _kernel=None: smooth_id(x, Vx, t, kernel)
    try:
        yield
    finally:
        GI.smooth_id = real


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
