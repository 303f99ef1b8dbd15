#!/usr/bin/env python3
"""How far bf16 scoring moves a study's analysis: the same checkpoints scored in bfloat16 (BF16 project) and in
float32 (FP32 project: a copy of it with `evaluate.dtype: float32`, the chosen runs re-evaluated, then
`oodcorr analyze`), compared on the runs whose key starts with `--runs` (default smollm2).

Absolute differences of per-run partial r (both metrics, every method), seeds-pooled r, accuracy per checkpoint x
testset, and how many "distinguishable" flags and cross-family verdicts changed. Writes
bench/stats/results/bf16_r_shift.json.

    cp -a STUDY STUDY-fp32 && (cd STUDY-fp32 && set evaluate.dtype: float32 in params.yaml &&
      oodcorr evaluate --run <run> ... && oodcorr analyze)
    PATH=.venv/bin:$PATH python bench/stats/bf16_r_shift.py STUDY STUDY-fp32
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
METHODS = ("linear", "rank", "gam")


def spread(diff) -> dict:
    d = diff.abs().dropna()
    return {
        "n": int(len(d)),
        "max": round(float(d.max()), 4),
        "median": round(float(d.median()), 4),
        "within_0.02": int((d <= 0.02).sum()),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bf16_project")
    ap.add_argument("fp32_project")
    ap.add_argument("--runs", default="smollm2", help="compare the runs (and the model) whose name starts with this")
    ap.add_argument("--out", default=str(HERE / "results" / "bf16_r_shift.json"))
    a = ap.parse_args()
    import pandas as pd
    import yaml

    bf, fp = Path(a.bf16_project), Path(a.fp32_project)

    def pair(rel: str, keys: list[str], who: str):
        m = pd.read_csv(fp / rel).merge(pd.read_csv(bf / rel), on=keys, suffixes=("_fp32", "_bf16"))
        return m[m[who].str.startswith(a.runs)]

    out = {"bf16_project": str(bf.resolve()), "fp32_project": str(fp.resolve()), "runs": a.runs}
    per_run = pair("results/partial_correlations.csv", ["run", "method", "testset_a", "testset_b"], "run")
    for col in ("r", "r_accuracy"):
        for meth in METHODS:
            x = per_run[per_run.method == meth]
            out[f"per_run/{col}/{meth}"] = spread(x[f"{col}_bf16"] - x[f"{col}_fp32"])
    lin = per_run[per_run.method == "linear"]
    for col in ("distinguishable", "distinguishable_accuracy"):
        out[f"per_run/{col}_changed"] = int((lin[f"{col}_fp32"] != lin[f"{col}_bf16"]).sum())
    pooled = pair("results/pooled_seeds.csv", ["model", "method", "testset_a", "testset_b"], "model")
    for meth in METHODS:
        x = pooled[pooled.method == meth]
        out[f"pooled/r/{meth}"] = spread(x["r_bf16"] - x["r_fp32"])
    cons = pd.read_csv(fp / "results/consistency.csv").merge(
        pd.read_csv(bf / "results/consistency.csv"),
        on=["method", "testset_a", "testset_b"],
        suffixes=("_fp32", "_bf16"),
    )
    for col in ("verdict", "verdict_accuracy"):
        out[f"consistency/{col}_changed"] = int((cons[f"{col}_fp32"] != cons[f"{col}_bf16"]).sum())
    study_runs = yaml.safe_load((fp / "params.yaml").read_text())["runs"]
    for run in sorted(r for r in study_runs if r.startswith(a.runs)):
        rel = f"runs/{run}/eval/accuracy.csv"
        m = pd.read_csv(fp / rel).merge(pd.read_csv(bf / rel), on=["step", "testset"], suffixes=("_fp32", "_bf16"))
        d = (m.accuracy_fp32 - m.accuracy_bf16).abs()
        out[f"accuracy_abs_diff/{run}"] = {"max": round(float(d.max()), 4), "mean": round(float(d.mean()), 4)}
    print(json.dumps(out, indent=1))
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
