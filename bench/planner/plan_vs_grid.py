"""`oodcorr plan`'s predicted power against the independent grid's simulated power (bench/stats/interval_grid.py).

The grid's generator is not the planner's model: item-response testsets, squared-exponential, AR(1) or
independent trajectories, a noisy ID learning curve. For each of its base cells with r != 0 the planner is given
what the interval reported there, as a user plans from a pilot: the effective number of independent checkpoints
per seed (the cells' median n_eff / seeds, turned into the Matern length-scale that gives it) and the mean
reliabilities of the two residual trajectories (turned into item noise per unit signal variance). Its power for
the cell's seeds and r (gp_design.design_power) is set against the share of the cell's replicates whose interval
excluded 0. No simulation runs here; the grid has 60 replicates a cell (Monte Carlo SE about 0.06).

  python bench/planner/plan_vs_grid.py              # writes bench/planner/results/plan_vs_grid.json
  python bench/planner/plan_vs_grid.py --markdown   # the table in docs/statistics-reference.md
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from oodcorr.planner.budget import kernel_share, one_thread  # noqa: E402
from oodcorr.stats.gp_design import design_power, design_terms  # noqa: E402
from oodcorr.stats.gp_interval import n_eff_of  # noqa: E402
from oodcorr.stats.gp_model import KERNEL  # noqa: E402

GRID = ROOT / "bench" / "stats" / "results" / "interval_grid.json"
OUT = ROOT / "bench" / "planner" / "results" / "plan_vs_grid.json"
DEPENDENCE = ("gp0.1", "gp0.2", "ar0.5", "ar0.8", "iid")


def matern_ell(n: int, n_eff: float) -> float | None:
    """The length-scale at which one seed of n checkpoints carries n_eff effectively independent checkpoints."""
    from scipy.optimize import brentq

    s = design_terms(n, 1.0, 1.0)
    f = lambda le: n_eff_of(s, math.exp(le), KERNEL) - n_eff  # noqa: E731
    try:
        return math.exp(brentq(f, math.log(0.005), math.log(3.0)))
    except ValueError:
        return None


def predict(cell: dict) -> dict | None:
    new = cell.get("new") or {}
    n, seeds, rel = cell["checkpoints"], cell["seeds"], (new.get("mean_rel_a"), new.get("mean_rel_b"))
    if new.get("power") is None or not new.get("median_n_eff") or not all(r and 0 < r < 1 for r in rel):
        return None
    ell = matern_ell(n, new["median_n_eff"] / seeds)
    if ell is None:
        return None
    k = kernel_share(n, ell)
    terms = design_terms(n, k * (1 - rel[0]) / rel[0], k * (1 - rel[1]) / rel[1])
    return {
        "key": cell["key"],
        "dependence": cell["dependence"],
        "id_items": cell["id_items"],
        "seeds": seeds,
        "checkpoints": n,
        "rho": cell["rho"],
        "n_eff_per_seed": new["median_n_eff"] / seeds,
        "ell": ell,
        "rel_a": rel[0],
        "rel_b": rel[1],
        "predicted": design_power([terms], 1.0, 1.0, ell, cell["rho"], copies=seeds),
        "simulated": new["power"],
        "replicates": new["replicates"],
    }


def summary(rows: list[dict]) -> list[dict]:
    out = []
    for dep in DEPENDENCE:
        for one in (True, False):
            r = [x for x in rows if x["dependence"] == dep and (x["seeds"] == 1) == one]
            if not r:
                continue
            err = np.array([x["predicted"] - x["simulated"] for x in r])
            mc = np.array([x["simulated"] * (1 - x["simulated"]) / x["replicates"] for x in r])
            out.append(
                {
                    "dependence": dep,
                    "seeds": "1" if one else "3, 5",
                    "cells": len(r),
                    "predicted": float(np.mean([x["predicted"] for x in r])),
                    "simulated": float(np.mean([x["simulated"] for x in r])),
                    "mean_error": float(err.mean()),
                    "mean_error_se": float(math.sqrt(mc.sum()) / len(r)),
                    "rms_error": float(math.sqrt((err**2).mean())),
                    "rms_mc": float(math.sqrt(mc.mean())),
                }
            )
    return out


def markdown(result: dict) -> str:
    lines = [
        "| trajectories | seeds | cells | mean power: predicted | simulated | mean error | rms error "
        "| of which Monte Carlo |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in result["summary"]:
        lines.append(
            f"| {s['dependence']} | {s['seeds']} | {s['cells']} | {s['predicted']:.2f} | "
            f"{s['simulated']:.2f} | {s['mean_error']:+.3f} ± {s['mean_error_se']:.3f} | "
            f"{s['rms_error']:.3f} | {s['rms_mc']:.3f} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="print the docs' table from the results file")
    args = ap.parse_args()
    if args.markdown:
        print(markdown(json.loads(OUT.read_text())))
        return
    grid = json.loads(GRID.read_text())
    with one_thread():
        rows = [p for c in grid["cells"] if c["variant"] == "base" and c["rho"] and (p := predict(c))]
    result = {"grid": str(GRID.relative_to(ROOT)), "rows": rows, "summary": summary(rows)}
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(markdown(result))


if __name__ == "__main__":
    main()
