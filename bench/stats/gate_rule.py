"""Is a reliability gate at 0.5 the right rule? The likelihood interval on the grid's generator
(bench/stats/interval_grid.py:
its simulate, seeding and noise estimates) in the design real studies use (4 seeds, 17 checkpoints, 128 OOD and
ID items), with the signal SD scaled down so that the fitted reliabilities straddle 0.5 (chunks of 25 replicates
at SD factors 0.5, 0.65, 0.8 and 1.0 of the grid's calibrated SIGNAL_SD).

Per replicate: the fitted reliabilities (rel_a, rel_b), whether the interval covers rho and whether it excludes 0.
Per dependence and rho, binned by the lower of the two reliabilities: coverage and the share excluding 0 (false
positives at rho = 0, power at rho > 0) with Monte Carlo SEs. A softer gate is sound only where the bins below 0.5
keep coverage and false positives. Writes bench/stats/results/gate_rule.json; `--table` prints the table from it.

    python bench/stats/gate_rule.py --reps 200 [--dependence gp0.2 ar0.8 iid] [--rho 0 0.5]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from interval_grid import ALPHA, SIGNAL_SD, cell_key, cell_rngs, replicate_seeds, simulate  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "gate_rule.json"
SD_FACTORS = (0.5, 0.65, 0.8, 1.0)  # per chunk, in turn
BINS = (-math.inf, 0.3, 0.4, 0.5, math.inf)
DESIGN = {"seeds": 4, "checkpoints": 17, "id_items": 128}


def run(dep: str, rho: float, reps: int) -> dict:
    from oodcorr.stats.gp_interval import gp_interval

    cell = {
        "variant": "gate",
        "dependence": dep,
        "id_items": DESIGN["id_items"],
        "seeds": DESIGN["seeds"],
        "checkpoints": DESIGN["checkpoints"],
        "rho": rho,
    }
    rows = []
    for i, (size, rng) in enumerate(cell_rngs(cell_key(cell), reps)):
        sd = SIGNAL_SD[dep] * SD_FACTORS[i % len(SD_FACTORS)]
        d = simulate(cell, size, rng, signal_sd=sd)
        R, S, _ = d["series"]["x"].shape
        for r in range(R):
            seeds = replicate_seeds(d, r, "Vs")
            res = gp_interval(seeds, alpha=ALPHA)
            rows.append((res["r_hat"], res["ci_low"], res["ci_high"], res["rel_a"], res["rel_b"]))
    return {"key": cell_key(cell), **cell, "reps": reps, "rows": [[round(v, 5) for v in row] for row in rows]}


def bins(cell: dict) -> list[dict]:
    arr = np.array(cell["rows"], float)
    lo, hi, rel = arr[:, 1], arr[:, 2], np.minimum(arr[:, 3], arr[:, 4])
    ok = np.isfinite(lo) & np.isfinite(hi) & np.isfinite(rel)
    out = []
    for a, b in zip(BINS[:-1], BINS[1:]):
        m = ok & (rel >= a) & (rel < b)
        n = int(m.sum())
        cov = float(np.mean((lo[m] <= cell["rho"]) & (cell["rho"] <= hi[m]))) if n else math.nan
        exc = float(np.mean((lo[m] > 0) | (hi[m] < 0))) if n else math.nan
        out.append(
            {
                "bin": [a, b],
                "n": n,
                "coverage": cov,
                "coverage_se": math.sqrt(cov * (1 - cov) / n) if n else math.nan,
                "excludes_0": exc,
                "excludes_0_se": math.sqrt(exc * (1 - exc) / n) if n else math.nan,
                "median_width": float(np.median(hi[m] - lo[m])) if n else math.nan,
            }
        )
    return out


def table(path: Path = OUT) -> str:
    data = json.loads(path.read_text())
    lines = [
        "| dependence | ρ | lower reliability | replicates | coverage ± MC SE | excludes 0 ± MC SE | median width |",
        "|---|---|---|---|---|---|---|",
    ]
    for cell in data["cells"]:
        for b in bins(cell):
            a, z = b["bin"]
            name = f"< {z:g}" if a == -math.inf else (f"≥ {a:g}" if z == math.inf else f"{a:g}–{z:g}")
            if not b["n"]:
                continue
            lines.append(
                f"| {cell['dependence']} | {cell['rho']:g} | {name} | {b['n']} | {b['coverage']:.3f} ± "
                f"{b['coverage_se']:.3f} | {b['excludes_0']:.3f} ± {b['excludes_0_se']:.3f} "
                f"| {b['median_width']:.2f} |"
            )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--dependence", nargs="*", default=["gp0.2", "ar0.8", "iid"])
    ap.add_argument("--rho", nargs="*", type=float, default=[0.0, 0.5])
    ap.add_argument("--table", action="store_true")
    args = ap.parse_args(argv)
    if args.table:
        sys.stdout.write(table())
        return 0
    cells = json.loads(OUT.read_text())["cells"] if OUT.exists() else []
    for dep in args.dependence:
        for rho in args.rho:
            t0 = time.time()
            cell = run(dep, rho, args.reps)
            cell["seconds"] = round(time.time() - t0)
            cells = [c for c in cells if c["key"] != cell["key"]] + [cell]
            OUT.write_text(json.dumps({"design": DESIGN, "sd_factors": SD_FACTORS, "cells": cells}) + "\n")
            print(cell["key"], cell["seconds"], "s", json.dumps(bins(cell)), flush=True)
    sys.stdout.write(table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
