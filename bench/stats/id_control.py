"""How the ID control is handled, measured: the likelihood interval with the ID series smoothed by its own
Gaussian process (the default, id_control="latent") against regressing on the observed, noisy ID series with
its item noise as the leak ("observed"), each with a 128- and a 512-item ID testset ("more ID items by design").

Two generators: the grid's (bench/stats/interval_grid.py: its draws, smooth trajectories gp0.2, 3 seeds, 20
checkpoints, rho 0 and 0.5; every seed its own learning curve) and `curve`, a second one in this file: one
learning curve 1.5 (1 - exp(-t / 0.3)) plus a small smooth wiggle shared by all seeds, OOD abilities 0.7 and 0.8
times it plus the coregionalised signals (squared-exponential, length-scale 0.2, SD 0.3), items (balanced labels,
difficulty N(0, 1), discrimination N(1, 0.3^2), noise SD 1.5 logits) redrawn for every seed. Prints a table (mean
estimate, coverage, share excluding 0, median width) and writes bench/stats/results/id_control.json.

    python bench/stats/id_control.py [--reps 60] [--generator grid|curve|both]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from interval_grid import cell_key, cell_rngs, replicate_seeds, simulate  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "id_control.json"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "statistics-reference.md"
MARKERS = ("<!-- id_control:start -->\n", "<!-- id_control:end -->")
CONTROLS = ("latent", "observed")


def run(cell: dict, reps: int, id_control: str) -> dict:
    from oodcorr.stats.gp_interval import gp_interval

    out = []
    for size, rng in cell_rngs(cell_key(cell), reps):  # the grid's own draws for this cell
        d = simulate(cell, size, rng)
        R, S, _ = d["series"]["x"].shape
        for r in range(R):
            seeds = replicate_seeds(d, r, "V")
            res = gp_interval(seeds, id_control=id_control)
            out.append((res["r_hat"], res["ci_low"], res["ci_high"]))
    return summarise(cell, "grid", id_control, *(np.array(c, float) for c in zip(*out)))


def curve_seed(
    rng, n: int, rho: float, id_items: int, ell: float = 0.2, sig: float = 0.3, tau: float = 1.5, items: int = 128
) -> dict:
    """One seed of the `curve` generator (module notes)."""
    from oodcorr.stats.item_cov import noise_cov

    t = np.linspace(0, 1, n)
    L = np.linalg.cholesky(np.exp(-0.5 * (np.subtract.outer(t, t) / ell) ** 2) + 1e-8 * np.eye(n))
    w1, w2 = L @ rng.standard_normal(n), L @ rng.standard_normal(n)
    u, v = sig * w1, sig * (rho * w1 + math.sqrt(1 - rho**2) * w2)
    thx = 1.5 * (1 - np.exp(-t / 0.3)) + 0.05 * (L @ rng.standard_normal(n))
    out = {"t": t}
    for key, th, k in (("x", thx, id_items), ("a", 0.7 * thx + u, items), ("b", 0.8 * thx + v, items)):
        y = np.where(np.arange(k) % 2 == 0, 1, -1)
        s, c = 1 + 0.3 * rng.standard_normal(k), rng.standard_normal(k)
        score = y[None] * (y[None] * (s[None] * th[:, None] - c[None]) + tau * rng.standard_normal((n, k)))
        out["y" + key if key != "x" else "x"] = 0.5 * (score[:, y == 1].mean(1) + score[:, y == -1].mean(1))
        out["V" + key] = noise_cov(score, y, {1: 0.5, -1: 0.5})
    return out


def run_curve(cell: dict, reps: int, id_control: str) -> dict:
    from oodcorr.stats.gp_interval import gp_interval

    rng = np.random.default_rng([7, cell["id_items"], int(10 * cell["rho"])])  # the same draws for both controls
    got = []
    for _ in range(reps):
        seeds = [curve_seed(rng, cell["checkpoints"], cell["rho"], cell["id_items"]) for _ in range(cell["seeds"])]
        res = gp_interval(seeds, id_control=id_control)
        got.append((res["r_hat"], res["ci_low"], res["ci_high"]))
    return summarise(cell, "curve", id_control, *(np.array(c, float) for c in zip(*got)))


def summarise(cell, generator, id_control, r_hat, lo, hi) -> dict:
    rho = cell["rho"]
    ok = np.isfinite(lo) & np.isfinite(hi)
    cov = float(np.mean((lo[ok] <= rho) & (rho <= hi[ok])))
    return {
        "generator": generator,
        "cell": cell_key(cell),
        "id_control": id_control,
        "reps": len(r_hat),
        "rho": rho,
        "mean_r_hat": float(np.nanmean(r_hat)),
        "coverage": cov,
        "coverage_mc_se": math.sqrt(cov * (1 - cov) / max(ok.sum(), 1)),
        "excludes_0": float(np.mean((lo[ok] > 0) | (hi[ok] < 0))),
        "median_width": float(np.median(hi[ok] - lo[ok])),
        "defined": float(ok.mean()),
    }


def table(rows: list[dict]) -> str:
    lines = [
        "| generator | ID control | ID items | rho | mean estimate | coverage | excludes 0 | median width |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        items = r["cell"].split("|")[2][2:]
        lines.append(
            f"| {r.get('generator', 'grid')} | {r['id_control']} | {items} | {r['rho']:.1f} | "
            f"{r['mean_r_hat']:+.3f} | {r['coverage']:.3f} ± {r['coverage_mc_se']:.3f} | "
            f"{r['excludes_0']:.3f} | {r['median_width']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--generator", choices=("grid", "curve", "both"), default="both")
    ap.add_argument("--markdown", action="store_true", help="print the table from the results file")
    ap.add_argument(
        "--update-docs",
        action="store_true",
        help="write it between the id_control markers of docs/statistics-reference.md",
    )
    args = ap.parse_args(argv)
    if args.markdown:
        sys.stdout.write(table(json.loads(OUT.read_text())["rows"]))
        return 0
    if args.update_docs:
        text = DOCS.read_text()
        head, rest = text.split(MARKERS[0], 1)
        DOCS.write_text(
            head + MARKERS[0] + table(json.loads(OUT.read_text())["rows"]) + MARKERS[1] + rest.split(MARKERS[1], 1)[1]
        )
        return 0
    rows = []
    t0 = time.time()
    gens = ("grid", "curve") if args.generator == "both" else (args.generator,)
    for gen in gens:
        for id_items in (128, 512):
            for rho in (0.0, 0.5):
                cell = {
                    "variant": "base",
                    "dependence": "gp0.2",
                    "id_items": id_items,
                    "seeds": 3,
                    "checkpoints": 20,
                    "rho": rho,
                }
                for control in CONTROLS:
                    rows.append((run if gen == "grid" else run_curve)(cell, args.reps, control))
                    print(json.dumps(rows[-1]), flush=True)
    kept = []  # rows of the generators not run this time stay
    if OUT.exists():
        kept = [r for r in json.loads(OUT.read_text())["rows"] if r.get("generator", "grid") not in gens]
    rows = sorted(kept + rows, key=lambda r: (r.get("generator", "grid") != "grid", r["cell"], r["id_control"]))
    OUT.write_text(json.dumps({"reps": args.reps, "seconds": round(time.time() - t0), "rows": rows}, indent=1))
    sys.stdout.write(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
