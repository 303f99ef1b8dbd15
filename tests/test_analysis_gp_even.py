"""The even-weight estimate beside the likelihood (gp_even): its value against an independent computation (OLS
residuals from statsmodels, the item noise subtracted from the residual moments), its undefined case, and its
bootstrap interval."""

from __future__ import annotations

import math

import numpy as np
import pytest

from oodcorr.stats.gp_even import even_interval
from oodcorr.stats.gp_interval import gp_interval


def _seeds(rng, n_seeds=3, n=20, rho=0.6, noise=0.3, ell=0.2):
    t = np.linspace(0, 1, n)
    K = np.exp(-0.5 * (np.subtract.outer(t, t) / ell) ** 2) + 1e-6 * np.eye(n)
    L = np.linalg.cholesky(K)
    out = []
    for _ in range(n_seeds):
        x = 2 * (1 - np.exp(-t / 0.3))
        u = L @ rng.standard_normal(n)
        v = rho * u + math.sqrt(1 - rho * rho) * (L @ rng.standard_normal(n))
        Va, Vb = (noise**2 * np.eye(n) for _ in range(2))
        out.append(
            {
                "x": x,
                "ya": 0.5 * x + u + noise * rng.standard_normal(n),
                "yb": 0.8 * x + v + noise * rng.standard_normal(n),
                "Vx": np.zeros((n, n)),
                "Va": Va,
                "Vb": Vb,
                "t": t,
            }
        )
    return out


def test_r_even_is_the_noise_corrected_pooled_residual_correlation():
    """With an exact ID control the estimate is sum(ea.eb) / sqrt(sum(ea.ea - tr M Va) sum(eb.eb - tr M Vb)) over
    seeds, e = OLS residuals on [1, x], M the residual maker: computed here with statsmodels."""
    import statsmodels.api as sm

    seeds = _seeds(np.random.default_rng(3))
    fit = gp_interval(seeds)
    got = even_interval(fit["terms"], fit)
    acc = np.zeros(3)
    for s in seeds:
        X = sm.add_constant(s["x"])
        ea, eb = sm.OLS(s["ya"], X).fit().resid, sm.OLS(s["yb"], X).fit().resid
        M = np.eye(len(X)) - X @ np.linalg.pinv(X)
        acc += [ea @ eb, ea @ ea - np.trace(M @ s["Va"]), eb @ eb - np.trace(M @ s["Vb"])]
    assert got["r"] == pytest.approx(acc[0] / math.sqrt(acc[1] * acc[2]), abs=1e-9)
    assert got["ci_low"] < got["r"] < got["ci_high"] and -1 <= got["ci_low"] and got["ci_high"] <= 1
    assert got["reason"] == ""
    assert even_interval(fit["terms"], fit) == got  # seeded: the same interval every time


def test_more_seeds_narrow_the_interval_and_noise_alone_leaves_it_undefined():
    rng = np.random.default_rng(5)
    few, many = _seeds(rng, n_seeds=2), _seeds(rng, n_seeds=8)
    w = []
    for seeds in (few, many):
        fit = gp_interval(seeds)
        e = even_interval(fit["terms"], fit)
        w.append(e["ci_high"] - e["ci_low"])
    assert w[1] < w[0]
    # residuals that are item noise only, its stated covariance larger than what they show: no size to estimate
    quiet = _seeds(rng, n_seeds=2, rho=0.0, noise=0.05)
    for s in quiet:
        s["Va"] = s["Vb"] = 9.0 * np.eye(len(s["x"]))
    fit = gp_interval(quiet)
    e = even_interval(fit["terms"], fit)
    assert e["reason"] == "noise_only" and math.isnan(e["r"]) and math.isnan(e["ci_low"])


def test_the_interval_covers_the_correlation_of_the_model_it_is_drawn_from():
    """20 studies drawn with rho = 0.6 (smooth curves, 3 seeds x 20 checkpoints): the 95 % interval holds rho in
    at least 17 (a binomial lower bound at 0.95 allows 16 only with probability < 0.02)."""
    rng = np.random.default_rng(11)
    hits = 0
    for i in range(20):
        seeds = _seeds(rng)
        fit = gp_interval(seeds)
        e = even_interval(fit["terms"], fit, seed=i)
        hits += e["ci_low"] <= 0.6 <= e["ci_high"]
    assert hits >= 17
