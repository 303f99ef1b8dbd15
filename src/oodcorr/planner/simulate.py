"""A plan's power measured, not predicted: replicates of the design drawn from the planner's model and analysed
with the interval itself (gp_interval), as `oodcorr plan --budget ... --simulate N` reports beside the prediction.

Why: the prediction (gp_design.design_curve) is the likelihood-ratio test's power from its expected statistic;
it was checked within 0.04 of this simulation where each of >= 3 seeds carries >= 5 effectively independent
checkpoints, and runs 0.02-0.07 high on smoother curves and 0.11 with one seed
(bench/planner/plan_power_check.py), where
estimating the variances and the length-scale from a few wiggles costs more than it counts. Simulating the chosen
design with the interval measures what a study will see.

Draw, per seed: n checkpoints evenly spread over t in [0, 1]; two OOD residual signals (u, v), a bivariate
Gaussian process in the interval's kernel (length-scale ell, variance signal_var, correlation rho); an ID curve
x0 = amplitude (1 - exp(-4 t)) with amplitude ID_RISE ID item-noise SDs; OOD series beta x0 + u (v) plus white
item noise (variance noise per checkpoint); the ID series x0 plus its own white item noise (noise_id).
"""

from __future__ import annotations

import math

import numpy as np

ID_RISE = 10.0  # the ID curve rises by this many of its item-noise SDs over training (an ID testset that moves)


def draw_seed(
    n: int,
    ell: float,
    rho: float,
    noise: float,
    noise_id: float,
    rng,
    signal_var: float = 1.0,
    beta: float = 0.5,
    x0=None,
) -> dict:
    """One seed's input for gp_interval (module notes); x0: the noise-free ID curve (default: the rising one)."""
    from oodcorr.stats.gp_model import KERNEL, KERNELS

    t = np.linspace(0.0, 1.0, n)
    R = KERNELS[KERNEL](np.abs(np.subtract.outer(t, t)), ell)[0]
    L = np.linalg.cholesky(signal_var * R + 1e-8 * np.eye(n))
    z1, z2 = rng.standard_normal((2, n))
    u, v = L @ z1, L @ (rho * z1 + math.sqrt(1 - rho * rho) * z2)
    if x0 is None:
        x0 = ID_RISE * math.sqrt(noise_id) * (1 - np.exp(-4 * t))
    sd, sd_id = math.sqrt(noise), math.sqrt(noise_id)
    I = np.eye(n)
    return {
        "t": t,
        "x": x0 + sd_id * rng.standard_normal(n),
        "ya": beta * x0 + u + sd * rng.standard_normal(n),
        "yb": beta * x0 + v + sd * rng.standard_normal(n),
        "Vx": noise_id * I,
        "Va": noise * I,
        "Vb": noise * I,
    }


def simulate_design(
    n: int,
    seeds: int,
    noise: float,
    noise_id: float,
    signal_var: float,
    ell: float,
    beta: float,
    rho: float,
    margin: float,
    reps: int,
    seed=0,
    alpha: float = 0.05,
    x0=None,
    floor: float | None = None,
    progress: bool = False,
) -> dict:
    """`reps` studies of `seeds` runs x n checkpoints analysed with gp_interval: {"rho", "reps" (defined),
    "excludes_0", "consistent_null" (both ends inside +/- margin), "se" (of excludes_0), "gated"}. seed: an int or
    a numpy Generator to draw from; x0: draw_seed's ID curve. floor: the reliability gate (analyze.reliability_min):
    a study whose fitted rel_a or rel_b falls below it gives no verdict (counted, not excluded, not a null).
    progress: a line on stderr at each tenth."""
    from oodcorr.planner.budget import one_thread
    from oodcorr.stats.gp_interval import gp_interval

    rng = np.random.default_rng(seed)
    excl = inside = ok = gated = 0
    with one_thread():
        for i in range(reps):
            if progress and reps >= 20 and (i + 1) % max(reps // 10, 1) == 0:
                import click

                click.echo(f"  simulating at r = {rho:g}: {i + 1}/{reps}", err=True)
            runs = [draw_seed(n, ell, rho, noise, noise_id, rng, signal_var, beta, x0) for _ in range(seeds)]
            res = gp_interval(runs, alpha=alpha)
            if res["reason"]:
                continue
            ok += 1
            if floor is not None and not (res["rel_a"] >= floor and res["rel_b"] >= floor):
                gated += 1
                continue
            excl += res["ci_low"] > 0 or res["ci_high"] < 0
            inside += -margin < res["ci_low"] and res["ci_high"] < margin
    p = excl / max(ok, 1)
    return {
        "rho": rho,
        "reps": ok,
        "excludes_0": p,
        "se": math.sqrt(p * (1 - p) / max(ok, 1)),
        "consistent_null": inside / max(ok, 1),
        "gated": gated,
    }
