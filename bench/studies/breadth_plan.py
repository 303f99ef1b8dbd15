"""What the planner expects studies/breadth to settle, at its own design (2 families x 4 seeds x 17 checkpoints,
MNLI dev 512 items, 64 chosen items per pilot testset), planned from the pilot two ways:

  all      studies/pilot as saved (its 128 random items per testset, priced at 64): what 64 random items give;
  chosen   studies/pilot restricted to the 64 items select-items chose (bench/studies/restrict_pilot.py): in-sample,
           so it overstates the chosen items' reliability on new runs (item_selection.py measures by how much).

SICK (random 128 items, not in the pilot) cannot be planned from it and is left out of both: its pairs are extra.
The hours: training and scoring CPU time at the rates measured for studies/sick (11-12 CPU-minutes of training a
run, about 10 examples per CPU-second), plus the pilot's 4.5 CPU-hours.

  python bench/studies/restrict_pilot.py studies/pilot studies/breadth/items.json /tmp/pilot-chosen
  python bench/studies/breadth_plan.py [--chosen-pilot /tmp/pilot-chosen]   # writes results/breadth_plan.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

OUT = Path(__file__).parent / "results" / "breadth_plan.json"
PILOT_CPU_HOURS = 4.5  # docs/benchmarks.md: the pilot (2 runs) that sized twofamily
TRAIN_CPU_H, EXAMPLES_PER_CPU_S = 0.2, 10.0  # studies/sick's measured rates (docs/benchmarks.md)


def plan_from(path: Path, d: dict, hours: float, s) -> dict:
    """The planner's expected settled pairs at design `d`, its model measured on the pilot at `path`."""
    from oodcorr.planner.budget import one_thread
    from oodcorr.planner.pilot import pilot_model
    from oodcorr.planner.settle import expected_settled

    with one_thread():
        m = pilot_model([path], "balanced_margin")
    names = sorted(m["ood"])
    model = {**m, "ood": {n: {**m["ood"][n], "size": d["ood_items"]} for n in names}}
    design = {k: d[k] for k in ("checkpoints", "seeds", "ood_items", "id_items")} | {"hours": hours}
    with one_thread():
        st = expected_settled(model, design, names, d["families"], s.equivalence, s.alpha, 0.5, s.reliability_min)
    total = hours + PILOT_CPU_HOURS
    return {
        "pairs": st["pairs"],
        "expected_if_r05": round(st["if_r"], 2),
        "expected_if_0": round(st["if_0"], 2),
        "cpu_h_per_settled_if_r05": round(total / st["if_r"], 2) if st["if_r"] > 0 else None,
        "per_pair": st["per_pair"],
        "ell": m["ell"],
        "beta": m["beta"],
    }


def main() -> dict:
    from oodcorr.settings.analyze import AnalyzeSettings
    from oodcorr.settings.config import load_params

    ap = argparse.ArgumentParser()
    ap.add_argument("--chosen-pilot", default="/tmp/pilot-chosen")
    a = ap.parse_args()
    params = load_params(ROOT / "studies" / "breadth" / "params.yaml")
    s = AnalyzeSettings.from_params(params)
    seeds, families, checkpoints, id_items, ood_items = 4, 2, 17, 512, 64
    items_per_run = (id_items + 7 * ood_items + 128) * checkpoints  # + SICK's 128
    run_h = TRAIN_CPU_H + items_per_run / EXAMPLES_PER_CPU_S / 3600
    hours = seeds * families * run_h
    out = {
        "design": {
            "families": families,
            "seeds": seeds,
            "checkpoints": checkpoints,
            "id_items": id_items,
            "ood_items": ood_items,
            "items_scored_per_run": items_per_run,
        },
        "cpu_hours": {
            "per_run": round(run_h, 3),
            "runs": round(hours, 2),
            "pilot": PILOT_CPU_HOURS,
            "total": round(hours + PILOT_CPU_HOURS, 2),
        },
        "planned": {},
    }
    for label, path in (("all", ROOT / "studies" / "pilot"), ("chosen", Path(a.chosen_pilot))):
        out["planned"][label] = plan_from(path, out["design"], hours, s)
        print(label, json.dumps({k: v for k, v in out["planned"][label].items() if k != "per_pair"}), flush=True)
    print(json.dumps(out["cpu_hours"]))
    OUT.write_text(json.dumps(out, indent=1, default=str) + "\n")
    return out


if __name__ == "__main__":
    main()
