"""The even-weight estimate beside the likelihood: the noise-corrected correlation of the two residual trajectories
by moments, every checkpoint's residual variation weighted alike, and its interval by a parametric bootstrap from
the likelihood's fitted model (gp_interval).

Why a second estimate. The likelihood weights each time scale of the residual trajectories by its signal-to-noise
ratio. Where two testsets correlate more at one time scale than at another (or the fitted kernel misses the
trajectories' shape), that weighting, and with it the estimate, moves with the number of items: on a real study
(bench/stats/item_resample.py) half the OOD items raised the likelihood's estimate by about 0.1 while this one stayed
put. Its expectation does not depend on the items: per seed, with z = Q'y the residuals of the OLS on the smoothed
ID series and Na, Nb, C their item-noise and ID-leak covariances,

    r_even = sum_s (za'zb - tr C) / sqrt(sum_s (za'za - tr Na) * sum_s (zb'zb - tr Nb)),

the Pearson correlation the partial-correlation table would show with every testset's items unlimited (seeds
pooled by their summed cross-products). It is undefined where a corrected variance is <= 0 (noise only).

Interval: by inverting the test the fitted model gives. For each rho on a grid (Fisher z from -3.8 to 3.8), the
residuals are drawn from the likelihood's fitted model with its correlation set to rho (its signal variances,
kernel and each seed's item noise and ID leak as fitted) and r_even recomputed on each draw; rho is kept where
the observed r_even lies inside the central 1 - alpha of those draws. The model supplies only the sampling spread
(which it describes even where its weighting over time scales does not hold). Draws the noise swallows (a
corrected variance <= 0) count as beyond the observed value on both sides, which only widens the interval. An
observed r_even no rho on the grid reaches (|r_even| well past 1: noise larger than the fit allows) leaves the
interval undefined ("out_of_range").
"""

from __future__ import annotations

import math

import numpy as np

from oodcorr.stats.gp_model import _kernel_mats, _sigma

DRAWS = 400  # per grid point, the same normal deviates at every point
GRID = np.linspace(-3.8, 3.8, 61)  # Fisher z of rho


def moments(terms: list[dict]) -> tuple[float, float, float]:
    """(cross-product, variance a, variance b) of the residual signals, noise and ID leak subtracted, summed over
    seeds."""
    acc = np.zeros(3)
    for s in terms:
        m = s["m"]
        za, zb = s["z"][:m], s["z"][m:]
        acc += [za @ zb - np.trace(s["C"]), za @ za - np.trace(s["Na"]), zb @ zb - np.trace(s["Nb"])]
    return float(acc[0]), float(acc[1]), float(acc[2])


def _r(c, va, vb):
    """r from summed moments, batched; nan where a corrected variance is <= 0."""
    c, va, vb = (np.asarray(v, float) for v in (c, va, vb))
    ok = (va > 0) & (vb > 0)
    return np.where(ok, c / np.sqrt(np.where(ok, va * vb, 1.0)), np.nan)


def _draws(terms: list[dict], fit: dict, rhos: np.ndarray, draws: int, rng) -> np.ndarray:
    """r_even on `draws` studies from the fitted model at each rho: (len(rhos), draws), nan where undefined."""
    G = len(rhos)
    sa2, sb2 = np.full(G, fit["sa2"]), np.full(G, fit["sb2"])
    acc = np.zeros((3, G, draws))
    for s in terms:
        m = s["m"]
        K = np.repeat(_kernel_mats(s, np.array([fit["ell"]]), fit["kernel"])[0], G, 0)
        S = _sigma(s, sa2, sb2, rhos * np.sqrt(sa2 * sb2), K)
        w, U = np.linalg.eigh(0.5 * (S + np.swapaxes(S, 1, 2)))
        W = rng.standard_normal((2 * m, draws))
        Z = (U * np.sqrt(np.clip(w, 0, None))[:, None, :]) @ W  # (G, 2m, draws)
        za, zb = Z[:, :m], Z[:, m:]
        acc += [
            np.einsum("gid,gid->gd", za, zb) - np.trace(s["C"]),
            np.einsum("gid,gid->gd", za, za) - np.trace(s["Na"]),
            np.einsum("gid,gid->gd", zb, zb) - np.trace(s["Nb"]),
        ]
    return _r(*acc)


def _cross(level, p_out, p_in, z_out, z_in):
    """Where a tail probability rising from p_out (at z_out, rejected) to p_in (at z_in, kept) reaches `level`."""
    if not p_in > p_out:
        return 0.5 * (z_out + z_in)
    return z_out + (level - p_out) / (p_in - p_out) * (z_in - z_out)


def even_interval(terms: list[dict], fit: dict, alpha: float = 0.05, draws: int = DRAWS, seed: int = 0) -> dict:
    """r_even and its interval (module notes). terms: gp_interval's per-seed terms; fit: its result (sa2, sb2, ell,
    kernel). Returns r (clipped to [-1, 1]), ci_low, ci_high (nan where undefined) and reason ("noise_only" where
    a corrected variance of the data is <= 0, "out_of_range" where no correlation of the model reaches r)."""
    out = {"r": math.nan, "ci_low": math.nan, "ci_high": math.nan, "reason": ""}
    if not terms or not all(math.isfinite(fit.get(k, math.nan)) for k in ("sa2", "sb2", "ell")):
        out["reason"] = "no_fit"
        return out
    r = float(_r(*moments(terms)))
    if not math.isfinite(r):
        out["reason"] = "noise_only"
        return out
    out["r"] = float(np.clip(r, -1, 1))
    rhos = np.tanh(GRID)
    rs = _draws(terms, fit, rhos, draws, np.random.default_rng(seed))
    undefined = ~np.isfinite(rs)
    below = ((rs <= r) | undefined).mean(1)  # P(r* <= r_obs) at each rho, undefined draws on both sides
    above = ((rs >= r) | undefined).mean(1)
    keep = np.minimum(below, above) > alpha / 2
    if not keep.any():
        out["reason"] = "out_of_range"
        return out
    i, j = np.flatnonzero(keep)[[0, -1]]
    # the ends between the last rejected and the first kept grid point, where the tail probability crosses alpha/2
    lo = GRID[i] if i == 0 else _cross(alpha / 2, above[i - 1], above[i], GRID[i - 1], GRID[i])
    hi = GRID[j] if j == len(GRID) - 1 else _cross(alpha / 2, below[j + 1], below[j], GRID[j + 1], GRID[j])
    out.update(ci_low=float(np.tanh(lo)) if i else -1.0, ci_high=float(np.tanh(hi)) if j < len(GRID) - 1 else 1.0)
    return out
