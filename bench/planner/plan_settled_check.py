"""What the planner says a saved study settles, beside what it settled: for each committed study with enough
checkpoints to plan from, the expected number of pairs settled (same sign, or a consistent null, in every family;
planner/settle.py at the study's own design: its checkpoints, seeds per family, items per testset) planned from the
study that sized it and from the study itself, beside the pairs its committed verdicts settled (results/
consistency.csv, the primary method `linear`: consistent_positive / consistent_negative / consistent_null), and the
CPU-hours per settled pair where the study's CPU time was measured (docs/benchmarks.md, docs/studies.md).

  python bench/planner/plan_settled_check.py [--studies DIR]     # writes bench/planner/results/plan_settled_check.json
  python bench/planner/plan_settled_check.py --markdown          # the table in docs/benchmarks.md

Needs the studies' predictions (`dvc --cd studies pull -R NAME/runs`); --studies points at a checkout that has them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

OUT = ROOT / "bench" / "planner" / "results" / "plan_settled_check.json"
METRIC = "balanced_margin"
SETTLED = ("consistent_positive", "consistent_negative", "consistent_null")
# (pilot, target): each study planned from the study that sized it, and from itself
CASES = (
    ("pilot", "twofamily"),
    ("twofamily", "twofamily"),
    ("sick-first-pass", "sick"),
    ("sick", "sick"),
    ("sick-first-pass", "sick-first-pass"),
    ("pilot", "pilot"),
)
# measured CPU-hours of the scored study (docs/benchmarks.md: twofamily's two passes 7.3 + 8; sick's 8 runs and the
# first pass that re-planned it 13; docs/studies.md: sick-first-pass 2.8)
CPU_HOURS = {"twofamily": 15.3, "sick": 13.2, "sick-first-pass": 2.8}


def settled(folder: Path) -> tuple[int, int]:
    import pandas as pd

    d = pd.read_csv(folder / "results" / "consistency.csv")
    d = d[d["method"] == "linear"]
    return int(d["verdict"].isin(SETTLED).sum()), len(d)


def main(argv=None) -> dict:
    from oodcorr.core.errors import UserError
    from oodcorr.planner.budget import one_thread
    from oodcorr.planner.pilot import pilot_model
    from oodcorr.planner.settle import expected_settled
    from oodcorr.settings.analyze import AnalyzeSettings
    from oodcorr.settings.config import load_params

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--studies", default=str(ROOT / "studies"))
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    if args.markdown:
        return print_markdown(json.loads(OUT.read_text()))
    studies = Path(args.studies)
    models = {}
    with one_thread():
        for name in sorted({n for case in CASES for n in case}):
            try:
                models[name] = pilot_model([studies / name], METRIC)
            except UserError as e:  # its predictions are not checked out here
                print(f"{name}: skipped ({e})", flush=True)
                continue
            print(f"{name}: {models[name]['n_runs']} runs, {models[name]['checkpoints']} checkpoints", flush=True)
    rows = []
    for pilot, target in CASES:
        if pilot not in models or target not in models:
            continue
        p, t = models[pilot], models[target]
        s = AnalyzeSettings.from_params(load_params(studies / target / "params.yaml"))
        names = sorted(set(p["ood"]) & set(t["ood"]))
        model = {**p, "ood": {n: {**p["ood"][n], "size": t["ood"][n]["items"]} for n in names}}
        seeds = max(1, t["n_runs"] // len(t["families"]))
        design = {
            "checkpoints": t["checkpoints"],
            "seeds": seeds,
            "ood_items": max(x["items"] for x in t["ood"].values()),
            "id_items": t["id"]["items"],
            "hours": CPU_HOURS.get(target, float("nan")),
        }
        with one_thread():
            st = expected_settled(
                model, design, names, len(t["families"]), s.equivalence, s.alpha, 0.5, s.reliability_min
            )
        got, pairs = settled(studies / target)
        rows.append(
            {
                "pilot": pilot,
                "target": target,
                "checkpoints": design["checkpoints"],
                "seeds": seeds,
                "families": len(t["families"]),
                "items": {n: t["ood"][n]["items"] for n in names},
                "id_items": design["id_items"],
                "pairs": st["pairs"],
                "expected_if_r05": st["if_r"],
                "expected_if_0": st["if_0"],
                "per_pair": st["per_pair"],
                "settled": got,
                "verdict_pairs": pairs,
                "cpu_hours": CPU_HOURS.get(target),
                "cpu_h_per_settled": CPU_HOURS[target] / got if target in CPU_HOURS and got else None,
                "planned_cpu_h_per_settled": CPU_HOURS[target] / st["if_r"]
                if target in CPU_HOURS and st["if_r"] > 0
                else None,
            }
        )
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "per_pair"}), flush=True)
    result = {"metric": METRIC, "r": 0.5, "cases": rows}
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    return result


def print_markdown(result: dict) -> dict:
    print(
        "| study (design) | planned from | expected settled if every \\|r\\| = 0.5 / if every r = 0 | settled | "
        "CPU-h per settled pair: planned / actual |"
    )
    print("|---|---|---|---|---|")
    for c in result["cases"]:
        f = lambda v: "–" if v is None else f"{v:.1f}"  # noqa: E731
        print(
            f"| `{c['target']}` ({c['families']} families x {c['seeds']} seeds, {c['checkpoints']} checkpoints) | "
            f"`{c['pilot']}` | {c['expected_if_r05']:.1f} / {c['expected_if_0']:.1f} of {c['pairs']} | "
            f"{c['settled']} of {c['verdict_pairs']} | {f(c['planned_cpu_h_per_settled'])} / "
            f"{f(c['cpu_h_per_settled'])} |"
        )
    return result


if __name__ == "__main__":
    main()
