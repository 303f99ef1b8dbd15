"""Why a real study's noise-free estimate moves with its item count (bench/stats/item_resample.py): three checks.

1. The item-noise covariance, checked on the study's predictions: random halves of each testset (stratified by
   gold label), the difference of the two halves' series has, over many splits, the covariance the full
   testset's item noise has (item_cov.noise_cov). Ratio of traces, empirical / estimated, centred and in the
   rough directions (second differences), per run and testset.
2. The same correlation at different time scales: the residual series (OLS on the smoothed ID series, as the
   interval has them) projected on the slowest modes of the fitted kernel and on the rest, the noise-corrected
   correlation in each band by moments (cross-product less the ID leak, variances less the item noise), summed
   over a family's seeds. The interval's model has one correlation at every time scale.
3. The interval on data drawn from its own model (known white or smooth item noise), at the study's design
   (4 seeds x 17 checkpoints, length-scale 0.08, rho 0.76) with the item noise of 512 and of 256 items: the
   median estimate and the coverage.

  python bench/stats/real_noise_check.py            # writes bench/stats/results/real_noise_check.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from oodcorr.planner.budget import one_thread  # noqa: E402
from oodcorr.stats.aggregate import gold_entailment, stratified_halves, values  # noqa: E402
from oodcorr.stats.gp_interval import _seed_terms, gp_interval  # noqa: E402
from oodcorr.stats.gp_model import KERNEL, KERNELS  # noqa: E402
from oodcorr.stats.metrics import METRICS, item_scores  # noqa: E402
from oodcorr.stats.noise import item_noise  # noqa: E402

OUT = ROOT / "bench" / "stats" / "results" / "real_noise_check.json"
METRIC = "balanced_margin"
KIND = METRICS[METRIC].aggregate
SLOW_MODES = 4  # the band of slow changes: the 4 leading eigenvectors of the fitted kernel in the residual space


def item_matrix(run_dir: Path, testset: str):
    """(t in [0, 1], per-item scores of METRIC (checkpoints, items), gold-entailment mask), items by id."""
    import pandas as pd

    pred = run_dir / "eval" / "predictions"
    steps = sorted(int(p.name.split("-")[1]) for p in pred.iterdir())
    tabs = [
        pd.read_parquet(pred / f"step-{s}" / f"{testset}.parquet").sort_values("id").reset_index(drop=True)
        for s in steps
    ]
    M = np.stack([item_scores(t, METRIC) for t in tabs])
    return np.array(steps, float) / max(steps), M, np.asarray(gold_entailment(tabs[0]))


def series_and_noise(M, g):
    """The testset's series and its item-noise covariance, as the analysis computes them."""
    series, V = item_noise({"t": M}, {"t": g}, KIND, None, 0)
    return series["t"], V["t"]


def split_half(M, g, rng, splits: int) -> dict:
    n = M.shape[0]
    V = series_and_noise(M, g)[1]
    A, B = stratified_halves(g, splits, rng)
    D = (values(KIND, M, g, A) - values(KIND, M, g, B)).T / 2  # (splits, n)
    E = D.T @ D / len(D)
    J = np.eye(n) - 1.0 / n
    d2 = np.diff(np.eye(n), 2, axis=0)
    return {
        "centred": float(np.trace(J @ E @ J) / np.trace(J @ V @ J)),
        "rough": float(np.trace(d2 @ E @ d2.T) / np.trace(d2 @ V @ d2.T)),
    }


def bands(study: Path, runs: list[str], ell: float, a: str, b: str, id_name: str) -> dict:
    acc = {"slow": np.zeros(3), "fast": np.zeros(3), "all": np.zeros(3)}
    for run in runs:
        data = {}
        for key, ts in (("x", id_name), ("ya", a), ("yb", b)):
            t, M, g = item_matrix(study / "runs" / run, ts)
            data[key], data["V" + key[-1]] = series_and_noise(M, g)
        data["t"] = t
        s = _seed_terms(data)
        m = s["m"]
        K = s["Q"].T @ KERNELS[KERNEL](s["d"], ell)[0] @ s["Q"]
        U = np.linalg.eigh(K)[1][:, ::-1]
        za, zb = s["z"][:m], s["z"][m:]
        for name, cols in (("slow", slice(0, SLOW_MODES)), ("fast", slice(SLOW_MODES, m)), ("all", slice(0, m))):
            B = U[:, cols]
            pa, pb = B.T @ za, B.T @ zb
            acc[name] += [
                pa @ pb - np.trace(B.T @ s["C"] @ B),
                pa @ pa - np.trace(B.T @ s["Na"] @ B),
                pb @ pb - np.trace(B.T @ s["Nb"] @ B),
            ]
    return {
        k: {
            "r": float(c / math.sqrt(max(va, 1e-12) * max(vb, 1e-12))),
            "signal_var_a": float(va),
            "signal_var_b": float(vb),
        }
        for k, (c, va, vb) in acc.items()
    }


def own_model(reps: int, rng, rho=0.76, ell=0.08, n=17, seeds=4, beta=0.69) -> list[dict]:
    t = np.linspace(0, 1, n)
    d = np.abs(np.subtract.outer(t, t))
    L = np.linalg.cholesky(KERNELS[KERNEL](d, ell)[0] + 1e-8 * np.eye(n))
    x0 = 1.0 - np.exp(-4 * t)
    out = []
    for noise_ell in (0.0, 0.3):  # white item noise, and item noise as smooth as a fixed item set's
        C = np.eye(n) if noise_ell == 0 else KERNELS[KERNEL](d, noise_ell)[0]
        Ln = np.linalg.cholesky(C + 1e-8 * np.eye(n))
        for items, noise in (("512", 0.19), ("256", 0.38)):  # reliability about 0.84 and 0.72
            rs, cover = [], 0
            with one_thread():
                for _ in range(reps):
                    runs = []
                    for _ in range(seeds):
                        z1, z2 = rng.standard_normal((2, n))
                        u, v = L @ z1, L @ (rho * z1 + math.sqrt(1 - rho * rho) * z2)
                        e = math.sqrt(noise) * (Ln @ rng.standard_normal((n, 2)))
                        runs.append(
                            {
                                "t": t,
                                "x": x0 + 0.1 * rng.standard_normal(n),
                                "ya": beta * x0 + u + e[:, 0],
                                "yb": beta * x0 + v + e[:, 1],
                                "Vx": 0.01 * np.eye(n),
                                "Va": noise * C,
                                "Vb": noise * C,
                            }
                        )
                    res = gp_interval(runs)
                    if res["reason"]:
                        continue
                    rs.append(res["r_hat"])
                    cover += res["ci_low"] <= rho <= res["ci_high"]
            cov = cover / len(rs)
            out.append(
                {
                    "noise": "white" if noise_ell == 0 else f"smooth (length-scale {noise_ell})",
                    "items": items,
                    "defined": len(rs),
                    "median_r": float(np.median(rs)),
                    "coverage": cov,
                    "coverage_se": math.sqrt(cov * (1 - cov) / len(rs)),
                }
            )
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--study", default="twofamily")
    ap.add_argument("--splits", type=int, default=400)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    import pandas as pd

    from oodcorr.settings.yaml_dialect import read_yaml

    study = ROOT / "studies" / args.study
    params = read_yaml((study / "params.yaml").read_text())
    pooled = pd.read_csv(study / "results" / "pooled_seeds.csv").query(
        "method == 'linear' and testset_a == 'scitail_real' and testset_b == 'snli_real'"
    )
    rng = np.random.default_rng(0)
    halves = {}
    for run in params["runs"]:
        for ts in ("scitail_real", "snli_real"):
            _, M, g = item_matrix(study / "runs" / run, ts)
            halves[f"{run}/{ts}"] = split_half(M, g, rng, args.splits)
            print(run, ts, {k: round(v, 2) for k, v in halves[f"{run}/{ts}"].items()}, flush=True)
    band = {}
    for row in pooled.itertuples(index=False):
        runs = [k for k, v in params["runs"].items() if v["model"] == row.model]
        band[row.model] = {
            "ell": float(row.ci2_ell),
            "likelihood_r": float(row.r_disattenuated),
            **bands(study, runs, float(row.ci2_ell), "scitail_real", "snli_real", "mnli_real"),
        }
        print(
            row.model,
            {k: (round(v["r"], 2) if isinstance(v, dict) else v) for k, v in band[row.model].items()},
            flush=True,
        )
    sim = own_model(args.reps, rng)
    for s in sim:
        print(s, flush=True)
    ratios = np.array([[v["centred"], v["rough"]] for v in halves.values()])
    out = {
        "study": args.study,
        "splits": args.splits,
        "reps": args.reps,
        "slow_modes": SLOW_MODES,
        "split_half": halves,
        "split_half_range": [float(ratios.min()), float(ratios.max())],
        "bands": band,
        "own_model": sim,
    }
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"split-half / estimated noise: {ratios.min():.2f}-{ratios.max():.2f}; wrote {args.out}")


if __name__ == "__main__":
    main()
