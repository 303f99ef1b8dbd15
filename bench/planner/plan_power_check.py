"""`oodcorr plan --budget`'s predicted power vs the interval's simulated rejection rate, on data drawn from the model.

Each cell: `seeds` runs of n checkpoints; per run the two OOD residual signals are a bivariate Gaussian process
(the interval's kernel, Matern 3/2, length-scale ell, unit signal variance, correlation rho), each OOD series
adds white item noise at the stated reliability and the ID series (a saturating trend, slope 0.5 into both OOD series)
adds its own (ID items = 2 x OOD items). gp_interval pools the seeds; the planner's numbers are
plan_budget's: design_curve (power to exclude 0 at the cell's rho, 0.5 at rho = 0) and the consistent-null
probability (both ends inside +/- margin at rho = 0), from design_terms with the ID noise as leak. The studies are
plan_simulate's (simulate_design), with this check's ID curve.

  python bench/planner/plan_power_check.py --reps 100          # writes bench/planner/results/plan_power_check.json
  python bench/planner/plan_power_check.py --reps 100 --cells 5 6 --seed 5   # reruns those cells, keeps the others
  python bench/planner/plan_power_check.py --reps 400 --cells 0 --seed 7 --pool   # 400 more replicates of cell 0
  python bench/planner/plan_power_check.py --predict            # the planner's columns again, simulations kept
  python bench/planner/plan_power_check.py --markdown           # the table in docs/statistics-reference.md
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from oodcorr.planner import simulate as simulate  # noqa: E402
from oodcorr.planner.budget import _curve, kernel_share, one_thread  # noqa: E402
from oodcorr.stats.gp_design import design_curve, design_terms  # noqa: E402
from oodcorr.stats.gp_model import KERNEL  # noqa: E402

OUT = ROOT / "bench" / "planner" / "results" / "plan_power_check.json"
BETA = 0.5
MARGIN = 0.3
# (name, ell, checkpoints, seeds, reliability of each OOD trajectory, rho)
CELLS = [
    ("smooth, 9 checkpoints", 0.4, 9, 14, 0.7, 0.5),
    ("smooth, 20 checkpoints", 0.4, 20, 10, 0.7, 0.5),
    ("rougher, 20 checkpoints", 0.1, 20, 6, 0.7, 0.5),
    ("rougher, null", 0.1, 20, 10, 0.9, 0.0),
    ("smooth, null", 0.4, 20, 15, 0.9, 0.0),
    ("smooth, 9 checkpoints, r 0.8", 0.4, 9, 5, 0.7, 0.8),
    ("smooth, 20 checkpoints, r 0.8", 0.4, 20, 4, 0.7, 0.8),
    ("mid, 20 checkpoints", 0.2, 20, 8, 0.7, 0.5),
    ("mid, 40 checkpoints, r 0.8", 0.2, 40, 3, 0.7, 0.8),
    ("mid, 9 checkpoints, r 0.8", 0.2, 9, 5, 0.7, 0.8),
    ("rougher, 40 checkpoints", 0.1, 40, 4, 0.7, 0.5),
    ("mid, 1 seed, 40 checkpoints, r 0.8", 0.2, 40, 1, 0.7, 0.8),
]


def predict(ell, n, seeds, rel, rho) -> tuple[float, float, float, float]:
    """The planner's numbers for a cell: (power, consistent null, item noise, ID item noise)."""
    k = kernel_share(n, ell)
    noise = k * (1 - rel) / rel  # the reliability of a residual trajectory, as gp_interval reports it
    noise_id = noise / 2
    power, null = _curve(n, noise, BETA * BETA * noise_id, 1.0, ell, MARGIN, 0.05, np.array([seeds]))
    if rho:  # the power at the cell's own r (the planner's headline is at r = 0.5)
        power = design_curve(
            [design_terms(n, noise, noise, BETA * BETA * noise_id)], 1.0, 1.0, ell, rho, copies=[seeds]
        )["power"]
    return float(power[0]), float(null[0]), noise, noise_id


def run_cell(name, ell, n, seeds, rel, rho, reps, rng) -> dict:
    power, null, noise, noise_id = predict(ell, n, seeds, rel, rho)
    t0 = time.time()
    x0 = 0.55 + 0.3 * (1 - np.exp(-4 * np.linspace(0.0, 1.0, n)))  # this check's ID curve
    sim = simulate.simulate_design(n, seeds, noise, noise_id, 1.0, ell, BETA, rho, MARGIN, reps, seed=rng, x0=x0)
    return {
        "cell": name,
        "ell": ell,
        "checkpoints": n,
        "seeds": seeds,
        "reliability": rel,
        "rho": rho,
        "reps": sim["reps"],
        "predicted_power": power,
        "simulated_exclusion": sim["excludes_0"],
        "se": sim["se"],
        "predicted_consistent_null": null,
        "simulated_consistent_null": sim["consistent_null"],
        "seconds": round(time.time() - t0, 1),
    }


def pooled(old: dict, new: dict) -> dict:
    """A cell's replicates from two runs (different seeds) as one: rates weighted by replicates, seeds listed."""
    n = old["reps"] + new["reps"]
    out = dict(
        new,
        reps=n,
        seconds=round(old["seconds"] + new["seconds"], 1),
        seed=[*(old["seed"] if isinstance(old["seed"], list) else [old["seed"]]), new["seed"]],
    )
    for k in ("simulated_exclusion", "simulated_consistent_null"):
        out[k] = (old[k] * old["reps"] + new[k] * new["reps"]) / n
    p = out["simulated_exclusion"]
    out["se"] = math.sqrt(p * (1 - p) / n)
    return out


def markdown(result: dict) -> str:
    """The docs' table (docs/statistics-reference.md) from a results file's contents."""
    lines = [
        "| curves | length-scale | checkpoints | seeds | reliability | r | excludes 0: predicted | simulated "
        "| consistent null: predicted | simulated | replicates |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in result["cells"]:
        sn = math.sqrt(c["simulated_consistent_null"] * (1 - c["simulated_consistent_null"]) / max(c["reps"], 1))
        pred = f"{c['predicted_power']:.2f}" if c["rho"] else "0.05 (α)"  # at r = 0: the false-exclusion rate
        lines.append(
            f"| {c['cell']} | {c['ell']:g} | {c['checkpoints']} | {c['seeds']} | {c['reliability']:g} | "
            f"{c['rho']:g} | {pred} | {c['simulated_exclusion']:.2f} ± {c['se']:.2f} | "
            f"{c['predicted_consistent_null']:.2f} | {c['simulated_consistent_null']:.2f} ± {sn:.2f} | "
            f"{c['reps']} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--cells", type=int, nargs="*", help="indices into CELLS (default: all)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--seed", type=int, default=20261203)
    ap.add_argument("--markdown", action="store_true", help="print the docs' table from --out and stop")
    ap.add_argument(
        "--pool",
        action="store_true",
        help="add the cells' new replicates to those in --out (a new --seed) instead of replacing them",
    )
    ap.add_argument(
        "--predict",
        action="store_true",
        help="recompute the planner's columns of --out's cells (the simulations are kept) and stop",
    )
    args = ap.parse_args()
    if args.markdown:
        print(markdown(json.loads(args.out.read_text())))
        return
    if args.predict:
        result = json.loads(args.out.read_text())
        for c in result["cells"]:
            c["predicted_power"], c["predicted_consistent_null"], *_ = predict(
                c["ell"], c["checkpoints"], c["seeds"], c["reliability"], c["rho"]
            )
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(markdown(result))
        return
    rng = np.random.default_rng(args.seed)
    # the cells run now replace theirs in --out; the others are kept (each row records its own seed)
    kept = json.loads(args.out.read_text())["cells"] if args.out.exists() else []
    order = [c[0] for c in CELLS]
    with one_thread():
        for i in args.cells if args.cells is not None else range(len(CELLS)):
            row = {**run_cell(*CELLS[i], args.reps, rng), "seed": args.seed}
            old = next((c for c in kept if c["cell"] == row["cell"]), None)
            if args.pool and old:
                row = pooled(old, row)
            kept = sorted(
                [c for c in kept if c["cell"] != row["cell"] and c["cell"] in order] + [row],
                key=lambda c: order.index(c["cell"]),
            )
            print(json.dumps(row), flush=True)
            args.out.write_text(
                json.dumps({"margin": MARGIN, "beta": BETA, "kernel": KERNEL, "cells": kept}, indent=2) + "\n"
            )


if __name__ == "__main__":
    main()
