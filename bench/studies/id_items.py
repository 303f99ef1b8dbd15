"""How many ID items does regressing ID out need? A random subset of the ID testset against all of it, on saved
studies with 4 seeds per family.

For studies/sick (SciTail, SNLI, SICK) and studies/twofamily (SciTail, SNLI, HANS), both families, seeds 0-3,
the ID testset (MNLI dev, 512 items) is cut to a random `size` items in its label shares (DRAWS draws per size).
Per draw: the ID series' split-half reliability (mean over SPLITS stratified halves, Spearman-Brown to the full
subset), and each OOD pair's partial r (balanced_margin, ID regressed out linearly per run, residuals of the 4
seeds pooled, as bench/studies/item_selection.py computes it) against the same r with all 512 ID items, and its
95 % Fisher half-width for scale. The ID cut moves only the regressor: every OOD item is kept.

  python bench/studies/id_items.py [--draws 20]
writes bench/studies/results/id_items.json (per study, family and size: the ID reliability, the largest and the
median |r(subset) - r(all)| over pairs and draws, and the pairs' median half-width).
Needs the studies' predictions: dvc --cd studies pull -R -r studies {sick,twofamily}/runs
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from oodcorr.records.predictions import GOLD, load_run_items  # noqa: E402
from oodcorr.select.choose import random_subset  # noqa: E402
from oodcorr.stats.aggregate import values  # noqa: E402

METRIC = "balanced_margin"
STUDIES = {"sick": ["scitail_real", "snli_real", "sick"], "twofamily": ["scitail_real", "snli_real", "hans_real"]}
FAMILIES = ("gemma3-270m", "smollm2-135m")
SIZES = (64, 128, 256)
SPLITS = 50


def load(study: str, family: str, seed: int) -> dict:
    run = f"{family}_mnli_real_1024_s{seed}"
    eval_dir = ROOT / "studies" / study / "runs" / run / "eval"
    steps = sorted(int(p.name.split("-")[1]) for p in (eval_dir / "predictions").iterdir())
    got = load_run_items(run, eval_dir, steps, ["mnli_real", *STUDIES[study]], (METRIC,))
    return {t: (got[METRIC][t], got[GOLD][t]) for t in ["mnli_real", *STUDIES[study]]}


def series(run: dict, testset: str, idx=None) -> np.ndarray:
    items, gold = run[testset]
    idx = np.arange(len(gold)) if idx is None else idx
    return values("balanced", items[:, idx], gold[idx])


def id_reliability(run: dict, idx: np.ndarray, rng) -> float:
    """Split-half reliability of the ID series on items `idx`: stratified halves, Spearman-Brown."""
    _, gold = run["mnli_real"]
    rs = []
    for _ in range(SPLITS):
        half = random_subset(gold[idx], len(idx) // 2, rng)
        a = np.zeros(len(idx), bool)
        a[half] = True
        r = np.corrcoef(series(run, "mnli_real", idx[a]), series(run, "mnli_real", idx[~a]))[0, 1]
        rs.append(2 * r / (1 + r))
    return float(np.mean(rs))


def _resid(x, y):
    Z = np.column_stack([np.ones(len(x)), x])
    return y - Z @ np.linalg.lstsq(Z, y, rcond=None)[0]


def pooled_partial(runs: list, pair: tuple, id_idx) -> tuple[float, float]:
    """(partial r of the pair, pooled over the runs' residuals; its 95 % Fisher half-width)."""
    ra, rb = [], []
    for run in runs:
        x = series(run, "mnli_real", id_idx)
        ra.append(_resid(x, series(run, pair[0])))
        rb.append(_resid(x, series(run, pair[1])))
    r = float(np.corrcoef(np.concatenate(ra), np.concatenate(rb))[0, 1])
    n = sum(len(a) - 2 for a in ra)
    z, h = np.arctanh(r), 1.96 / np.sqrt(max(n - 3, 1))
    return r, float((np.tanh(z + h) - np.tanh(z - h)) / 2)


def rows(draws: int) -> list[dict]:
    out = []
    for study, testsets in STUDIES.items():
        for fam in FAMILIES:
            runs = [load(study, fam, s) for s in range(4)]
            gold = runs[0]["mnli_real"][1]
            pairs = list(itertools.combinations(testsets, 2))
            full = {p: pooled_partial(runs, p, None) for p in pairs}
            rel_all = float(np.mean([id_reliability(r, np.arange(len(gold)), np.random.default_rng(0)) for r in runs]))
            for size in SIZES:
                rng = np.random.default_rng(size)
                shifts, rels = [], []
                for _ in range(draws):
                    idx = np.sort(random_subset(gold, size, rng))
                    rels.append(np.mean([id_reliability(r, idx, rng) for r in runs]))
                    shifts += [abs(pooled_partial(runs, p, idx)[0] - full[p][0]) for p in pairs]
                row = {
                    "study": study,
                    "family": fam,
                    "id_items": size,
                    "id_reliability": round(float(np.mean(rels)), 4),
                    "id_reliability_all_512": round(rel_all, 4),
                    "max_abs_shift_r": round(float(np.max(shifts)), 3),
                    "median_abs_shift_r": round(float(np.median(shifts)), 3),
                    "median_half_width": round(float(np.median([h for _, h in full.values()])), 3),
                    "r_all_512": {f"{a} ~ {b}": round(v[0], 3) for (a, b), v in full.items()},
                }
                out.append(row)
                print(json.dumps(row), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--draws", type=int, default=20)
    args = ap.parse_args()
    res = {"draws": args.draws, "splits": SPLITS, "metric": METRIC, "rows": rows(args.draws)}
    out = Path(__file__).parent / "results" / "id_items.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
