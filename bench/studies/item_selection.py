"""Items chosen from a pilot against random items of the same size, on runs that were not in the pilot.

For each saved study with 4 seeds per family (studies/sick: SciTail, SNLI, SICK at 512 items; studies/twofamily:
SciTail, SNLI at 512, HANS at 256) and each family F: the items are chosen on seed 0 only (F's own seed 0, the
other family's seed 0, or both), then the chosen subset's split-half reliability of the ID-residual trajectory
of balanced_margin (linear, as the analysis computes it: oodcorr.stats.noise.reliability) is read on F's seeds
1-3 (median over the 3 seeds), beside random subsets of the same size in the same label shares (mean of the
medians over DRAWS draws) and all items. Also: the chosen items' reliability on the pilot run itself (in-sample),
so regression to the mean on new runs is measured, and `fewer`: how many random items reach the chosen subset's
held-out reliability, divided by the chosen size (> 1: selection saves items; from the random curve, linearly
interpolated between the sizes measured; '>' where no random size up to all items reaches it).

  python bench/studies/item_selection.py [--criterion coherence] [--draws 20]
writes bench/studies/results/item_selection.csv (one row per study, testset, family, source, criterion, size),
item_selection_partial.csv (per study, family and pair: the partial r on all items and on the items chosen from
both families' seed 0, read on seeds 1-3, each with a 95 % Fisher interval of the pooled residuals) and
item_selection_pilot.csv (studies/pilot's 7 testsets at 128 items: chosen on one family's run, read on the
other's, against random subsets).
Needs the studies' predictions: dvc --cd studies pull -R -r studies {sick,twofamily,pilot}/runs
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from oodcorr.records.predictions import GOLD, load_run_items  # noqa: E402
from oodcorr.select.choose import choose, pooled_scores, random_subset  # noqa: E402
from oodcorr.stats.aggregate import values  # noqa: E402
from oodcorr.stats.noise import reliability  # noqa: E402

METRIC = "balanced_margin"
STUDIES = {"sick": ["scitail_real", "snli_real", "sick"], "twofamily": ["scitail_real", "snli_real", "hans_real"]}
FAMILIES = ("gemma3-270m", "smollm2-135m")
SIZES = (32, 64, 128, 256)
RANDOM_SIZES = (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
SPLITS = 100


def load(study: str, family: str, seed: int, testsets=None) -> dict:
    testsets = testsets or STUDIES[study]
    run = f"{family}_mnli_real_1024_s{seed}"
    eval_dir = ROOT / "studies" / study / "runs" / run / "eval"
    steps = sorted(int(p.name.split("-")[1]) for p in (eval_dir / "predictions").iterdir())
    got = load_run_items(run, eval_dir, steps, ["mnli_real", *testsets], (METRIC,))
    x = values("balanced", got[METRIC]["mnli_real"], got[GOLD]["mnli_real"])
    return {t: (got[METRIC][t], x, got[GOLD][t]) for t in testsets}


def rel(run: tuple, idx: np.ndarray, seed: int = 0) -> float:
    items, x, gold = run
    r, _ = reliability(
        items[:, idx], x, "linear", SPLITS, np.random.default_rng(seed), gold=gold[idx], aggregate="balanced"
    )
    return r


def held_out(runs: list, idx) -> float:
    return float(np.nanmedian([rel(r, idx) for r in runs]))


def random_curve(runs: list, gold, n_items: int, draws: int) -> dict[int, float]:
    rng = np.random.default_rng(12345)
    out = {}
    for k in [k for k in RANDOM_SIZES if k < n_items] + [n_items]:
        reps = 1 if k >= n_items else draws
        out[k] = float(np.nanmean([held_out(runs, random_subset(gold, k, rng)) for _ in range(reps)]))
    return out


def fewer(curve: dict[int, float], target: float, k: int) -> str:
    """Random items needed to reach `target` (interpolated on the measured random curve) / k."""
    sizes = sorted(curve)
    for a, b in zip(sizes, sizes[1:]):
        if curve[a] >= target:
            return f"{a / k:.2f}"
        if curve[a] < target <= curve[b]:
            return f"{(a + (target - curve[a]) / (curve[b] - curve[a]) * (b - a)) / k:.2f}"
    return f"{sizes[0] / k:.2f}" if curve[sizes[0]] >= target else f">{sizes[-1] / k:.2f}"


def bench(criterion: str, draws: int) -> list[dict]:
    rows = []
    for study, testsets in STUDIES.items():
        runs = {(f, s): load(study, f, s) for f in FAMILIES for s in range(4)}
        for t in testsets:
            for fam in FAMILIES:
                other = FAMILIES[1 - FAMILIES.index(fam)]
                targets = [runs[(fam, s)][t] for s in (1, 2, 3)]
                gold = targets[0][2]
                n_items = len(gold)
                curve = random_curve(targets, gold, n_items, draws)
                sources = {"own": [(fam, 0)], "other": [(other, 0)], "both": [(fam, 0), (other, 0)]}
                for source, pilot in sources.items():
                    scores = pooled_scores([runs[p][t] for p in pilot], criterion)
                    for k in [k for k in SIZES if k < n_items]:
                        idx = choose(scores, gold, k)
                        chosen = held_out(targets, idx)
                        rows.append(
                            {
                                "study": study,
                                "testset": t,
                                "family": fam,
                                "source": source,
                                "criterion": criterion,
                                "size": k,
                                "items": n_items,
                                "chosen_pilot": round(float(np.nanmean([rel(runs[p][t], idx) for p in pilot])), 3),
                                "chosen": round(chosen, 3),
                                "random": round(curve[k], 3),
                                "all": round(curve[n_items], 3),
                                "fewer": fewer(curve, chosen, k),
                            }
                        )
                        print(",".join(str(v) for v in rows[-1].values()), flush=True)
    return rows


def _resid(x, y):
    Z = np.column_stack([np.ones(len(x)), x])
    return y - Z @ np.linalg.lstsq(Z, y, rcond=None)[0]


def pooled_partial(runs: list, testsets: tuple, subsets: dict) -> tuple[float, float, float]:
    """Partial r of two testsets' balanced_margin series with the ID series regressed out, per run, residuals of the
    runs pooled; 95 % Fisher interval on (runs x (checkpoints - 2)) residual points (an independent, simple
    computation: not the analysis' noise-corrected interval)."""
    ra, rb = [], []
    for run in runs:
        (ia, x, ga), (ib, _, gb) = run[testsets[0]], run[testsets[1]]
        sa, sb = subsets[testsets[0]], subsets[testsets[1]]
        ra.append(_resid(x, values("balanced", ia[:, sa], ga[sa])))
        rb.append(_resid(x, values("balanced", ib[:, sb], gb[sb])))
    a, b = np.concatenate(ra), np.concatenate(rb)
    r = float(np.corrcoef(a, b)[0, 1])
    n = sum(len(x) - 2 for x in ra)
    z, h = np.arctanh(r), 1.96 / np.sqrt(max(n - 3, 1))
    return r, float(np.tanh(z - h)), float(np.tanh(z + h))


def partial_rows(size: int) -> list[dict]:
    """Partial r on all items vs on the `size` items chosen from both families' seed 0 (held-out seeds 1-3)."""
    import itertools

    rows = []
    for study, testsets in STUDIES.items():
        runs = {(f, s): load(study, f, s) for f in FAMILIES for s in range(4)}
        chosen = {}
        for t in testsets:
            gold = runs[(FAMILIES[0], 0)][t][2]
            scores = pooled_scores([runs[(f, 0)][t] for f in FAMILIES], "coherence")
            chosen[t] = choose(scores, gold, size)
        for fam in FAMILIES:
            held = [runs[(fam, s)] for s in (1, 2, 3)]
            for a, b in itertools.combinations(testsets, 2):
                n_a = len(held[0][a][2])
                alls = {a: np.arange(n_a), b: np.arange(len(held[0][b][2]))}
                r0 = pooled_partial(held, (a, b), alls)
                r1 = pooled_partial(held, (a, b), chosen)
                # noise-free estimates: r / sqrt(reliability_a x reliability_b), reliabilities on the same seeds
                rel0 = [held_out([h[t] for h in held], alls[t]) for t in (a, b)]
                rel1 = [held_out([h[t] for h in held], chosen[t]) for t in (a, b)]
                d0, d1 = (r[0] / np.sqrt(x * y) if min(x, y) > 0 else np.nan for r, (x, y) in ((r0, rel0), (r1, rel1)))
                rows.append(
                    {
                        "study": study,
                        "family": fam,
                        "pair": f"{a} ~ {b}",
                        "size": size,
                        "r_all": round(r0[0], 3),
                        "ci_all": f"[{r0[1]:+.2f}, {r0[2]:+.2f}]",
                        "r_chosen": round(r1[0], 3),
                        "ci_chosen": f"[{r1[1]:+.2f}, {r1[2]:+.2f}]",
                        "within": r0[1] <= r1[0] <= r0[2] and r1[1] <= r0[0] <= r1[2],
                        "rel_all": "/".join(f"{x:.2f}" for x in rel0),
                        "rel_chosen": "/".join(f"{x:.2f}" for x in rel1),
                        "r_noisefree_all": round(float(d0), 3),
                        "r_noisefree_chosen": round(float(d1), 3),
                    }
                )
                print(",".join(str(v) for v in rows[-1].values()), flush=True)
    return rows


PILOT_TESTSETS = ("snli_real", "scitail_real", "rte_real", "hans_real", "anli_r1_real", "wnli_real", "paws_qqp_real")


def pilot_rows(draws: int) -> list[dict]:
    """studies/pilot (one seed per family, 128 items a testset): items chosen on one family's run, read on the other's
    (the only held-out runs the pilot has)."""
    runs = {f: load("pilot", f, 0, PILOT_TESTSETS) for f in FAMILIES}
    rng = np.random.default_rng(7)
    rows = []
    for t in PILOT_TESTSETS:
        for src, dst in (FAMILIES, FAMILIES[::-1]):
            gold = runs[src][t][2]
            scores = pooled_scores([runs[src][t]], "coherence")
            for k in (32, 64):
                rnd = float(np.nanmean([rel(runs[dst][t], random_subset(gold, k, rng)) for _ in range(draws)]))
                rows.append(
                    {
                        "testset": t,
                        "chosen_on": src,
                        "read_on": dst,
                        "size": k,
                        "pool": len(gold),
                        "all": round(rel(runs[dst][t], np.arange(len(gold))), 3),
                        "chosen_pilot": round(rel(runs[src][t], choose(scores, gold, k)), 3),
                        "chosen": round(rel(runs[dst][t], choose(scores, gold, k)), 3),
                        "random": round(rnd, 3),
                    }
                )
                print(",".join(str(v) for v in rows[-1].values()), flush=True)
    return rows


def write(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {path}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--criterion", default="coherence")
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "item_selection.csv"))
    ap.add_argument("--summary", action="store_true", help="only summarise the CSVs already written")
    a = ap.parse_args()
    out = Path(a.out)
    if a.summary:
        summary(out)
        return
    write(out.with_name(out.stem + "_pilot.csv"), pilot_rows(a.draws))
    write(out.with_name(out.stem + "_partial.csv"), partial_rows(128) + partial_rows(64))
    rows = []
    for crit in a.criterion.split(","):
        rows += bench(crit, a.draws)
    write(out, rows)
    summary(out)


def summary(out: Path) -> dict:
    """Headline numbers from the three CSVs (also `--summary`): per source and size, the median over testsets and
    families of the items saved (`fewer`; '>' counted at its bound), the held-out reliability chosen vs random,
    and the fall from the pilot to new runs (regression to the mean)."""
    import pandas as pd

    d = pd.read_csv(out)
    d["fewer_x"] = d["fewer"].astype(str).str.lstrip(">").astype(float)
    d["at_bound"] = d["fewer"].astype(str).str.startswith(">")
    res = {"by_source_size": [], "partial": {}, "pilot": {}}
    for (crit, source, size), g in d.groupby(["criterion", "source", "size"]):
        res["by_source_size"].append(
            {
                "criterion": crit,
                "source": source,
                "size": int(size),
                "cells": len(g),
                "median_fewer": round(float(g["fewer_x"].median()), 2),
                "share_at_least_2x": round(float((g["fewer_x"] >= 2).mean()), 2),
                "median_chosen": round(float(g["chosen"].median()), 3),
                "median_random": round(float(g["random"].median()), 3),
                "median_pilot_minus_heldout": round(float((g["chosen_pilot"] - g["chosen"]).median()), 3),
            }
        )
    p = pd.read_csv(out.with_name(out.stem + "_partial.csv"))
    for size, g in p.groupby("size"):
        res["partial"][int(size)] = {
            "pairs": len(g),
            "within_both_intervals": int(g["within"].sum()),
            "same_sign": int((np.sign(g["r_all"]) == np.sign(g["r_chosen"])).sum()),
            "median_abs_shift_observed": round(float((g["r_chosen"] - g["r_all"]).abs().median()), 3),
            "median_abs_shift_noisefree": round(
                float((g["r_noisefree_chosen"] - g["r_noisefree_all"]).abs().median()), 3
            ),
        }
    q = pd.read_csv(out.with_name(out.stem + "_pilot.csv"))
    for size, g in q.groupby("size"):
        res["pilot"][int(size)] = {
            "cells": len(g),
            "chosen_beats_random": int((g["chosen"] > g["random"]).sum()),
            "chosen_beats_all_128": int((g["chosen"] > g["all"]).sum()),
            "median_chosen": round(float(g["chosen"].median()), 3),
            "median_random": round(float(g["random"].median()), 3),
            "median_all_128": round(float(g["all"].median()), 3),
            "median_pilot_minus_heldout": round(float((g["chosen_pilot"] - g["chosen"]).median()), 3),
        }
    out.with_suffix(".json").write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()
