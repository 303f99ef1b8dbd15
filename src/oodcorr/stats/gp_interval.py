"""The noise-corrected interval (ci2) as a likelihood: two residual trajectories as a bivariate Gaussian process.

Estimand: rho, the correlation of two testsets' noise-free residual trajectories (what is left of their
population-level scores once the population-level ID score is regressed out), shared by every seed (training
run) of a model. Observed per seed and checkpoint: the ID series x and the OOD series a, b, each a mean over a
finite, fixed testset, with item-noise covariances over checkpoints Vx, Va, Vb (item_cov.noise_cov).

The ID control. x is noisy; regressing on it leaves beta * (x* - x) in both residuals, and that leftover is not
white in the residual space: it carries a systematic part along the true ID curve, which correlates the two
residuals (on simulated smooth curves: a mean r of +0.29 at a true 0 with a 128-item ID testset). So the
control is the ID series smoothed by its own Gaussian process (trend linear in t, the item noise Vx known), and
what leaks is that smoother's error, with its posterior covariance P: a + b slopes on the smoothed series, leak
covariance beta_a beta_b P. That P is honest only when the smoother's kernel matches the ID curve's roughness: a
squared exponential on a rough (AR(1)) ID curve understates its error about threefold, and the leftover biases r
upwards (+0.11 at a true 0, 5 seeds x 40 checkpoints, 128 ID items). So the kernel (squared exponential, Matern
3/2 or exponential), s2 and ell are chosen by the restricted likelihood summed over the seeds (id_kernel
"shared", gp_smooth.smooth_ids): per seed the likelihood cannot tell rough from smooth, over seeds it can.
A fixed kernel, "auto" (chosen per seed) and leak_grid (the leak's size by likelihood) are there to be measured
(bench/stats/id_smoother.py, with the smoothers of bench/stats/id_smoother_variants.py; docs/statistics-reference.md).

Model, per seed (Q: an orthonormal basis of the residual space of OLS on [1, smoothed x], m = n - 2 columns):

    z_a = Q'a = Q'u + Q'e_a + beta_a Q'(x_hat - x*),   z_b likewise
    (u, v): signals with covariance [[sa2, rho sa sb], [rho sa sb, sb2]] (x) R(ell)   (intrinsic coregionalisation)
    cov(z_a) = sa2 K + Q'(Va + beta_a^2 P)Q,  cov(z_a, z_b) = rho sa sb K + beta_a beta_b Q'PQ,  K = Q'R(ell)Q.

R(ell) is a stationary kernel over training progress t in [0, 1]: Matern 3/2 by default, between the smooth
squared exponential and the rough exponential (AR(1) in continuous time): on the simulation grid a squared
exponential fitted to AR(1) trajectories over-counted independent checkpoints, and choosing the kernel by
likelihood picked the rough one on smooth curves. ell is searched down to a quarter of the checkpoint spacing,
so independent checkpoints are not taken for smooth ones. sa2, sb2, ell and rho are shared by the seeds; each
seed keeps its own ID curve, slopes and noise, so information adds over seeds.

Interval: the profile likelihood of atanh(rho) on a grid (sa2, sb2, ell re-maximised at each point by Fisher
scoring), {rho : 2 (max logL - logL(rho)) <= lr_cut(df)}, where lr_cut is the likelihood-ratio value at which a
correlation of df + 2 independent pairs would be rejected by the exact t-test, df the fitted model's effective
number of independent checkpoints (participation ratio of K) summed over seeds, less the fitted intercepts and
slopes and rho itself. The point estimate is the profile maximum. The reliabilities it reports are the fitted
model's: the signal share of each residual trajectory's variance.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import null_space

from oodcorr.stats.gp_model import KERNEL, KERNEL_CHOICE, _kernel_mats, _loglik_and_score
from oodcorr.stats.gp_smooth import ID_KERNEL, ID_KERNEL_CHOICE, smooth_id, smooth_ids

Z_MAX = 3.8  # |atanh(rho)| searched (|rho| <= 0.999); an interval end past it is the boundary, |rho| = 1
ROOT_STEPS = 8  # profile fits per interval end at most
ROOT_TOL = 0.1  # on the deviance
ELL_MIN_SPACING = 0.25  # shortest length-scale searched, in checkpoint spacings
ELL_MAX = 3.0  # longest, in units of the training span
ITERS = 30


# ----------------------------------------------------------------------------- per-seed data


def _seed_terms(seed: dict, id_control: str = "latent", id_kernel: str = ID_KERNEL, smoothed=None) -> dict:
    x, ya, yb = (np.asarray(seed[k], float) for k in ("x", "ya", "yb"))
    Vx, Va, Vb = (np.asarray(seed[k], float) for k in ("Vx", "Va", "Vb"))
    n = len(x)
    t = np.asarray(seed.get("t", np.linspace(0.0, 1.0, n)), float)
    J = np.eye(n) - 1.0 / n
    xc0 = x - x.mean()
    sxx0 = float(xc0 @ xc0)
    rel_id = (sxx0 - float(np.trace(J @ Vx))) / sxx0 if sxx0 > 0 else math.nan
    if smoothed is not None:  # the seeds' shared smoother (smooth_ids)
        xs, P = smoothed
    elif id_control == "latent":  # regress on the smoothed ID series; its error is what leaks into the residuals
        xs, P = smooth_id(x, Vx, t, id_kernel)
    else:  # the observed ID series, its item noise as the leak
        xs, P = x, Vx
    Q = null_space(np.column_stack([np.ones(n), xs]).T)  # (n, n-2) when xs is not constant
    xc = xs - xs.mean()
    sxx = float(xc @ xc)
    ba = float(xc @ (ya - ya.mean())) / sxx
    bb = float(xc @ (yb - yb.mean())) / sxx
    QPQ = Q.T @ P @ Q
    return {
        "n": n,
        "m": Q.shape[1],
        "Q": Q,
        "d": np.abs(np.subtract.outer(t, t)),
        "spacing": float(np.median(np.diff(np.sort(t)))) if n > 1 else 1.0,
        "z": np.concatenate([Q.T @ ya, Q.T @ yb]),
        "Na": Q.T @ Va @ Q + ba * ba * QPQ,
        "Nb": Q.T @ Vb @ Q + bb * bb * QPQ,
        "C": ba * bb * QPQ,
        "rel_id": rel_id,
        "beta_a": ba,
        "beta_b": bb,
        "QPQ": QPQ,
    }


def _scale_leak(terms: list[dict], g: float) -> list[dict]:
    """The seeds' terms with the ID smoother's leak (beta beta' Q'PQ) scaled by g."""
    return [
        {
            **s,
            "Na": s["Na"] + (g - 1) * s["beta_a"] ** 2 * s["QPQ"],
            "Nb": s["Nb"] + (g - 1) * s["beta_b"] ** 2 * s["QPQ"],
            "C": g * s["C"],
        }
        for s in terms
    ]


def _fit(seeds, theta0, rho, bounds, kernel, iters=ITERS):
    """Maximise the log-likelihood by Fisher scoring with per-point step halving, batched over points: over
    (log sa2, log sb2, log ell) at fixed rho (G,), or over all four with atanh(rho) last (rho=None). A point
    stops once its step is below 1e-3."""
    theta = np.clip(theta0.copy(), bounds[0][: theta0.shape[1]], bounds[1][: theta0.shape[1]])
    G, P = theta.shape
    lo, hi = bounds[0][:P], bounds[1][:P]
    step = np.ones(G)
    ll, g, info = _loglik_and_score(seeds, theta, rho, kernel)
    active = np.ones(G, bool)
    for _ in range(iters):
        idx = np.flatnonzero(active)
        if not len(idx):
            break
        delta = np.linalg.solve(info[idx] + 1e-6 * np.eye(P), g[idx][..., None])[..., 0]
        delta *= np.minimum(1.0, 2.0 / np.maximum(np.abs(delta).max(-1), 1e-12))[:, None]  # <= e^2 per step
        move = step[idx, None] * delta
        cand = np.clip(theta[idx] + move, lo, hi)
        ll_c, g_c, info_c = _loglik_and_score(seeds, cand, None if rho is None else rho[idx], kernel)
        better = ll_c >= ll[idx] - 1e-10
        b = idx[better]
        theta[b], ll[b], g[b], info[b] = cand[better], ll_c[better], g_c[better], info_c[better]
        step[idx] = np.where(better, np.minimum(1.0, step[idx] * 2), step[idx] / 4)
        active[idx] = ~((np.abs(move).max(-1) < 1e-3) & better) & (step[idx] >= 1e-4)
    return theta, ll, info


def _profile_fit(seeds, theta, theta_hat, z, bounds, kernel):
    """The profile at z (one point per side): sa2, sb2 and ell maximised from two starts, the previous point's fit
    and the joint maximum's, keeping the higher. A fit warm-started from the previous point alone can fall into
    another basin (a signal variance at its floor, where rho no longer matters and the deviance stays past the cut
    at every rho), which ended the interval next to z_hat (measured: [-1.00, -1.00] where the profile's own
    interval is [-1.00, -0.89]); each fit runs to convergence, so where the two agree the start does not matter."""
    k = len(z)
    starts = np.concatenate([theta, np.repeat(theta_hat[None, :3], k, 0)])
    th, ll, _ = _fit(seeds, starts, np.tanh(np.concatenate([z, z])), bounds, kernel)
    pick = np.where(ll[k:] > ll[:k], np.arange(k) + k, np.arange(k))
    return th[pick], ll[pick]


def _ends(seeds, theta_hat, ll_max, se, cut, bounds, kernel):
    """Where the profile deviance 2 (ll_max - ll_p(z)) reaches `cut` below and above z_hat: both sides at once,
    each step a quadratic fit through z_hat (deviance 0) and the last point; an end past Z_MAX is the boundary."""
    zhat = theta_hat[3]
    side = np.array([-1.0, 1.0])
    dist = np.full(2, math.sqrt(cut) * max(se, 0.05))
    theta = np.repeat(theta_hat[None, :3], 2, 0)
    found = np.full(2, np.nan)
    lo_d, hi_d = np.zeros(2), np.full(2, np.inf)  # bracket of the crossing distance
    for _ in range(ROOT_STEPS):
        z = np.clip(zhat + side * dist, -Z_MAX, Z_MAX)
        dist = np.abs(z - zhat)
        theta, ll = _profile_fit(seeds, theta, theta_hat, z, bounds, kernel)
        dev = np.maximum(2 * (ll_max - ll), 1e-9)
        for k in range(2):
            if not np.isnan(found[k]):
                continue
            if abs(dev[k] - cut) < ROOT_TOL:
                found[k] = z[k]
                continue
            if dev[k] < cut:
                lo_d[k] = dist[k]
                if abs(z[k]) >= Z_MAX:  # the deviance never reaches the cut: the interval runs to |rho| = 1
                    found[k] = side[k] * np.inf
                    continue
            else:
                hi_d[k] = dist[k]
            new = dist[k] * math.sqrt(cut / dev[k])  # deviance ~ a d^2 through z_hat
            if not lo_d[k] < new < hi_d[k]:
                new = 0.5 * (lo_d[k] + hi_d[k]) if np.isfinite(hi_d[k]) else 2 * dist[k]
            dist[k] = new
    for k in range(2):  # not converged: the bracket's inner end (a slightly narrower interval is not returned)
        if np.isnan(found[k]):
            found[k] = zhat + side[k] * (hi_d[k] if np.isfinite(hi_d[k]) else np.inf)
    return found[0], found[1]


def n_eff_of(s: dict, ell: float, kernel: str) -> float:
    """Effective number of independent checkpoints of one seed's residual trajectory under the fitted kernel:
    (tr K)^2 / tr(K^2) in the residual space, + 2 for the intercept and slope (n for independent checkpoints)."""
    K, _ = _kernel_mats(s, np.array([ell]), kernel)
    K = K[0]
    return float(np.trace(K) ** 2 / np.sum(K * K)) + 2.0


def _usable(seed: dict) -> bool:
    """A seed the interval can use: at least 5 checkpoints, a moving ID series, every input finite."""
    x = np.asarray(seed["x"], float)
    if len(x) < 5 or not np.isfinite(x).all() or np.ptp(x) == 0:
        return False
    return all(np.isfinite(np.asarray(seed[k], float)).all() for k in ("ya", "yb", "Va", "Vb", "Vx"))


def _kernel_fit(terms: list, va: float, vb: float, kernel: str) -> tuple:
    """The search bounds, the kernel (the one that fits the residual trajectories best where kernel is "auto") and
    its best (log sa2, log sb2, log ell) at rho = 0."""
    spacing = min(s["spacing"] for s in terms)
    lo = np.array([math.log(va * 1e-6), math.log(vb * 1e-6), math.log(ELL_MIN_SPACING * spacing)])
    hi = np.array([math.log(va * 10), math.log(vb * 10), math.log(ELL_MAX)])
    # start: half of each residual's variance as signal, ell = 2 spacings and 0.2 of the span
    starts = [np.array([math.log(va / 2), math.log(vb / 2), math.log(l0)]) for l0 in (2 * spacing, 0.2)]
    rho0 = np.zeros(len(starts))
    bounds = (np.append(lo, -Z_MAX), np.append(hi, Z_MAX))
    fits = {}
    for k in KERNEL_CHOICE if kernel == "auto" else (kernel,):
        th0, ll0, _ = _fit(terms, np.stack(starts), rho0, bounds, k)
        fits[k] = (float(ll0.max()), th0[int(np.argmax(ll0))])
    kernel = max(fits, key=lambda k: fits[k][0])  # the kernel that fits the residual trajectories best
    return bounds, kernel, fits[kernel][1]


def _fitted_reliabilities(terms: list, sa2: float, sb2: float, ell: float, kernel: str) -> tuple[float, float]:
    """The fitted reliabilities: each residual's signal share, summed over the seeds (signal trace over signal plus
    item-noise trace)."""
    k_stats = [(_kernel_mats(s, np.array([ell]), kernel)[0][0], s) for s in terms]
    sig_a = sum(sa2 * np.trace(K) for K, s in k_stats)
    sig_b = sum(sb2 * np.trace(K) for K, s in k_stats)
    noi_a = sum(np.trace(s["Na"]) for K, s in k_stats)
    noi_b = sum(np.trace(s["Nb"]) for K, s in k_stats)
    return float(sig_a / (sig_a + noi_a)), float(sig_b / (sig_b + noi_b))


def gp_interval(
    seeds: list[dict],
    alpha: float = 0.05,
    kernel: str = KERNEL,
    id_control: str = "latent",
    id_kernel: str = ID_KERNEL,
    leak_grid: tuple = (1.0,),
) -> dict:
    """Profile-likelihood interval for rho shared by `seeds` (module notes). seeds: dicts with x, ya, yb (n,), Vx,
    Va, Vb (n, n) and optionally t (n,) in [0, 1]. Returns floats r_hat, ci_low, ci_high, rel_a, rel_b, rel_id,
    n_eff (summed over seeds), ell, n_seeds, and reason ("" where the interval is defined)."""
    nan = ("r_hat", "ci_low", "ci_high", "rel_a", "rel_b", "rel_id", "n_eff", "ell", "sa2", "sb2")
    out = {**dict.fromkeys(nan, math.nan), "n_seeds": len(seeds), "reason": "", "kernel": "", "id_kernel": ""}
    out["terms"] = []
    usable = [seed for seed in seeds if _usable(seed)]
    smoothed, id_fit = [None] * len(usable), {}
    if id_control == "latent" and id_kernel == "shared" and usable:  # one smoother for the seeds (smooth_ids)
        ts = [np.asarray(s.get("t", np.linspace(0.0, 1.0, len(s["x"]))), float) for s in usable]
        smoothed = smooth_ids([s["x"] for s in usable], [s["Vx"] for s in usable], ts, ID_KERNEL_CHOICE, id_fit)
    terms = [_seed_terms(s, id_control, id_kernel, sm) for s, sm in zip(usable, smoothed)]
    out["id_kernel"] = id_fit.get("kernel", id_kernel if id_control == "latent" else "")
    if not terms:
        out["reason"] = "few_checkpoints"
        return out
    out["n_seeds"] = len(terms)
    out["rel_id"] = float(np.nanmedian([s["rel_id"] for s in terms]))
    za = np.concatenate([s["z"][: s["m"]] for s in terms])
    zb = np.concatenate([s["z"][s["m"] :] for s in terms])
    va, vb = float(np.mean(za**2)), float(np.mean(zb**2))
    if not (va > 0 and vb > 0):
        out["reason"] = "constant"
        return out
    bounds, kernel, theta0 = _kernel_fit(terms, va, vb, kernel)
    # the joint maximum, from rho = 0 and from either side (the profile can have a second, lower mode)
    start = np.array([np.append(theta0, z0) for z0 in (-1.0, 0.0, 1.0)])
    if len(leak_grid) > 1:  # the leak's size by likelihood: the scale on the smoother's P that fits best
        lls = [float(_fit(_scale_leak(terms, g), start, None, bounds, kernel)[1].max()) for g in leak_grid]
        terms = _scale_leak(terms, leak_grid[int(np.argmax(lls))])
        out["leak_scale"] = leak_grid[int(np.argmax(lls))]
    theta_all, ll_all, info_all = _fit(terms, start, None, bounds, kernel)
    best = int(np.argmax(ll_all))
    theta_hat, ll_max = theta_all[best], float(ll_all[best])
    se = math.sqrt(max(np.linalg.inv(info_all[best] + 1e-9 * np.eye(4))[3, 3], 0.0))
    sa2, sb2, ell = np.exp(theta_hat[:3])
    neff = float(sum(n_eff_of(s, ell, kernel) for s in terms))
    rel_a, rel_b = _fitted_reliabilities(terms, sa2, sb2, ell, kernel)
    cut = lr_cut(neff - 2 * len(terms) - 1, alpha)
    lo_z, hi_z = _ends(terms, theta_hat, ll_max, se, cut, bounds, kernel)
    out.update(r_hat=float(np.tanh(theta_hat[3])), ci_low=float(np.tanh(lo_z)), ci_high=float(np.tanh(hi_z)))
    out.update(rel_a=rel_a, rel_b=rel_b, n_eff=neff, ell=float(ell), sa2=float(sa2), sb2=float(sb2), kernel=kernel)
    out["terms"] = terms  # for planning (seeds_for_power); not a table column
    if not np.isfinite(ll_max):
        out["reason"] = "no_fit"
    return out


def lr_cut(df: float, alpha: float = 0.05) -> float:
    """The profile-likelihood cut for a correlation carried by `df` effective degrees of freedom (the residual
    space's effective dimension summed over seeds, minus rho's own): the likelihood-ratio value at which a
    correlation of that many independent pairs would be rejected by the exact t-test, (df + 2) log(1 +
    F_(1-alpha)(1, df) / df); chi-square(1) as df grows."""
    from scipy.stats import f

    d = np.maximum(np.asarray(df, float), 0.5)  # an array of df gives an array of cuts
    out = (d + 2) * np.log1p(f.ppf(1 - alpha, 1, d) / d)
    return float(out) if out.ndim == 0 else out
