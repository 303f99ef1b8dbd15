"""The breadth study's testsets on its own runs (none of them in the pilot): split-half reliability of each
testset's ID-residual trajectory, per finished run, beside what the pilot read.

For every run of PROJECT (a study project such as /work/breadth-project) whose eval/predictions hold all its
checkpoints, the reliability of balanced_margin's residual on the MNLI series (linear, as the analysis computes
it: oodcorr.stats.noise.reliability, 100 stratified splits) for each OOD testset: the 64 items data/items.json
chose from studies/pilot (seed 0 of each family) read on a new seed, so regression to the mean shows, or SICK's
random 128. Beside it, from the pilot (docs/studies.md's table): the 128 random items it scored and the chosen
64 in-sample.

  python bench/studies/breadth_reliability.py PROJECT [CLONE ...]
writes bench/studies/results/breadth_reliability.json (one row per run and testset).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import yaml

NEEDS_ARGS = "a study PROJECT (the breadth study's runs)"  # bench/run.py runs it only with --only

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from oodcorr.records.predictions import GOLD, load_run_items  # noqa: E402
from oodcorr.stats.aggregate import values  # noqa: E402
from oodcorr.stats.noise import reliability  # noqa: E402

METRIC = "balanced_margin"
SPLITS = 100
# studies/pilot (seed 0): reliability of all 128 random items, and of the 64 chosen on the pilot itself
# (docs/studies.md, the breadth table), Gemma / SmolLM2
PILOT = {
    "snli_real": ((0.77, 0.92), (0.96, 0.98)),
    "scitail_real": ((0.78, 0.69), (0.95, 0.86)),
    "wnli_real": ((0.68, 0.56), (0.97, 0.94)),
    "paws_qqp_real": ((0.43, -0.24), (0.97, 0.94)),
    "anli_r1_real": ((0.34, -1.00), (0.89, 0.88)),
    "rte_real": ((0.21, 0.42), (0.93, 0.95)),
    "hans_real": ((-0.58, 0.32), (0.75, 0.90)),
}
FAMILY_COLUMN = {"gemma3-270m": 0, "smollm2-135m": 1}


def finished_runs(project: Path, params: dict) -> list[tuple[str, dict]]:
    """(key, settings) of the runs whose predictions hold every checkpoint of the recipe."""
    every = params["train"]["checkpoints"]["every"]
    steps = list(range(0, params["train"]["max_steps"] + 1, every))
    out = []
    for key, run in params["runs"].items():
        pred = project / "runs" / key / "eval" / "predictions"
        if (
            all((pred / f"step-{s}").is_dir() for s in steps)
            and (project / "runs" / key / "eval" / "metrics.jsonl").is_file()
        ):
            out.append((key, run | {"steps": steps}))
    return out


def rows(project: Path) -> list[dict]:
    params = yaml.safe_load((project / "params.yaml").read_text())
    ood = [t for t in params["evaluate"]["testsets"] if t != "mnli_real"]
    out = []
    for key, run in finished_runs(project, params):
        got = load_run_items(key, project / "runs" / key / "eval", run["steps"], ["mnli_real", *ood], (METRIC,))
        x = values("balanced", got[METRIC]["mnli_real"], got[GOLD]["mnli_real"])
        col = FAMILY_COLUMN[run["model"]]
        for t in ood:
            r, flag = reliability(
                got[METRIC][t], x, "linear", SPLITS, np.random.default_rng(0), gold=got[GOLD][t], aggregate="balanced"
            )
            pilot = PILOT.get(t)
            out.append(
                {
                    "run": key,
                    "model": run["model"],
                    "seed": run["seed"],
                    "testset": t,
                    "items": int(got[GOLD][t].size),
                    "reliability": round(float(r), 3),
                    "flag": flag,
                    "pilot_128_random": pilot[0][col] if pilot else None,
                    "pilot_64_chosen_in_sample": pilot[1][col] if pilot else None,
                }
            )
            print(json.dumps(out[-1]), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("project", type=Path, nargs="+", help="the study's project, and any parallel clone of it")
    a = ap.parse_args()
    found = [r for p in a.project for r in rows(p)]
    res = {
        "projects": [str(p) for p in a.project],
        "metric": METRIC,
        "method": "linear",
        "splits": SPLITS,
        "rows": found,
    }
    out = Path(__file__).parent / "results" / "breadth_reliability.json"
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
