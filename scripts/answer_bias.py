#!/usr/bin/env python3
"""How much of each testset's accuracy trajectory is the model's answer bias: per run and testset, the share
of 'entailment' answers at every checkpoint and its correlation with accuracy across checkpoints, from the
stored per-example predictions (runs/<run>/eval/predictions/step-<k>/<testset>.parquet).

    python scripts/answer_bias.py PROJECT [--out FILE.csv]

On a testset whose labels are unbalanced, a checkpoint that says "Yes" more often loses accuracy on it, so two
such testsets' residual trajectories can correlate through the answer bias alone."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import yaml


def answer_bias(project: Path) -> pd.DataFrame:
    runs = yaml.safe_load((project / "params.yaml").read_text())["runs"]
    rows = []
    for run in runs:
        for step_dir in sorted((project / "runs" / run / "eval" / "predictions").glob("step-*")):
            step = int(step_dir.name.split("-", 1)[1])
            for f in step_dir.glob("*.parquet"):
                t = pq.read_table(f, columns=["label", "prediction"]).to_pandas()
                rows.append({"run": run, "step": step, "testset": f.stem, "n": len(t),
                             "share_entailment_labels": (t["label"] == "entailment").mean(),
                             "share_entailment_answers": (t["prediction"] == "entailment").mean(),
                             "accuracy": (t["label"] == t["prediction"]).mean()})
    df = pd.DataFrame(rows)
    out = []
    for (run, ts), g in df.sort_values("step").groupby(["run", "testset"]):
        yes, acc = g["share_entailment_answers"].to_numpy(), g["accuracy"].to_numpy()
        r = np.corrcoef(acc, yes)[0, 1] if yes.std() > 0 and acc.std() > 0 else np.nan
        out.append({"run": run, "testset": ts, "n_items": int(g["n"].iloc[0]),
                    "share_entailment_labels": round(g["share_entailment_labels"].iloc[0], 3),
                    "answers_entailment_min": round(yes.min(), 3), "answers_entailment_max": round(yes.max(), 3),
                    "r_accuracy_vs_answers": round(r, 3)})
    return pd.DataFrame(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("project", type=Path)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    df = answer_bias(a.project)
    if a.out:
        df.to_csv(a.out, index=False)
    print(df.to_string(index=False))


if __name__ == "__main__":
    main()
