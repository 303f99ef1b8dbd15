"""Planning with the interval's own model (gp_interval): expected information, power and the seeds a design needs.

The design is the likelihood's: the same coregionalised Gaussian-process signal over checkpoints and the same
likelihood-ratio cut, so a plan's predicted power is that of the interval a study will be analysed with. On
smooth trajectories information grows with independent seeds far more than with checkpoints: both enter only
through the residual space's covariance, never as independent checkpoints.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import null_space

from oodcorr.analysis.gp_interval import lr_cut, n_eff_of
from oodcorr.analysis.gp_model import KERNEL, _coefs, _kernel_mats, _score_info, _sigma


def design_terms(n: int, noise_a: float, noise_b: float, leak: float = 0.0, t=None) -> dict:
    """One seed's terms for planning: n checkpoints at t (evenly spread), white item noise of variance noise_a,
    noise_b per checkpoint, and `leak` (beta_a beta_b times the ID control's error variance per checkpoint) shared
    by both residuals."""
    t = np.linspace(0.0, 1.0, n) if t is None else np.asarray(t, float)
    x = np.linspace(0.0, 1.0, n) ** 0.5  # any non-constant control: only its residual space matters
    Q = null_space(np.column_stack([np.ones(n), x]).T)
    m = Q.shape[1]
    I = np.eye(m)
    return {"n": n, "m": m, "Q": Q, "d": np.abs(np.subtract.outer(t, t)), "spacing": 1.0 / max(n - 1, 1),
            "z": np.zeros(2 * m), "Na": (noise_a + leak) * I, "Nb": (noise_b + leak) * I, "C": leak * I}


def expected_info(seeds: list[dict], sa2: float, sb2: float, ell: float, rho: float, kernel: str = KERNEL):
    """Expected Fisher information (4, 4) of (log sa2, log sb2, log ell, atanh rho), summed over the seeds'
    designs (design_terms or _seed_terms)."""
    sa, sb, r = np.array([sa2]), np.array([sb2]), np.array([rho])
    info = np.zeros((4, 4))
    for s in seeds:
        K, dK = _kernel_mats(s, np.array([ell]), kernel)
        Si = np.linalg.inv(_sigma(s, sa, sb, r * np.sqrt(sa * sb), K))
        info += _score_info(Si, np.zeros((1, 2 * s["m"])), K, dK, _coefs(sa, sb, r, with_z=True), s["m"])[1][0]
    return info


def _se_z(info) -> float:
    return float(math.sqrt(max(np.linalg.inv(info + 1e-12 * np.eye(4))[3, 3], 0.0)))


def design_power(seeds: list[dict], sa2: float, sb2: float, ell: float, rho: float, alpha: float = 0.05,
                 kernel: str = KERNEL, copies: float = 1.0) -> float:
    """Probability that the interval excludes 0 when the true correlation is rho, for `copies` times the seeds'
    designs: atanh(rho_hat) normal with the expected-information standard error at rho, rejected past the
    likelihood-ratio cut (lr_cut at the design's effective degrees of freedom) on the null standard error."""
    return float(design_curve(seeds, sa2, sb2, ell, rho, alpha, kernel, [copies])["power"][0])


def design_curve(seeds: list[dict], sa2: float, sb2: float, ell: float, rho: float, alpha: float = 0.05,
                 kernel: str = KERNEL, copies=(1.0,)) -> dict:
    """design_power for many `copies` at once (the information is computed once and scales with the copies):
    arrays power, se0 and se1 (standard errors of atanh(rho_hat) at 0 and at rho) and half (the interval's
    half-width on atanh rho at rho = 0: the square root of the likelihood-ratio cut times se0)."""
    from scipy.stats import norm

    c = np.asarray(copies, float)
    i1, i0 = (expected_info(seeds, sa2, sb2, ell, r, kernel) for r in (rho, 0.0))
    se1, se0 = _se_z(i1) / np.sqrt(c), _se_z(i0) / np.sqrt(c)  # the information scales with the copies
    neff = c * sum(n_eff_of(s, ell, kernel) for s in seeds)
    half = np.sqrt(lr_cut(neff - 2 * c * len(seeds) - 1, alpha)) * se0
    z1 = abs(math.atanh(min(abs(rho), 0.999)))
    return {"power": norm.cdf((z1 - half) / se1) + norm.cdf((-z1 - half) / se1), "se0": se0, "se1": se1,
            "half": half}


def seeds_for_power(seeds: list[dict], sa2: float, sb2: float, ell: float, rho: float = 0.5, power: float = 0.8,
                    alpha: float = 0.05, kernel: str = KERNEL, most: int = 256) -> int | None:
    """The fewest seeds like these (their average design) for `power` at |rho|; None past `most`."""
    per = 1.0 / max(len(seeds), 1)
    lo, hi = 1, 1
    while design_power(seeds, sa2, sb2, ell, rho, alpha, kernel, copies=hi * per) < power:
        lo, hi = hi + 1, hi * 2
        if hi > most:
            return None
    while lo < hi:
        mid = (lo + hi) // 2
        if design_power(seeds, sa2, sb2, ell, rho, alpha, kernel, copies=mid * per) >= power:
            hi = mid
        else:
            lo = mid + 1
    return hi
