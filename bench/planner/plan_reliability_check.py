"""The planner's reliability against the reliability the interval then fitted, on this repository's saved studies.

`oodcorr plan --budget` predicts, from a pilot, how reliable each OOD testset's residual trajectory will be at a
design's item counts and checkpoints (plan_budget.reliability, the ID testset's leak included), and gives no power
to a design whose median testset stays below 0.5. Here each case plans from one saved study (the pilot: its
stored predictions, read as `--pilot studies/NAME` reads them) for another saved study's design (its checkpoints
and item counts) and sets that beside the reliabilities the interval fitted there (rel_a / rel_b of the target's
per-run linear rows, median over its runs and pairs; committed in its partial_correlations.csv).

Two item-noise measures are compared: the raw one (the mean diagonal of each testset's item-noise covariance,
what the planner used first) and the one the planner uses now (plan_pilot.residual_noise: the noise left in the
residual space the interval fits; a testset's items are the same at every checkpoint, so most of their noise is
shared by all checkpoints and leaves with the intercept and the ID slope).

  python bench/planner/plan_reliability_check.py              # writes bench/planner/results/plan_reliability_check.json
  python bench/planner/plan_reliability_check.py --markdown   # the table in docs/statistics-reference.md

Needs the pilots' predictions (`dvc --cd studies pull -R NAME/runs` or `oodcorr study reanalyze NAME` fetches them).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from oodcorr.planner.budget import one_thread, reliability  # noqa: E402
from oodcorr.planner.pilot import _seed_inputs, pilot_files, pilot_model  # noqa: E402

OUT = ROOT / "bench" / "planner" / "results" / "plan_reliability_check.json"
METRIC = "balanced_margin"
# (pilot, target): each study planned for itself, and each study from the one whose runs planned it
CASES = (
    ("pilot", "twofamily"),
    ("twofamily", "twofamily"),
    ("sick-first-pass", "sick-first-pass"),
    ("sick-first-pass", "sick"),
)


def target_design(name: str) -> dict:
    """Checkpoints and items per testset of a saved study's runs, from their metrics files."""
    rows = pd.concat(
        [pd.read_json(f, lines=True) for f in sorted((ROOT / "studies" / name / "runs").glob("*/eval/metrics.jsonl"))]
    )
    items = rows.groupby("testset")["n"].max().astype(int).to_dict()
    return {
        "checkpoints": int(rows.groupby("run")["step"].nunique().median()),
        "items": items,
        "runs": int(rows["run"].nunique()),
    }


def fitted(name: str) -> dict:
    """{testset: median fitted reliability} over the study's per-run linear rows (both sides of each pair)."""
    pc = pd.read_csv(ROOT / "studies" / name / "results" / "partial_correlations.csv").query("method == 'linear'")
    rel = pd.concat(
        [
            pc[["testset_a", "rel_a"]].set_axis(["testset", "rel"], axis=1),
            pc[["testset_b", "rel_b"]].set_axis(["testset", "rel"], axis=1),
        ]
    ).dropna()
    return {t: float(g.median()) for t, g in rel.groupby("testset")["rel"]}


def raw_item_var(pilot: str, names) -> dict:
    """The first measure: each testset's mean item-noise diagonal times its items, median over the pilot's runs."""
    from oodcorr.records.predictions import load_items
    from oodcorr.records.run_tables import build_runs, load_metrics

    runs = build_runs(load_metrics(pilot_files([ROOT / "studies" / pilot])))
    data = _seed_inputs(runs, load_items(runs), METRIC, 10)
    return {
        name: float(
            np.median([np.mean(np.diag(d["V"][name])) * d["n_items"][name] for d in data.values() if name in d["V"]])
        )
        for name in names
    }


def case(pilot: str, target: str) -> dict:
    pm = pilot_model([ROOT / "studies" / pilot], METRIC)  # its item_var is the residual-space measure
    design, fit = target_design(target), fitted(target)
    id_name = pm["id"]["name"]
    raw = raw_item_var(pilot, [*pm["ood"], id_name])
    noise = {
        name: {"raw": raw[name], "residual": t["item_var"]} for name, t in [*pm["ood"].items(), (id_name, pm["id"])]
    }
    n, ell, beta = design["checkpoints"], pm["ell"], pm["beta"]
    i_id = design["items"][id_name]
    rows = []
    for name, t in sorted(pm["ood"].items()):
        if name not in fit or name not in design["items"]:
            continue
        i = design["items"][name]
        planned = {
            k: reliability(t["signal_var"], noise[name][k], i, n, ell, beta * beta * noise[id_name][k] / i_id)
            for k in ("raw", "residual")
        }
        rows.append(
            {
                "testset": name,
                "items": i,
                "id_items": i_id,
                "planned_raw": planned["raw"],
                "planned": planned["residual"],
                "fitted": fit[name],
                "noise_ratio": noise[name]["residual"] / noise[name]["raw"],
            }
        )
    return {
        "pilot": pilot,
        "target": target,
        "checkpoints": n,
        "target_runs": design["runs"],
        "pilot_runs": pm["n_runs"],
        "ell": ell,
        "beta": beta,
        "rows": rows,
        "mean_abs_error": float(np.mean([abs(r["planned"] - r["fitted"]) for r in rows])),
        "mean_abs_error_raw": float(np.mean([abs(r["planned_raw"] - r["fitted"]) for r in rows])),
    }


NAMES = {"scitail_real": "SciTail", "snli_real": "SNLI", "sick": "SICK", "hans_real": "HANS"}


def markdown(result: dict) -> str:
    lines = [
        "| pilot → study (runs) | testset (items; ID items) | planned, raw item noise | planned now | fitted |",
        "|---|---|---|---|---|",
    ]
    for c in result["cases"]:
        for r in c["rows"]:
            lines.append(
                f"| {c['pilot']} → {c['target']} ({c['target_runs']}) | "
                f"{NAMES.get(r['testset'], r['testset'])}"
                f" ({r['items']}; {r['id_items']}) | {r['planned_raw']:.2f} | {r['planned']:.2f} | "
                f"{r['fitted']:.2f} |"
            )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="print the docs table from the results file")
    args = ap.parse_args()
    if args.markdown:
        print(markdown(json.loads(OUT.read_text())))
        return
    with one_thread():
        cases = [case(p, t) for p, t in CASES]
    result = {"metric": METRIC, "cases": cases}
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    for c in cases:
        print(
            f"{c['pilot']} -> {c['target']} ({c['target_runs']} runs, {c['checkpoints']} checkpoints): mean |planned"
            f" - fitted| {c['mean_abs_error']:.2f} (raw item noise: {c['mean_abs_error_raw']:.2f})"
        )
        for r in c["rows"]:
            print(
                f"  {r['testset']:<13} {r['items']:>4} items, ID {r['id_items']}: planned {r['planned']:.2f} "
                f"(raw {r['planned_raw']:.2f}), fitted {r['fitted']:.2f}; residual/raw noise {r['noise_ratio']:.2f}"
            )
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
