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
writes bench/studies/item_selection.csv (one row per study, testset, family, source, criterion, size) and prints
the summary. Needs the studies' predictions: dvc pull -r studies studies/{sick,twofamily}/runs/*.dvc
"""

from __future__ import annotations

import argparse
import csv
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


def load(study: str, family: str, seed: int) -> dict:
    run = f"{family}_mnli_real_1024_s{seed}"
    eval_dir = ROOT / "studies" / study / "runs" / run / "eval"
    steps = sorted(int(p.name.split("-")[1]) for p in (eval_dir / "predictions").iterdir())
    got = load_run_items(run, eval_dir, steps, ["mnli_real", *STUDIES[study]], (METRIC,))
    x = values("balanced", got[METRIC]["mnli_real"], got[GOLD]["mnli_real"])
    return {t: (got[METRIC][t], x, got[GOLD][t]) for t in STUDIES[study]}


def rel(run: tuple, idx: np.ndarray, seed: int = 0) -> float:
    items, x, gold = run
    r, _ = reliability(items[:, idx], x, "linear", SPLITS, np.random.default_rng(seed), gold=gold[idx],
                       aggregate="balanced")
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
                        rows.append({"study": study, "testset": t, "family": fam, "source": source,
                                     "criterion": criterion, "size": k, "items": n_items,
                                     "chosen_pilot": round(float(np.nanmean([rel(runs[p][t], idx) for p in pilot])), 3),
                                     "chosen": round(chosen, 3), "random": round(curve[k], 3),
                                     "all": round(curve[n_items], 3), "fewer": fewer(curve, chosen, k)})
                        print(",".join(str(v) for v in rows[-1].values()), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--criterion", default="coherence")
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--out", default=str(Path(__file__).with_suffix(".csv")))
    a = ap.parse_args()
    rows = []
    for crit in a.criterion.split(","):
        rows += bench(crit, a.draws)
    with open(a.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
