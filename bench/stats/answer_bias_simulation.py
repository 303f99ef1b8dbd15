"""Answer bias: the spurious partial r of each metric when checkpoints share a "Yes" bias and the abilities
are unrelated, and each metric's split-half reliability there.

Simulator: oodcorr.stats.simulate.answer_bias_study (fixed item difficulties scored at every checkpoint; a
per-checkpoint bias on the log-odds of " Yes" shared by all testsets; OOD testsets with 28 % and 40 % gold
"Yes"; the two OOD abilities uncorrelated given ID, so the true partial r is 0; 20 checkpoints; 128 items per
OOD testset; ID testset balanced). Per bias SD (0 = clean, 1, 2) and metric: the mean partial r (linear, each
metric residualised on its own ID series), its SD, the share of studies whose Fisher 95 % CI excludes 0 (the
false "correlated" rate), the mean split-half reliability (halves stratified by gold label, the metric
computed within each half, as `oodcorr analyze` does), and the rate of the analysis' `answer_bias` pair flag.

    python bench/stats/answer_bias_simulation.py [--studies 200] [--items 128] [--id-items 128]

Writes bench/stats/results/answer_bias_simulation.json (key "answer_bias").
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

METRICS = ("accuracy", "mean_margin", "balanced_margin", "balanced_accuracy", "auc")
YES_SHARES = (0.28, 0.40)


def one_study(bias_sd, n_ckpt, n_items, n_id_items, splits, rng) -> dict:
    from oodcorr.analysis.answer_bias import R2_MOST, disagree, explained_share, yes_residual_corr
    from oodcorr.stats.aggregate import values
    from oodcorr.stats.metrics import METRICS as TABLE
    from oodcorr.stats.noise import linear_operator, reliabilities
    from oodcorr.stats.partial import _corr_cols, fisher_ci, residualise_linear
    from oodcorr.stats.simulate import answer_bias_study, prediction_table

    st = answer_bias_study(n_ckpt, n_items, YES_SHARES, bias_sd, n_id_items=n_id_items, rng=rng)
    tables = [prediction_table(g, m) for g, m in zip(st["gold"], st["log_odds"])]
    out = {}
    for metric in (*METRICS, "yes_rate"):
        spec = TABLE[metric]
        items = [spec.score(t) for t in tables]
        series = [values(spec.aggregate, s, g) for s, g in zip(items, st["gold"])]
        x, Y = series[0], np.column_stack(series[1:])
        r = float(_corr_cols(residualise_linear(x, Y))[0, 1])
        lo, hi = fisher_ci(r, n_ckpt, 1)
        rel = [
            reliabilities(
                items[j], x, {"linear": linear_operator(x)}, splits, rng, gold=st["gold"][j], aggregate=spec.aggregate
            )["linear"][0]
            for j in (1, 2)
        ]
        out[metric] = {"r": r, "lo": float(lo), "hi": float(hi), "rel": rel, "series": series}
    acc, bm, yes = out["accuracy"], out["balanced_margin"], out["yes_rate"]["series"]
    r2 = [explained_share(acc["series"][0], acc["series"][j], yes[j]) for j in (1, 2)]
    names = ["id", "a", "b"]
    shared = yes_residual_corr(
        {"r": {"id_testset": "id", "accuracy": dict(zip(names, acc["series"])), "yes_rate": dict(zip(names, yes))}}
    )[("r", "a", "b")]
    flag = bool(disagree(acc["r"], acc["lo"], acc["hi"], bm["r"], bm["lo"], bm["hi"])) or (
        all(v > R2_MOST for v in r2) and shared > R2_MOST
    )
    return {
        "metrics": {m: {k: v for k, v in d.items() if k != "series"} for m, d in out.items() if m in METRICS},
        "flag": flag,
        "r2_accuracy": r2,
    }


def cell(bias_sd, studies, n_ckpt, n_items, n_id_items, splits, seed) -> dict:
    rng = np.random.default_rng(seed)
    res = [one_study(bias_sd, n_ckpt, n_items, n_id_items, splits, rng) for _ in range(studies)]
    table = {}
    for m in METRICS:
        r = np.array([s["metrics"][m]["r"] for s in res])
        lo = np.array([s["metrics"][m]["lo"] for s in res])
        hi = np.array([s["metrics"][m]["hi"] for s in res])
        rel = np.array([s["metrics"][m]["rel"] for s in res], float)
        table[m] = {
            "mean_r": round(float(np.nanmean(r)), 3),
            "sd_r": round(float(np.nanstd(r)), 3),
            "false_correlated_rate": round(float(np.mean((lo > 0) | (hi < 0))), 3),
            "mean_reliability": round(float(np.nanmean(rel)), 3),
        }
    return {
        "bias_sd": bias_sd,
        "studies": studies,
        "metrics": table,
        "answer_bias_flag_rate": round(float(np.mean([s["flag"] for s in res])), 3),
        "mean_r2_accuracy": round(float(np.nanmean([s["r2_accuracy"] for s in res])), 3),
    }


def markdown(result) -> str:
    lines = [
        "| bias SD | metric | mean partial r (true 0) | share CI excludes 0 | mean reliability |",
        "|---|---|---|---|---|",
    ]
    for c in result["cells"]:
        for m, t in c["metrics"].items():
            lines.append(
                f"| {c['bias_sd']} | {m} | {t['mean_r']:+.2f} | {t['false_correlated_rate']:.2f} | "
                f"{t['mean_reliability']:.2f} |"
            )
    lines.append("")
    lines.append("| bias SD | `answer_bias` flag rate | mean R² of accuracy residual explained by yes_rate |")
    lines.append("|---|---|---|")
    for c in result["cells"]:
        lines.append(f"| {c['bias_sd']} | {c['answer_bias_flag_rate']:.2f} | {c['mean_r2_accuracy']:.2f} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=200)
    ap.add_argument("--checkpoints", type=int, default=20)
    ap.add_argument("--items", type=int, default=128)
    ap.add_argument("--id-items", type=int, default=128)
    ap.add_argument("--splits", type=int, default=100, help="split halves per reliability")
    ap.add_argument("--bias-sd", type=float, nargs="+", default=[0.0, 1.0, 2.0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "answer_bias_simulation.json"))
    a = ap.parse_args()
    t0 = time.perf_counter()
    cells = [
        cell(sd, a.studies, a.checkpoints, a.items, a.id_items, a.splits, a.seed + i) for i, sd in enumerate(a.bias_sd)
    ]
    result = {
        "command": "python bench/stats/answer_bias_simulation.py "
        + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(a).items() if k in ("studies", "items", "id_items")),
        "setup": {
            "checkpoints": a.checkpoints,
            "items_per_ood_testset": a.items,
            "id_items": a.id_items,
            "ood_gold_yes_shares": list(YES_SHARES),
            "id_gold_yes_share": 0.5,
            "true_partial_r": 0.0,
            "reliability_splits": a.splits,
            "method": "linear",
        },
        "cells": cells,
        "seconds": round(time.perf_counter() - t0, 1),
        "python": platform.python_version(),
    }
    out = Path(a.out)
    old = json.loads(out.read_text()) if out.exists() else {}
    old["answer_bias"] = result
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(old, indent=2) + "\n")
    print(markdown(result))


if __name__ == "__main__":
    main()
