"""An alternative to the noise-corrected interval, measured on the same grid and not adopted.

The interval (oodcorr.analysis.interval) is the Fisher interval of the attenuated correlation divided by the
estimated attenuation A = sqrt(rel_a rel_b), treating A as known. The grid (bench/noise_simulation.py) shows it
conservative at r = 0.8 with smooth trajectories. The variant tried here inverts the pivot
atanh(r_att) - atanh(rho A_hat) instead, with the delta-method variance of that pivot (A_hat's error is
correlated with r_att's) and A_hat's second-order bias taken out:

    var(rho) = var(atanh r_att) - 2 w g'Su + w^2 u'Su,   w = rho A / (1 - rho^2 A^2)

g, u the gradients of atanh(c / sqrt(v_a v_b)) and log A(v_a, v_b) over the residual quadratic forms
(c, v_a, v_b), S their covariance under the interval's own fitted model (interval.z_dof's moments). The interval
is {rho : |atanh(r_att) - atanh(rho A_eff)| <= 1.96 sd(rho)}, one-sided at +-1 exactly where the current one is.

It runs the grid of bench/noise_simulation.py (same seeds, same cells) with the variant swapped in, and reports
for both: cells in 0.93-0.97, cells outside the band by more than two Monte Carlo standard errors (each side),
false-distinguishable rate at r = 0 above 5 % by more than two standard errors. A second check (small_sample_check)
compares the interval's standard error of atanh(r) with simulation at known parameters.
Writes bench/results/interval_variants.json. Usage: python bench/interval_variants.py [--reps 1000]
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

from oodcorr.analysis import interval as I  # noqa: E402

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


def pivot_bounds(r_att, A, se_z, alpha: float = 0.05):
    from scipy.stats import norm

    M, Sa, Sb, Sab = _seen["z"]
    na, nb = (I._tr(M, V) for V in _seen["V"])
    A_, B_, C_ = M @ Sa @ M, M @ Sb @ M, M @ Sab @ M
    Ct = np.swapaxes(C_, -1, -2)
    va, vb, c = I._tr(M, A_), I._tr(M, B_), I._tr(M, C_)
    var_a, var_b, cov_ab = 2 * I._tr(A_, A_), 2 * I._tr(B_, B_), 2 * I._tr(C_, Ct)
    cov_ca, cov_cb = 2 * I._tr(A_, C_), 2 * I._tr(B_, Ct)
    z2, z1 = norm.ppf(1 - alpha / 2), norm.ppf(1 - alpha)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        r = c / np.sqrt(va * vb)
        g1, g2, g3 = 1 / ((1 - r**2) * np.sqrt(va * vb)), -r / (2 * va * (1 - r**2)), -r / (2 * vb * (1 - r**2))
        u2, u3 = na / (2 * va * (va - na)), nb / (2 * vb * (vb - nb))
        gu = (g2 * u2 * var_a + g3 * u3 * var_b + g1 * u2 * cov_ca + g1 * u3 * cov_cb + (g2 * u3 + g3 * u2) * cov_ab)
        uu = u2**2 * var_a + u3**2 * var_b + 2 * u2 * u3 * cov_ab
        bias = np.clip(-0.25 * (na * (2 * va - na) / (va**2 * (va - na) ** 2) * var_a
                                + nb * (2 * vb - nb) / (vb**2 * (vb - nb) ** 2) * var_b), -5, 0)
        A_eff = np.fmin(A * np.exp(-bias), 1.0)
        z = np.arctanh(np.clip(r_att, -I.R_CLIP, I.R_CLIP))[..., None]
        ra = np.clip(RHO * A_eff[..., None], -I.R_CLIP, I.R_CLIP)
        w = ra / (1 - ra**2)
        v0 = (se_z**2)[..., None]
        t = (z - np.arctanh(ra)) / np.sqrt(np.fmax(v0 - 2 * w * gu[..., None] + w * w * uu[..., None], 0.25 * v0))

        def ends(acc):
            any_ = acc.any(-1)
            return (np.where(any_, RHO[acc.argmax(-1)], np.nan),
                    np.where(any_, RHO[len(RHO) - 1 - acc[..., ::-1].argmax(-1)], np.nan))

        lo2, hi2 = ends(np.abs(t) <= z2)
        one_lo, _ = ends(t <= z1)
        _, one_hi = ends(t >= -z1)
        up, down = (hi2 >= 1) & (lo2 > 0), (lo2 <= -1) & (hi2 < 0)
        lo, hi = np.where(up & ~down, one_lo, lo2), np.where(down & ~up, one_hi, hi2)
    base_lo, base_hi = _base_bounds(r_att, A, se_z, alpha)
    good = np.isfinite(lo) & np.isfinite(hi) & (hi > lo)
    return np.where(good, lo, base_lo), np.where(good, hi, base_hi)


def small_sample_check(reps: int = 20000, seed: int = 0) -> list[dict]:
    """Where the interval's se of atanh(r) comes from, checked on Gaussian series with known parameters (AR(1)
    signals, innovation correlation rho, white item noise of variance `noise`, residualised on a fixed ID
    curve): the empirical SD of atanh(r) against interval.z_dof at the true parameters, with Fisher's
    small-sample "- 2" and without it."""
    from oodcorr.analysis.simulate import _ar1_pair

    rng = np.random.default_rng(seed)
    out = []
    for n, rho, phi, noise in ((40, 0.8, 0.0, 0.3), (40, 0.0, 0.8, 0.4), (40, 0.8, 0.8, 0.4), (20, 0.8, 0.8, 0.4),
                               (63, 0.8, 0.8, 0.4), (9, 0.8, 0.8, 0.4)):
        D = _ar1_pair(reps, n, rho, phi, rng)
        M = I.residual_maker(1 - np.exp(-4 * np.linspace(0, 1, n)))
        ea, eb = ((D[..., j] + math.sqrt(noise) * rng.standard_normal((reps, n))) @ M for j in (0, 1))
        z = np.arctanh((ea * eb).sum(-1) / np.sqrt((ea * ea).sum(-1) * (eb * eb).sum(-1)))
        R = I.ar1_corr(phi, n)
        S = R + noise * np.eye(n)
        dof = max(I.z_dof(M, S, S, 0 * R), I.z_dof(M, S, S, rho * R))
        out.append({"checkpoints": n, "rho": rho, "phi": phi, "noise": noise, "sd_empirical": float(z.std()),
                    "sd_interval": float(1 / math.sqrt(dof)), "sd_without_small_sample_term": float(1 / math.sqrt(dof + 2))})
        print(json.dumps(out[-1]), flush=True)
    return out


def judge(cells: list) -> dict:
    """Band counts, and the cells outside it (or above 5 % false-distinguishable) by > 2 Monte Carlo SE."""
    cells = [c for c in cells if c["in_target"] is not None]
    se = [math.sqrt(0.95 * 0.05 / c["defined"]) for c in cells]
    return {"cells": len(cells), "in_band": sum(c["in_target"] for c in cells),
            "above": sum(c["coverage"] > ns.TARGET[1] for c in cells),
            "below": sum(c["coverage"] < ns.TARGET[0] for c in cells),
            "below_by_2se": sum(c["coverage"] < ns.TARGET[0] - 2 * s for c, s in zip(cells, se)),
            "above_by_2se": sum(c["coverage"] > ns.TARGET[1] + 2 * s for c, s in zip(cells, se)),
            "false_distinguishable_over_5pct_by_2se": sum(c["rho"] == 0 and c["rejects_zero"] > 0.05 + 2 * s
                                                          for c, s in zip(cells, se)),
            "lowest": min(c["coverage"] for c in cells), "highest": max(c["coverage"] for c in cells)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--scenarios", nargs="*", choices=list(ns.SCENARIOS), default=None)
    ap.add_argument("--baseline", default=str(Path(__file__).parent / "results" / "noise_simulation.json"),
                    help="the current interval's grid (bench/noise_simulation.py --reps 1000)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "interval_variants.json"))
    args = ap.parse_args()
    _capture()
    I.disattenuated_bounds = pivot_bounds
    grid = ns.interval_grid(args.reps, scenarios=args.scenarios)
    base = json.loads(Path(args.baseline).read_text())["interval_grid"]
    keys = {(c["scenario"], c["checkpoints"], c["items"], c["rho"]) for c in grid["cells"]}
    result = {"reps": args.reps, "seconds": grid["seconds"],
              "current": judge([c for c in base["cells"] if (c["scenario"], c["checkpoints"], c["items"], c["rho"]) in keys]),
              "pivot_variant": judge(grid["cells"]),
              "small_sample_check": small_sample_check(),
              "pivot_variant_cells": [{k: c[k] for k in ("scenario", "checkpoints", "items", "rho", "coverage",
                                                        "rejects_zero", "defined")} for c in grid["cells"]]}
    for name in ("current", "pivot_variant"):
        print(name, json.dumps(result[name]))
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
