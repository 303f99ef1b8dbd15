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

from oodcorr.stats.gp_interval import lr_cut, n_eff_of
from oodcorr.stats.gp_model import KERNEL, _coefs, _kernel_mats, _score_info, _sigma


def design_terms(n: int, noise_a: float, noise_b: float, leak: float = 0.0, t=None) -> dict:
    """One seed's terms for planning: n checkpoints at t (evenly spread), white item noise of variance noise_a,
    noise_b per checkpoint, and `leak` (beta_a beta_b times the ID control's error variance per checkpoint) shared
    by both residuals."""
    t = np.linspace(0.0, 1.0, n) if t is None else np.asarray(t, float)
    x = np.linspace(0.0, 1.0, n) ** 0.5  # any non-constant control: only its residual space matters
    Q = null_space(np.column_stack([np.ones(n), x]).T)
    m = Q.shape[1]
    I = np.eye(m)
    return {
        "n": n,
        "m": m,
        "Q": Q,
        "d": np.abs(np.subtract.outer(t, t)),
        "spacing": 1.0 / max(n - 1, 1),
        "z": np.zeros(2 * m),
        "Na": (noise_a + leak) * I,
        "Nb": (noise_b + leak) * I,
        "C": leak * I,
    }


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


def lr_noncentrality(seeds: list[dict], sa2: float, sb2: float, ell: float, rho: float, kernel: str = KERNEL) -> float:
    """The expected likelihood-ratio statistic against rho = 0 for the seeds' designs: twice the Kullback-Leibler
    divergence from the model at rho to the nearest model at rho = 0 (sa2, sb2 and ell re-fitted, as the profile
    likelihood re-fits them), summed over the seeds ("exemplary data": the statistic on data equal to their
    expectation). Identical copies of a design share the nearest model, so the value scales with the copies."""
    from scipy.optimize import minimize

    if rho == 0:
        return 0.0
    S1 = [
        _sigma(
            s,
            np.array([sa2]),
            np.array([sb2]),
            np.array([rho * math.sqrt(sa2 * sb2)]),
            _kernel_mats(s, np.array([ell]), kernel)[0],
        )[0]
        for s in seeds
    ]

    def kl(theta):  # KL(model at rho || model at 0 with theta) and its gradient in theta (log sa2, log sb2, log ell)
        a2, b2, e = np.exp(theta)
        tot, grad = 0.0, np.zeros(3)
        for s, S in zip(seeds, S1):
            K, dK = (x[0] for x in _kernel_mats(s, np.array([e]), kernel))
            S0 = _sigma(s, np.array([a2]), np.array([b2]), np.zeros(1), K[None])[0]
            Si = np.linalg.inv(S0)
            A = Si @ S
            tot += 0.5 * (np.trace(A) - len(A) - np.linalg.slogdet(A)[1])
            W = Si - A @ Si  # d KL = 1/2 tr(W dS0); dS0 is block-diagonal in the two testsets
            m = s["m"]
            Wa, Wb = W[:m, :m], W[m:, m:]
            grad += 0.5 * np.array(
                [a2 * np.sum(Wa * K), b2 * np.sum(Wb * K), a2 * np.sum(Wa * dK) + b2 * np.sum(Wb * dK)]
            )
        return tot, grad

    fit = minimize(kl, np.log([sa2, sb2, ell]), jac=True, method="L-BFGS-B")
    return float(max(2.0 * fit.fun, 0.0))


def design_power(
    seeds: list[dict],
    sa2: float,
    sb2: float,
    ell: float,
    rho: float,
    alpha: float = 0.05,
    kernel: str = KERNEL,
    copies: float = 1.0,
) -> float:
    """Probability that the interval excludes 0 when the true correlation is rho, for `copies` times the seeds'
    designs (design_curve)."""
    return float(design_curve(seeds, sa2, sb2, ell, rho, alpha, kernel, [copies])["power"][0])


def design_curve(
    seeds: list[dict],
    sa2: float,
    sb2: float,
    ell: float,
    rho: float,
    alpha: float = 0.05,
    kernel: str = KERNEL,
    copies=(1.0,),
    floor: float | None = None,
) -> dict:
    """design_power for many `copies` at once. The interval excludes 0 when the likelihood-ratio statistic against
    0 passes lr_cut(df), the exact t-test's cut at the design's effective degrees of freedom df (as gp_interval);
    the power is the chance that the statistic, noncentral chi-square on 1 df with noncentrality the expected
    statistic (lr_noncentrality, which scales with the copies), passes that cut. (A noncentral t on df, the
    t-test's own power, ran 0.05-0.11 high on one seed of smooth curves, where df is about 1 and the statistic's
    tail is not the t's: bench/planner/plan_vs_grid.py.) Also arrays se0 and se1 (expected-information
    standard errors of atanh(rho_hat) at 0 and at rho) and half (the interval's half-width on atanh rho at rho = 0:
    the square root of the likelihood-ratio cut times se0), for the consistent null. With `floor`, also gate:
    the chance that both fitted reliabilities reach it (gate_pass), so that the interval gives a verdict."""
    from scipy.stats import ncx2

    c = np.asarray(copies, float)
    i0 = expected_info(seeds, sa2, sb2, ell, 0.0, kernel)
    se1 = _se_z(expected_info(seeds, sa2, sb2, ell, rho, kernel)) / np.sqrt(c)  # information scales with copies
    se0 = _se_z(i0) / np.sqrt(c)
    neff = c * sum(n_eff_of(s, ell, kernel) for s in seeds)
    df = np.maximum(neff - 2 * c * len(seeds) - 1, 0.5)  # lr_cut's floor
    cut = lr_cut(df, alpha)
    half = np.sqrt(cut) * se0
    lam = c * lr_noncentrality(seeds, sa2, sb2, ell, rho, kernel)
    out = {"power": ncx2.sf(cut, 1, lam), "se0": se0, "se1": se1, "half": half}
    if floor is not None:
        out["gate"] = gate_pass(seeds, sa2, sb2, ell, rho, floor, kernel, c)
    return out


def gate_pass(
    seeds: list[dict], sa2: float, sb2: float, ell: float, rho: float, floor: float, kernel: str = KERNEL, copies=(1.0,)
) -> np.ndarray:
    """The chance that the reliabilities the interval fits (rel_a, rel_b: signal over signal plus item noise in
    the residual space, summed over the seeds) both reach `floor`, for `copies` times the seeds' designs. Each
    fitted log signal (log sa2 + log tr K(ell)) is normal around its true value with the expected-information
    variance (delta method over log sa2 and log ell; information scales with the copies); the reliability reaches
    the floor where the fitted signal passes floor / (1 - floor) times the noise. The two are taken as
    independent (they share only the length-scale)."""
    from scipy.stats import norm

    c = np.asarray(copies, float)
    if floor <= 0:
        return np.ones_like(c)
    if floor >= 1:
        return np.zeros_like(c)
    cov = np.linalg.inv(expected_info(seeds, sa2, sb2, ell, rho, kernel) + 1e-12 * np.eye(4))
    out = np.ones_like(c)
    for j, (s2, key) in enumerate(((sa2, "Na"), (sb2, "Nb"))):
        trK = sum(float(np.trace(_kernel_mats(s, np.array([ell]), kernel)[0][0])) for s in seeds)
        dtrK = sum(float(np.trace(_kernel_mats(s, np.array([ell]), kernel)[1][0])) for s in seeds)
        trN = sum(float(np.trace(s[key])) for s in seeds)
        g = np.zeros(4)
        g[j], g[2] = 1.0, dtrK / trK
        sd = math.sqrt(max(float(g @ cov @ g), 1e-300)) / np.sqrt(c)
        margin = math.log(s2 * trK) - math.log(floor / (1 - floor) * trN)
        out = out * norm.cdf(margin / sd)
    return out


def seeds_for_power(
    seeds: list[dict],
    sa2: float,
    sb2: float,
    ell: float,
    rho: float = 0.5,
    power: float = 0.8,
    alpha: float = 0.05,
    kernel: str = KERNEL,
    most: int = 256,
    decimals: int | None = None,
) -> int | None:
    """The fewest seeds like these (their average design) for `power` at |rho|; None past `most`. decimals: the
    power is rounded to them first (the precision it is shown with), so a count in words does not depend on the
    last bits of the fit."""
    k = np.arange(1, most + 1)
    got = design_curve(seeds, sa2, sb2, ell, rho, alpha, kernel, k / max(len(seeds), 1))["power"]
    ok = np.nonzero((got if decimals is None else np.round(got, decimals)) >= power)[0]
    return int(k[ok[0]]) if len(ok) else None
