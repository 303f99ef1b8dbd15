"""The planner's reliability gate against the interval's own: near analyze.reliability_min (0.5) the reliabilities
gp_interval fits scatter around the true one, so part of the families fall below the gate and give no verdict.
The planner predicts that share (gp_design.gate_pass) and counts those families as giving no verdict in its power;
here both are set beside simulated studies of the same design analysed with the interval and gated at 0.5
(planner/simulate.py with floor), at true reliabilities from below the gate to well above it.

  python bench/planner/plan_gate_check.py [--reps 60]     # writes bench/planner/results/plan_gate_check.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

OUT = ROOT / "bench" / "planner" / "results" / "plan_gate_check.json"
N, SEEDS, ELL, BETA, NOISE_ID, RHO, FLOOR = 17, 4, 0.2, 0.5, 1e-4, 0.5, 0.5
RELIABILITIES = (0.4, 0.5, 0.6, 0.75)


def main(argv=None) -> dict:
    import numpy as np

    from oodcorr.planner.budget import kernel_share, one_thread
    from oodcorr.planner.simulate import simulate_design
    from oodcorr.stats.gp_design import design_curve, design_terms

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=60)
    args = ap.parse_args(argv)
    cells = []
    for rel in RELIABILITIES:
        leak = BETA * BETA * NOISE_ID
        noise = kernel_share(N, ELL) * (1 - rel) / rel - leak  # signal variance 1: the residual's reliability is rel
        with one_thread():
            c = design_curve([design_terms(N, noise, noise, leak)], 1.0, 1.0, ELL, RHO, copies=[SEEDS], floor=FLOOR)
        sim = simulate_design(
            N, SEEDS, noise, NOISE_ID, 1.0, ELL, BETA, RHO, 0.3, args.reps, seed=int(rel * 100), floor=FLOOR
        )
        gate_sim = 1 - sim["gated"] / max(sim["reps"], 1)
        cells.append(
            {
                "reliability": rel,
                "noise": noise,
                "reps": sim["reps"],
                "predicted_gate": float(c["gate"][0]),
                "simulated_gate": gate_sim,
                "gate_se": math.sqrt(gate_sim * (1 - gate_sim) / max(sim["reps"], 1)),
                "predicted_power_ungated": float(c["power"][0]),
                "predicted_power": float(c["power"][0] * c["gate"][0]),
                "simulated_power": sim["excludes_0"],
                "power_se": sim["se"],
            }
        )
        print(json.dumps(cells[-1]), flush=True)
    result = {
        "checkpoints": N,
        "seeds": SEEDS,
        "ell": ELL,
        "rho": RHO,
        "floor": FLOOR,
        "cells": cells,
        "note": "simulated power counts a gated study as no verdict; np: " + np.__version__,
    }
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
