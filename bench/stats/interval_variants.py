"""Alternatives to the noise-corrected interval, measured on the same grid and not adopted.

The interval (oodcorr.stats.interval) is the Fisher interval of the attenuated correlation divided by the
estimated attenuation A = sqrt(rel_a rel_b), treating A as known. The grid (bench/stats/noise_simulation.py) shows it
conservative at r = 0.8 with smooth trajectories. Two variants use the pivot atanh(r_att) - atanh(rho A_hat)
instead, with its delta-method variance (A_hat's error is correlated with r_att's) and A_hat's second-order bias
taken out:

    var(rho) = var(atanh r_att) - 2 w g'Su + w^2 u'Su,   w = rho A / (1 - rho^2 A^2)

g, u the gradients of atanh(c / sqrt(v_a v_b)) and log A(v_a, v_b) over the residual quadratic forms
(c, v_a, v_b), S their covariance under the interval's own fitted model (interval.z_dof's moments).
- pivot:  {rho : |atanh(r_att) - atanh(rho A_eff)| <= 1.96 sd(rho)}, inverted over rho, one-sided at +-1 exactly
          where the current one is;
- plugin: the current construction with that variance evaluated once, at the estimate (rho A = r_att).

`--variant V` runs the grid of bench/stats/noise_simulation.py (same seeds, same cells) with V swapped in and reports,
for it and the current interval: cells in 0.93-0.97, cells outside the band by more than two Monte Carlo
standard errors (each side), false-distinguishable rate at r = 0 above 5 % by more than two standard errors.
Two checks of the current interval (also alone: --checks-only): small_sample_check compares its standard error
of atanh(r) with simulation at known parameters; cell_diagnosis takes apart its coverage in a few grid cells.
Updates bench/stats/results/interval_variants.json in place (other variants' entries are kept).
Usage: python bench/stats/interval_variants.py [--variant pivot|plugin] [--reps 1000] [--checks-only]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import noise_simulation as ns  # noqa: E402

from oodcorr.stats import interval as I  # noqa: E402

RHO = np.linspace(-1, 1, 2001)
_seen: dict = {}
_base_bounds = I.disattenuated_bounds  # the current interval's bounds (the variant's fallback)


def _capture():
    """Record what partial_interval passes to z_dof (the last call: the alternative's moments) and fit_ar1 (the
    two residual noise covariances), so the variant's bounds can use them."""
    z_dof, fit_ar1 = I.z_dof, I.fit_ar1

    def z_dof_rec(M, Sa, Sb, Sab):
        _seen["z"] = (M, Sa, Sb, Sab)
        return z_dof(M, Sa, Sb, Sab)

    def fit_rec(e, M, V, phi_z=I.PHI_Z):
        _seen.setdefault("V", []).append(V)
        _seen["V"] = _seen["V"][-2:]
        return fit_ar1(e, M, V, phi_z)

    I.z_dof, I.fit_ar1 = z_dof_rec, fit_rec


def _pivot_moments(A):
    """From the moments partial_interval just used: the gradient products of the pivot's delta-method variance
    (g'Su, u'Su) and the attenuation with its second-order bias taken out (A_eff)."""
    M, Sa, Sb, Sab = _seen["z"]
    na, nb = (I._tr(M, V) for V in _seen["V"])
    A_, B_, C_ = M @ Sa @ M, M @ Sb @ M, M @ Sab @ M
    Ct = np.swapaxes(C_, -1, -2)
    va, vb, c = I._tr(M, A_), I._tr(M, B_), I._tr(M, C_)
    var_a, var_b, cov_ab = 2 * I._tr(A_, A_), 2 * I._tr(B_, B_), 2 * I._tr(C_, Ct)
    cov_ca, cov_cb = 2 * I._tr(A_, C_), 2 * I._tr(B_, Ct)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        r = c / np.sqrt(va * vb)
        g1, g2, g3 = 1 / ((1 - r**2) * np.sqrt(va * vb)), -r / (2 * va * (1 - r**2)), -r / (2 * vb * (1 - r**2))
        u2, u3 = na / (2 * va * (va - na)), nb / (2 * vb * (vb - nb))
        gu = g2 * u2 * var_a + g3 * u3 * var_b + g1 * u2 * cov_ca + g1 * u3 * cov_cb + (g2 * u3 + g3 * u2) * cov_ab
        uu = u2**2 * var_a + u3**2 * var_b + 2 * u2 * u3 * cov_ab
        bias = np.clip(
            -0.25
            * (
                na * (2 * va - na) / (va**2 * (va - na) ** 2) * var_a
                + nb * (2 * vb - nb) / (vb**2 * (vb - nb) ** 2) * var_b
            ),
            -5,
            0,
        )
        A_eff = np.fmin(A * np.exp(-bias), 1.0)
    return gu, uu, A_eff


def _pivot_var(v0, ra, gu, uu):
    """Delta-method variance of atanh(r_att) - atanh(ra) at ra = rho A (floored at a quarter of var(atanh r_att))."""
    w = ra / (1 - ra**2)
    return np.fmax(v0 - 2 * w * gu + w * w * uu, 0.25 * v0)


def pivot_bounds(r_att, A, se_z, alpha: float = 0.05):
    from scipy.stats import norm

    gu, uu, A_eff = _pivot_moments(A)
    z2, z1 = norm.ppf(1 - alpha / 2), norm.ppf(1 - alpha)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        z = np.arctanh(np.clip(r_att, -I.R_CLIP, I.R_CLIP))[..., None]
        ra = np.clip(RHO * A_eff[..., None], -I.R_CLIP, I.R_CLIP)
        t = (z - np.arctanh(ra)) / np.sqrt(_pivot_var((se_z**2)[..., None], ra, gu[..., None], uu[..., None]))

        def ends(acc):
            any_ = acc.any(-1)
            return (
                np.where(any_, RHO[acc.argmax(-1)], np.nan),
                np.where(any_, RHO[len(RHO) - 1 - acc[..., ::-1].argmax(-1)], np.nan),
            )

        lo2, hi2 = ends(np.abs(t) <= z2)
        one_lo, _ = ends(t <= z1)
        _, one_hi = ends(t >= -z1)
        up, down = (hi2 >= 1) & (lo2 > 0), (lo2 <= -1) & (hi2 < 0)
        lo, hi = np.where(up & ~down, one_lo, lo2), np.where(down & ~up, one_hi, hi2)
    base_lo, base_hi = _base_bounds(r_att, A, se_z, alpha)
    good = np.isfinite(lo) & np.isfinite(hi) & (hi > lo)
    return np.where(good, lo, base_lo), np.where(good, hi, base_hi)


def plugin_bounds(r_att, A, se_z, alpha: float = 0.05):
    """The current construction (Fisher interval of r_att, each end divided by the attenuation) with the pivot's
    variance evaluated once, at the estimate (rho A = r_att), and Â's bias removed: no inversion over rho."""
    gu, uu, A_eff = _pivot_moments(A)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        v = _pivot_var(se_z**2, np.clip(r_att, -I.R_CLIP, I.R_CLIP), gu, uu)
        se = np.where(np.isfinite(v), np.sqrt(v), se_z)
    return _base_bounds(r_att, A_eff, se, alpha)


VARIANTS = {"pivot": pivot_bounds, "plugin": plugin_bounds}


def small_sample_check(reps: int = 20000, seed: int = 0) -> list[dict]:
    """Where the interval's se of atanh(r) comes from, checked on Gaussian series with known parameters (AR(1)
    signals, innovation correlation rho, white item noise of variance `noise`, residualised on a fixed ID
    curve): the empirical SD of atanh(r) against interval.z_dof at the true parameters, with Fisher's
    small-sample "- 2" and without it."""
    from oodcorr.stats.simulate import _ar1_pair

    rng = np.random.default_rng(seed)
    out = []
    for n, rho, phi, noise in (
        (40, 0.8, 0.0, 0.3),
        (40, 0.0, 0.8, 0.4),
        (40, 0.8, 0.8, 0.4),
        (20, 0.8, 0.8, 0.4),
        (63, 0.8, 0.8, 0.4),
        (9, 0.8, 0.8, 0.4),
    ):
        D = _ar1_pair(reps, n, rho, phi, rng)
        M = I.residual_maker(1 - np.exp(-4 * np.linspace(0, 1, n)))
        ea, eb = ((D[..., j] + math.sqrt(noise) * rng.standard_normal((reps, n))) @ M for j in (0, 1))
        z = np.arctanh((ea * eb).sum(-1) / np.sqrt((ea * ea).sum(-1) * (eb * eb).sum(-1)))
        R = I.ar1_corr(phi, n)
        S = R + noise * np.eye(n)
        dof = max(I.z_dof(M, S, S, 0 * R), I.z_dof(M, S, S, rho * R))
        out.append(
            {
                "checkpoints": n,
                "rho": rho,
                "phi": phi,
                "noise": noise,
                "sd_empirical": float(z.std()),
                "sd_interval": float(1 / math.sqrt(dof)),
                "sd_without_small_sample_term": float(1 / math.sqrt(dof + 2)),
            }
        )
        print(json.dumps(out[-1]), flush=True)
    return out


DIAGNOSED_CELLS = (
    ("smooth", 40, 64, 0.8),
    ("smooth", 40, 64, 0.0),
    ("smooth", 40, 350, 0.8),
    ("smooth", 40, 350, 0.0),
    ("independent", 9, 128, 0.8),
    ("independent", 40, 350, 0.8),
)


def cell_diagnosis(reps: int = 1000) -> list[dict]:
    """Where the current interval's coverage departs from 95 %, on grid cells (same seeds as the grid): the
    replicates' empirical SD of atanh(r_att) and of the pivot atanh(r_att) - atanh(rho A_hat), the pivot's mean
    (0 if r_hat were unbiased on that scale), against the interval's se_z, also with the AR(1) phi fixed at the
    simulated value instead of estimated; and which side the misses fall on. For the accuracy designs also the
    SD of atanh of the OLS residual correlation over all replicates and over the defined ones (the interval is
    reported only where both reliabilities reach RELIABILITY_MIN), and z_dof's se at the simulated parameters
    (phi, signal variance tau^2, r; the item-noise covariance averaged over the cell's replicates), with and
    without Fisher's small-sample term."""
    import inspect

    from oodcorr.stats.partial import _corr_cols, residualise_linear
    from oodcorr.stats.simulate import design_runs

    tau = inspect.signature(design_runs).parameters["tau"].default

    fit_ar1 = I.fit_ar1

    def fit_true_phi(e, M, V, phi_z=I.PHI_Z):  # the simulated phi; s2 from the lag-0 equation as in fit_ar1
        phi = np.full(e.shape[:-1], true_phi)
        return phi, ((e * e).sum(-1) - I._tr(M, V)) / I._tr(M, I.ar1_corr(phi, e.shape[-1]))

    out = []
    for sc, n, k, rho in DIAGNOSED_CELLS:
        true_phi = ns.SCENARIOS[sc]["phi"]
        cols = {c: [] for c in ("r_hat", "A", "se_z", "ci_low", "ci_high", "se_z_true_phi", "z_obs", "V")}
        for ser, V in ns.cell_draws(sc, n, k, rho, reps, ns.cell_seed(sc, n, k, rho)):  # the grid's draws
            res = I.partial_interval(*ser, *V, reliability_min=ns.RELIABILITY_MIN)
            res["z_obs"] = np.arctanh(_corr_cols(residualise_linear(ser[0], np.stack(ser[1:], -1)))[:, 0, 1])
            res["V"] = np.stack(V[1:], 1)
            I.fit_ar1 = fit_true_phi
            try:
                res["se_z_true_phi"] = I.partial_interval(*ser, *V, reliability_min=ns.RELIABILITY_MIN)["se_z"]
            finally:
                I.fit_ar1 = fit_ar1
            for c in cols:
                cols[c].append(res[c])
        f = {c: np.concatenate(v) for c, v in cols.items()}
        ok = np.isfinite(f["ci_low"]) & np.isfinite(f["ci_high"])
        z = np.arctanh(np.clip(f["r_hat"] * f["A"], -I.R_CLIP, I.R_CLIP))[ok]
        pivot = z - np.arctanh(np.clip(rho * f["A"][ok], -I.R_CLIP, I.R_CLIP))
        truth = {}
        if ns.SCENARIOS[sc].get("metric", "accuracy") == "accuracy":
            Vm = f["V"].mean(0)
            M = I.residual_maker(1 - np.exp(-4 * np.linspace(0, 1, n)))  # the ID curve's shape (simulate)
            R = I.ar1_corr(true_phi, n)
            dof = I.z_dof(M, tau**2 * R + Vm[0], tau**2 * R + Vm[1], rho * tau**2 * R)
            truth = {
                "sd_atanh_r_obs_all": float(f["z_obs"].std()),
                "sd_atanh_r_obs_defined": float(f["z_obs"][ok].std()),
                "se_z_at_truth": float(1 / np.sqrt(dof)),
                "se_z_at_truth_without_small_sample_term": float(1 / np.sqrt(dof + 2)),
            }
        out.append(
            {
                "scenario": sc,
                "checkpoints": n,
                "items": k,
                "rho": rho,
                "defined": int(ok.sum()),
                **truth,
                "sd_atanh_r_att": float(z.std()),
                "sd_pivot": float(pivot.std()),
                "mean_pivot": float(pivot.mean()),
                "median_se_z": float(np.median(f["se_z"][ok])),
                "median_se_z_true_phi": float(np.nanmedian(f["se_z_true_phi"][ok])),
                "miss_low": float((f["ci_low"][ok] > rho).mean()),
                "miss_high": float((f["ci_high"][ok] < rho).mean()),
            }
        )
        print(json.dumps(out[-1]), flush=True)
    return out


def judge(cells: list) -> dict:
    """Band counts, and the cells outside it (or above 5 % false-distinguishable) by > 2 Monte Carlo SE."""
    cells = [c for c in cells if c["in_target"] is not None]
    se = [math.sqrt(0.95 * 0.05 / c["defined"]) for c in cells]
    return {
        "cells": len(cells),
        "in_band": sum(c["in_target"] for c in cells),
        "above": sum(c["coverage"] > ns.TARGET[1] for c in cells),
        "below": sum(c["coverage"] < ns.TARGET[0] for c in cells),
        "below_by_2se": sum(c["coverage"] < ns.TARGET[0] - 2 * s for c, s in zip(cells, se)),
        "above_by_2se": sum(c["coverage"] > ns.TARGET[1] + 2 * s for c, s in zip(cells, se)),
        "false_distinguishable_over_5pct_by_2se": sum(
            c["rho"] == 0 and c["rejects_zero"] > 0.05 + 2 * s for c, s in zip(cells, se)
        ),
        "lowest": min((c["coverage"] for c in cells), default=None),
        "highest": max((c["coverage"] for c in cells), default=None),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--variant", choices=list(VARIANTS), default="pivot")
    ap.add_argument("--scenarios", nargs="*", choices=list(ns.SCENARIOS), default=None)
    ap.add_argument(
        "--baseline",
        default=str(Path(__file__).parent / "results" / "noise_simulation.json"),
        help="the current interval's grid (bench/stats/noise_simulation.py --reps 1000)",
    )
    ap.add_argument(
        "--out",
        default=str(Path(__file__).parent / "results" / "interval_variants.json"),
        help="updated in place: the other variants' entries are kept",
    )
    ap.add_argument("--checks-only", action="store_true", help="recompute the two checks, no grid")
    args = ap.parse_args()
    out = Path(args.out)
    result = json.loads(out.read_text()) if out.exists() else {}
    if result.get("reps", args.reps) != args.reps:
        sys.exit(f"{out}: has --reps {result['reps']} results; pass --out for --reps {args.reps}")
    if args.checks_only:
        result.update(small_sample_check=small_sample_check(), cell_diagnosis=cell_diagnosis(args.reps))
        out.write_text(json.dumps(result, indent=2) + "\n")
        return
    _capture()
    I.disattenuated_bounds = VARIANTS[args.variant]
    grid = ns.interval_grid(args.reps, scenarios=args.scenarios)
    base = json.loads(Path(args.baseline).read_text())["interval_grid"]
    keys = {(c["scenario"], c["checkpoints"], c["items"], c["rho"]) for c in grid["cells"]}
    name = f"{args.variant}_variant"
    result.update(
        {
            "reps": args.reps,
            f"{name}_seconds": grid["seconds"],
            "current": judge(
                [c for c in base["cells"] if (c["scenario"], c["checkpoints"], c["items"], c["rho"]) in keys]
            ),
            name: judge(grid["cells"]),
            f"{name}_cells": [
                {k: c[k] for k in ("scenario", "checkpoints", "items", "rho", "coverage", "rejects_zero", "defined")}
                for c in grid["cells"]
            ],
        }
    )
    if "small_sample_check" not in result:
        result["small_sample_check"] = small_sample_check()
    if "cell_diagnosis" not in result:
        I.disattenuated_bounds = _base_bounds  # the current interval
        result["cell_diagnosis"] = cell_diagnosis(args.reps)
    for key in ("current", name):
        print(key, json.dumps(result[key]))
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
