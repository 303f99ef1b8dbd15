"""Why the likelihood interval's estimate runs low at r = 0.8 with many checkpoints, and what mends it.

The interval takes each testset's item-noise covariance over checkpoints as known: item_cov.noise_cov, the
sample covariance of the per-item scores (n x n from I items). With n checkpoints close to I / 3 its sampling
error is large (eigenvalues spread, Marchenko-Pastur): where it falls short, noise that is independent between
the two testsets is read as signal, and the correlation shrinks towards 0. Compared on cells of the interval grid
(bench/stats/interval_grid.py's generator, same seeds for every mode):

- hat:  the estimate the interval uses today (item_cov.noise_cov);
- true: the generator's own noise covariance (white margin noise tau^2 / I, discrimination spread s_sd^2 theta
        theta' / I, difficulty spread 1 / I): what a perfect estimate would give;
- lw / oas: per gold class, the part of the sample covariance orthogonal to the constant shrunk towards a scaled
        identity by Ledoit-Wolf / OAS (sklearn.covariance); the constant direction (item difficulty) is kept,
        since the interval's residual space never sees it;
- cv: the same with the pull that best predicts held-out items (item_cov.cv_shrinkage, 5-fold cross-validated
        Gaussian log-likelihood): what the analysis uses (noise_cov(..., shrink=True)).

On real predictions the question is which estimate predicts items it has not seen: `--real` splits each
testset's items (per gold class) in halves many times, estimates the covariance of the item trajectories
(orthogonal to the constant) on one half by each mode, and scores the other half's trajectories by their
Gaussian log-likelihood (mean per item; higher is better). "diag" shrinks the correlations towards 0 and keeps
each checkpoint's variance (Schaefer-Strimmer's target D).

  python bench/stats/noise_shrinkage.py --reps 30          # writes bench/stats/results/noise_shrinkage.json ("cells")
  python bench/stats/noise_shrinkage.py --real studies/pilot/runs/*/eval/metrics.jsonl   # ... its "real_held_out"
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench" / "stats"))

import interval_grid as G  # noqa: E402

from oodcorr.planner.budget import one_thread  # noqa: E402
from oodcorr.stats.gp_interval import gp_interval  # noqa: E402
from oodcorr.stats.item_cov import cv_shrinkage, shrunk_cov  # noqa: E402

OUT = ROOT / "bench" / "stats" / "results" / "noise_shrinkage.json"
CELLS = ["base|iid|id128|S3|n40|rho0.8", "base|gp0.2|id128|S3|n40|rho0.8", "answer_bias|gp0.2|id128|S3|n40|rho0.0"]
MODES = ("hat", "true", "lw", "oas", "cv")


def shrunk(items: np.ndarray, labels: np.ndarray, coef: dict, how: str) -> tuple[np.ndarray, list]:
    """items (n, I) -> (V (n, n), shrinkage per class): the class-stratified noise_cov with each class's
    covariance, orthogonal to the constant, shrunk towards a scaled identity (item_cov.shrunk_cov) by the pull
    of `how`."""
    from sklearn.covariance import ledoit_wolf_shrinkage, oas

    pull = {
        "cv": cv_shrinkage,
        "lw": lambda Z: ledoit_wolf_shrinkage(Z, assume_centered=True),
        "oas": lambda Z: oas(Z, assume_centered=True)[1],
    }[how]
    n = items.shape[0]
    V, deltas = np.zeros((n, n)), []
    for c in np.unique(labels):
        X = items[:, labels == c]
        C, d = shrunk_cov(X - X.mean(1, keepdims=True), pull)
        V += coef[c] ** 2 * C / X.shape[1]
        deltas.append(d)
    return V, deltas


def true_cov(theta: np.ndarray, n_items: int) -> np.ndarray:
    n = len(theta)
    return (G.TAU**2 * np.eye(n) + G.DISCRIMINATION_SD**2 * np.outer(theta, theta) + 1.0) / n_items


def run_cell(key: str, reps: int, seed: int, modes=MODES) -> dict:
    cell = G.parse_key(key)
    d = G.simulate(cell, reps, np.random.default_rng(seed), keep_scores=True)
    coef = {1.0: 0.5, -1.0: 0.5}
    sizes = {"x": cell["id_items"], "a": G.OOD_ITEMS, "b": G.OOD_ITEMS}
    res, deltas = {m: [] for m in modes}, []
    for r in range(reps):
        for mode in modes:
            seeds = []
            for s in range(cell["seeds"]):
                V = {}
                for j in "xab":
                    if mode == "hat":
                        V[j] = d["V"][j][r, s]
                    elif mode == "true":
                        V[j] = true_cov(d["truth"][j][r, s], sizes[j])
                    else:
                        V[j], dd = shrunk(d["scores"][j][r, s], d["labels"][j], coef, mode)
                        deltas += dd if mode == "cv" else []
                seeds.append(
                    {
                        "x": d["series"]["x"][r, s],
                        "ya": d["series"]["a"][r, s],
                        "yb": d["series"]["b"][r, s],
                        "Vx": V["x"],
                        "Va": V["a"],
                        "Vb": V["b"],
                        "t": d["t"],
                    }
                )
            o = gp_interval(seeds)
            res[mode].append((o["r_hat"], o["ci_low"], o["ci_high"]))
    rho = cell["rho"]
    out = {
        "cell": key,
        "rho": rho,
        "reps": reps,
        "seed": seed,
        "mean_cv_shrinkage": float(np.mean(deltas)) if deltas else None,
    }
    for mode, rows in res.items():
        a = np.array(rows, float)
        out[mode] = {
            "median_r": float(np.nanmedian(a[:, 0])),
            "mean_r": float(np.nanmean(a[:, 0])),
            "coverage": float(np.nanmean((a[:, 1] <= rho) & (a[:, 2] >= rho))),
            "excludes_0": float(np.nanmean((a[:, 1] > 0) | (a[:, 2] < 0))),
            "median_width": float(np.nanmedian(a[:, 2] - a[:, 1])),
        }
    return out


def _held_out_ll(Z: np.ndarray, S: np.ndarray) -> float:
    sign, logdet = np.linalg.slogdet(S)
    if sign <= 0:
        return float("-inf")
    q = np.einsum("ij,jk,ik->i", Z, np.linalg.inv(S), Z)
    return float(np.mean(-0.5 * (q + logdet + Z.shape[1] * np.log(2 * np.pi))))


def _estimates(A: np.ndarray) -> tuple[dict, float]:
    """A (items, dims), centred -> {mode: covariance} and the Ledoit-Wolf shrinkage."""
    from sklearn.covariance import ledoit_wolf_shrinkage, oas

    k, p = A.shape
    S = A.T @ A / (k - 1)
    target = np.trace(S) / p * np.eye(p)
    d_lw = ledoit_wolf_shrinkage(A, assume_centered=True)
    d_oas = oas(A, assume_centered=True)[1]
    W = A[:, :, None] * A[:, None, :]
    var_s = k / (k - 1) ** 3 * ((W - W.mean(0)) ** 2).sum(0)
    off = ~np.eye(p, dtype=bool)
    d_diag = min(1.0, var_s[off].sum() / (S[off] ** 2).sum())
    d_cv = cv_shrinkage(A)
    return {
        "sample": S,
        "lw": (1 - d_lw) * S + d_lw * target,
        "oas": (1 - d_oas) * S + d_oas * target,
        "diag": (1 - d_diag) * S + d_diag * np.diag(np.diag(S)),
        "cv": (1 - d_cv) * S + d_cv * target,
    }, float(d_lw)


def real_held_out(files: list[str], splits: int, seed: int) -> list[dict]:
    from scipy.linalg import null_space

    from oodcorr.records.predictions import GOLD, load_items
    from oodcorr.records.run_tables import build_runs, load_metrics

    runs = build_runs(load_metrics(files))
    items = load_items(runs)
    rng = np.random.default_rng(seed)
    rows = []
    for run in runs:
        for name, m in items[run]["balanced_margin"].items():
            gold = np.asarray(items[run][GOLD][name], bool)
            n = m.shape[0]
            B = null_space(np.ones((1, n)))
            ll, deltas = {mode: [] for mode in ("sample", "lw", "oas", "diag", "cv")}, []
            for c in (True, False):
                X = m[:, gold == c].T @ B
                for _ in range(splits):
                    p = rng.permutation(len(X))
                    A, T = X[p[: len(X) // 2]], X[p[len(X) // 2 :]]
                    mu = A.mean(0)
                    est, d = _estimates(A - mu)
                    deltas.append(d)
                    for mode, S in est.items():
                        ll[mode].append(_held_out_ll(T - mu, S))
            rows.append(
                {
                    "run": run,
                    "testset": name,
                    "checkpoints": n,
                    "items": int(m.shape[1]),
                    "items_per_class_half": int(min((gold == c).sum() for c in (True, False)) // 2),
                    "lw_shrinkage": round(float(np.mean(deltas)), 3),
                    "held_out_ll": {mode: round(float(np.mean(v)), 2) for mode, v in ll.items()},
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--real", nargs="+", metavar="METRICS", help="real runs' metrics.jsonl: the held-out check")
    ap.add_argument("--splits", type=int, default=40)
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    args = ap.parse_args()
    if args.real:
        old = json.loads(args.out.read_text()) if args.out.exists() else {}
        with one_thread():
            old["real_held_out"] = {
                "files": args.real,
                "splits": args.splits,
                "seed": args.seed,
                "rows": real_held_out(args.real, args.splits, args.seed),
            }
        args.out.write_text(json.dumps(old, indent=2) + "\n")
        return
    rows = []
    with one_thread():
        for key in CELLS:
            rows.append(run_cell(key, args.reps, args.seed, args.modes))
            print(json.dumps(rows[-1]), flush=True)
            old = json.loads(args.out.read_text()) if args.out.exists() else {}
            args.out.write_text(json.dumps({**old, "cells": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
