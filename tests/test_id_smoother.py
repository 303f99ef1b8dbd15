"""The ID smoother's kernel chosen by restricted likelihood (gp_smooth.smooth_id, kernel="auto") against a direct
evaluation: scipy's multivariate normal of the trend-free contrasts W'x with covariance W'(s2 R(ell) + Vx)W,
maximised per kernel by scipy.optimize."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.linalg import null_space
from scipy.optimize import minimize
from scipy.stats import multivariate_normal

from oodcorr.stats import gp_smooth as G
from oodcorr.stats.gp_model import KERNELS
from study_helpers import REPO, load_script

VARIANTS = load_script(REPO / "bench" / "id_smoother_variants.py")  # smoothers measured, not adopted


def _reml(x, Vx, t, kernel, s2, ell):
    W = null_space(np.column_stack([np.ones(len(t)), t]).T)
    R = KERNELS[kernel](np.abs(np.subtract.outer(t, t)), ell)[0]
    return multivariate_normal(np.zeros(W.shape[1]), W.T @ (s2 * R + Vx) @ W).logpdf(W.T @ x)


def _best(x, Vx, t, kernel):
    """The direct restricted-likelihood maximum over (s2, ell) for one kernel (Nelder-Mead from a few starts,
    ell within the smoother's search range)."""
    lo, hi = math.log(0.5 * (t[1] - t[0])), math.log(2.0)
    best = -math.inf
    for l0 in (lo + 0.3, 0.5 * (lo + hi), hi - 0.3):
        for s0 in (0.01, 0.3):
            res = minimize(
                lambda p: -_reml(x, Vx, t, kernel, math.exp(p[0]), math.exp(min(max(p[1], lo), hi))),
                [math.log(s0), l0],
                method="Nelder-Mead",
                options={"xatol": 1e-4, "fatol": 1e-6},
            )
            best = max(best, -res.fun)
    return best


def _series(rng, n, rough: bool):
    t = np.linspace(0, 1, n)
    x = 1.5 * (1 - np.exp(-t / 0.3))
    if rough:  # AR(1) phi 0.8 per checkpoint
        K = 0.8 ** np.abs(np.subtract.outer(np.arange(n), np.arange(n)))
        x = x + 0.3 * np.linalg.cholesky(K) @ rng.standard_normal(n)
    else:
        x = x + 0.08 * np.sin(2 * np.pi * t + rng.uniform(0, 6))
    Vx = 0.015 * np.eye(n)
    return x + np.sqrt(0.015) * rng.standard_normal(n), Vx, t


@pytest.mark.parametrize("rough", [False, True])
def test_auto_picks_the_kernel_with_the_highest_restricted_likelihood(rough):
    rng = np.random.default_rng(11 if rough else 12)
    picked = []
    for _ in range(3):
        x, Vx, t = _series(rng, 30, rough)
        fit = {}
        G.smooth_id(x, Vx, t, kernel="auto", fit=fit)
        # the smoother's value is the restricted likelihood up to terms free of s2, ell and the kernel
        direct = _reml(x, Vx, t, fit["kernel"], fit["s2"], fit["ell"])
        W = null_space(np.column_stack([np.ones(len(t)), t]).T)
        const = -0.5 * (np.linalg.slogdet(W.T @ Vx @ W)[1] + W.shape[1] * math.log(2 * math.pi))
        assert fit["loglik"] + const == pytest.approx(direct, abs=1e-6)
        maxima = {k: _best(x, Vx, t, k) for k in G.ID_KERNEL_CHOICE}
        # the chosen kernel is within the smoother's grid coarseness of the best direct maximum
        assert direct >= max(maxima.values()) - 0.5, (fit, maxima)
        top = max(maxima, key=maxima.get)
        if maxima[top] - sorted(maxima.values())[-2] > 1.0:  # a clear winner is the one picked
            assert fit["kernel"] == top, (fit, maxima)
        picked.append(fit["kernel"])
    if not rough:  # a smooth curve: the rough kernel never wins (on AR(1) curves any of the three may)
        assert "exp" not in picked


def test_averaged_smoother_carries_the_error_of_a_rough_id_series():
    """On rough ID series the smoother averaged over kernels and hyper-parameters (bma) has a posterior covariance
    P that covers its actual error (mean squared standardised error near 1), where the squared-exponential
    smoother's P understates it several times over."""
    rng = np.random.default_rng(5)
    z = {"se": [], "bma": []}
    for _ in range(30):
        n = 40
        t = np.linspace(0, 1, n)
        K = 0.8 ** np.abs(np.subtract.outer(np.arange(n), np.arange(n)))
        truth = 1.5 * (1 - np.exp(-t / 0.3)) + 0.3 * np.linalg.cholesky(K) @ rng.standard_normal(n)
        Vx = 0.015 * np.eye(n)
        x = truth + np.sqrt(0.015) * rng.standard_normal(n)
        for k in z:
            xs, P = VARIANTS.smooth_id(x, Vx, t, kernel=k)  # "se": the package's smoother
            e = truth - xs
            z[k].append(float(e @ np.linalg.pinv(P, rcond=1e-8) @ e) / n)
    assert 0.6 < np.median(z["bma"]) < 1.6
    assert np.median(z["se"]) > 3 * np.median(z["bma"])
