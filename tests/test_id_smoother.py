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

VARIANTS = load_script(REPO / "bench" / "stats" / "id_smoother_variants.py")  # smoothers measured, not adopted


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


def _seeds(rng, k, n, rough):
    return [_series(rng, n, rough) for _ in range(k)]


@pytest.mark.parametrize("rough", [False, True])
def test_shared_smoother_maximises_the_seeds_summed_restricted_likelihood(rough):
    """smooth_ids: one kernel, s2 and ell for all seeds, at the maximum of the restricted likelihood summed over
    seeds (checked against scipy's multivariate normal of each seed's contrasts, maximised directly)."""
    rng = np.random.default_rng(21 if rough else 22)
    seeds = _seeds(rng, 4, 30, rough)
    fit = {}
    got = G.smooth_ids([s[0] for s in seeds], [s[1] for s in seeds], [s[2] for s in seeds], G.ID_KERNEL_CHOICE, fit)
    consts = []
    for x, Vx, t in seeds:
        W = null_space(np.column_stack([np.ones(len(t)), t]).T)
        consts.append(-0.5 * (np.linalg.slogdet(W.T @ Vx @ W)[1] + W.shape[1] * math.log(2 * math.pi)))
    direct = sum(_reml(x, Vx, t, fit["kernel"], fit["s2"], fit["ell"]) for x, Vx, t in seeds)
    assert fit["loglik"] + sum(consts) == pytest.approx(direct, abs=1e-6)
    t = seeds[0][2]
    lo, hi = math.log(0.5 * (t[1] - t[0])), math.log(2.0)

    def summed(kernel, p):
        return sum(_reml(x, Vx, tt, kernel, math.exp(p[0]), math.exp(min(max(p[1], lo), hi))) for x, Vx, tt in seeds)

    maxima = {}
    for k in G.ID_KERNEL_CHOICE:
        fits = [
            minimize(lambda p: -summed(k, p), [math.log(s0), l0], method="Nelder-Mead")
            for s0 in (0.01, 0.3)
            for l0 in (lo + 0.3, 0.5 * (lo + hi), hi - 0.3)
        ]
        maxima[k] = -min(f.fun for f in fits)
    assert direct >= max(maxima.values()) - 0.5, (fit, maxima)
    # the seeds' summed evidence tells the curves apart: smooth -> not the rough kernel, AR(1) -> not the smooth one
    assert fit["kernel"] != ("se" if rough else "exp"), (fit, maxima)
    # each seed's control is the GP posterior under the shared fit
    for (x, Vx, t), (mean, P) in zip(seeds, got):
        ref_mean, ref_P = G._posterior(
            fit["s2"] * KERNELS[fit["kernel"]](np.abs(np.subtract.outer(t, t)), fit["ell"])[0],
            Vx,
            np.column_stack([np.ones(len(t)), t]),
            x,
        )
        assert np.allclose(mean, ref_mean) and np.allclose(P, 0.5 * (ref_P + ref_P.T))


def test_shared_smoother_states_its_error_on_rough_id_where_one_smooth_kernel_does_not():
    """Five seeds of a rough (AR(1)) ID curve: the shared smoother's posterior covariance covers its actual error
    (mean squared standardised error near 1); the squared exponential's understates it several times over."""
    rng = np.random.default_rng(5)
    z = {"shared": [], "se": []}
    n = 40
    t = np.linspace(0, 1, n)
    K = 0.8 ** np.abs(np.subtract.outer(np.arange(n), np.arange(n)))
    for _ in range(8):
        truths = [1.5 * (1 - np.exp(-t / 0.3)) + 0.3 * np.linalg.cholesky(K) @ rng.standard_normal(n) for _ in range(5)]
        Vx = 0.015 * np.eye(n)
        xs = [tr + np.sqrt(0.015) * rng.standard_normal(n) for tr in truths]
        shared = G.smooth_ids(xs, [Vx] * 5, [t] * 5)
        for tr, x, (m, P) in zip(truths, xs, shared):
            for k, (mk, Pk) in (("shared", (m, P)), ("se", G.smooth_id(x, Vx, t, "se"))):
                e = tr - mk
                z[k].append(float(e @ np.linalg.pinv(Pk, rcond=1e-8) @ e) / n)
    assert 0.6 < np.median(z["shared"]) < 1.6
    assert np.median(z["se"]) > 2 * np.median(z["shared"])


def test_shared_smoother_keeps_an_exact_control_and_one_seed_is_auto():
    rng = np.random.default_rng(3)
    (x, Vx, t), (x2, _, t2) = _seeds(rng, 2, 25, False)
    out = G.smooth_ids([x, x2], [Vx, np.zeros((25, 25))], [t, t2])
    assert np.array_equal(out[1][0], x2) and not out[1][1].any()
    one = G.smooth_ids([x], [Vx], [t])[0]
    auto = G.smooth_id(x, Vx, t, "auto")
    assert np.allclose(one[0], auto[0]) and np.allclose(one[1], auto[1])
