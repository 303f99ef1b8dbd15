#!/usr/bin/env python3
"""How much of each testset's accuracy trajectory is the model's answer bias, per run and testset, from the
stored per-example predictions: the analysis' own diagnosis (oodcorr.analysis.answer_bias, which `oodcorr
analyze` writes to results/answer_bias.csv) plus the plain correlation of accuracy with the share of "Yes"
answers across checkpoints (the columns of studies/cpu/answer_bias.csv).

    python scripts/answer_bias.py PROJECT [--out FILE.csv]

On a testset whose labels are unbalanced, a checkpoint that says "Yes" more often loses accuracy on it, so two
such testsets' residual trajectories can correlate through the answer bias alone."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd


def answer_bias(project: Path) -> pd.DataFrame:
    from oodcorr.analysis import series
    from oodcorr.analysis.answer_bias import diagnose
    from oodcorr.records.predictions import load_items
    from oodcorr.records.run_tables import build_runs, load_metrics, metrics_files
    from oodcorr.settings.config import load_params
    from oodcorr.settings.project import Project
    from oodcorr.stats.metrics import BIAS_FREE_METRIC

    params = load_params(project / "params.yaml")
    df = load_metrics(metrics_files(params, Project.from_params(params)))
    runs = build_runs(df)
    series.attach(runs, df, BIAS_FREE_METRIC, load_items(runs))
    ser = {
        run: {"id_testset": d["meta"]["id_testset"], "yes_share_gold": d["gold_share"], **d["series"]}
        for run, d in runs.items()
    }
    diag = diagnose(ser, {run: d["meta"] for run, d in runs.items()}, BIAS_FREE_METRIC)
    n = df.groupby(["run", "testset"])["n"].last()
    out = []
    for row in diag.itertuples(index=False):
        acc, yes = ser[row.run]["accuracy"][row.testset], ser[row.run]["yes_rate"][row.testset]
        r = np.corrcoef(acc, yes)[0, 1] if yes.std() > 0 and acc.std() > 0 else np.nan
        out.append(
            {
                "run": row.run,
                "testset": row.testset,
                "n_items": int(n[(row.run, row.testset)]),
                "share_entailment_labels": round(row.yes_share_gold, 3),
                "answers_entailment_min": round(row.yes_rate_min, 3),
                "answers_entailment_max": round(row.yes_rate_max, 3),
                "r_accuracy_vs_answers": round(r, 3),
                "r2_accuracy": row.r2_accuracy,
                "r2_bias_free": row.r2_bias_free,
            }
        )
    return pd.DataFrame(out).sort_values(["run", "testset"]).reset_index(drop=True)


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
