"""The ID smoother's kernel, measured: the likelihood interval (gp_interval) with the ID series smoothed by a squared
exponential (se), Matern 3/2 (the interval's own kernel), exponential (exp) or the kernel chosen by restricted
likelihood among the three (auto), on the same replicates of the grid's cells (bench/stats/interval_grid.py: its
generator, its seeding, its noise estimates; nothing simulated here).

Per cell and smoother: mean estimate and its Monte Carlo SE (the bias at rho = 0), coverage, the share of defined
intervals excluding 0 (false positives at rho = 0) with its MC SE, median width; per replicate the estimates and
bounds (paired comparisons between smoothers). One JSON line per (cell, smoother) appended to
bench/stats/results/id_smoother.jsonl; `--table` prints the summary table from it.

    python bench/stats/id_smoother.py --cells 'base|ar0.8|id128|S5|n40|rho0.0' --reps 200 --kernels se auto
    python bench/stats/id_smoother.py --table
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

import id_smoother_variants as variants  # noqa: E402
from interval_grid import ALPHA, cell_rngs, parse_key, replicate_seeds, simulate, source_hash  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "id_smoother.jsonl"
GRID = Path(__file__).resolve().parent / "results" / "interval_grid.jsonl"
GRID_OUT = Path(__file__).resolve().parent / "results" / "id_smoother_grid.json"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "statistics-reference.md"
MARKERS = ("<!-- id_smoother:start -->\n", "<!-- id_smoother:end -->")
# "<kernel>/leak": that smoother with the scale on its leak chosen by the interval's likelihood over LEAK_GRID
# "exact": no smoother, the noise-free ID series itself as the control (what any smoother can at best reach)
# "shared": the package's smoother (kernel, s2 and ell by the seeds' summed restricted likelihood)
KERNELS = ("se", "matern32", "exp", "auto", "shared", "se+exp", "bma", "rough_test", "se/leak", "bma/leak", "exact")
LEAK_GRID = (1.0, 1.5, 2.0, 3.0)


def run(key: str, reps: int, kernels) -> list[dict]:
    from oodcorr.stats.gp_interval import gp_interval

    cell = parse_key(key)
    got = {k: [] for k in kernels}
    secs = {k: 0.0 for k in kernels}
    for size, rng in cell_rngs(key, reps):  # the grid's own draws for this cell
        d = simulate(cell, size, rng)
        R, S, _ = d["series"]["x"].shape
        for r in range(R):
            seeds = replicate_seeds(d, r, "Vs")
            for k in kernels:
                t0 = time.perf_counter()
                if k == "exact":
                    exact = [
                        {**sd, "x": d["truth"]["x"][r, s], "Vx": np.zeros_like(sd["Vx"])} for s, sd in enumerate(seeds)
                    ]
                    res = gp_interval(exact, alpha=ALPHA)
                    secs[k] += time.perf_counter() - t0
                    got[k].append((res["r_hat"], res["ci_low"], res["ci_high"], res["rel_a"], res["rel_b"]))
                    continue
                kern, _, leak = k.partition("/")
                grid = LEAK_GRID if leak else (1.0,)
                if kern in variants.VARIANTS:  # a smoother measured and not adopted, put in the package's place
                    with variants.with_smoother(kern):
                        res = gp_interval(seeds, alpha=ALPHA, leak_grid=grid)
                else:
                    res = gp_interval(seeds, alpha=ALPHA, id_kernel=kern, leak_grid=grid)
                secs[k] += time.perf_counter() - t0
                got[k].append((res["r_hat"], res["ci_low"], res["ci_high"], res["rel_a"], res["rel_b"]))
    return [summarise(key, cell, k, np.array(got[k], float), secs[k]) for k in kernels]


def summarise(key, cell, kernel, arr, secs) -> dict:
    rho = cell["rho"]
    r_hat, lo, hi = arr[:, 0], arr[:, 1], arr[:, 2]
    ok = np.isfinite(lo) & np.isfinite(hi)
    n = int(ok.sum())
    cov = float(np.mean((lo[ok] <= rho) & (rho <= hi[ok]))) if n else math.nan
    exc = float(np.mean((lo[ok] > 0) | (hi[ok] < 0))) if n else math.nan
    fin = np.isfinite(r_hat)
    return {
        "key": key,
        **cell,
        "id_kernel": kernel,
        "replicates": len(arr),
        "defined": n,
        "bias": float(np.mean(r_hat[fin]) - rho),
        "bias_se": float(np.std(r_hat[fin], ddof=1) / math.sqrt(fin.sum())),
        "coverage": cov,
        "coverage_se": math.sqrt(cov * (1 - cov) / n) if n else math.nan,
        "excludes_0": exc,
        "excludes_0_se": math.sqrt(exc * (1 - exc) / n) if n else math.nan,
        "median_width": float(np.median(hi[ok] - lo[ok])) if n else math.nan,
        "seconds": round(secs, 1),
        "source": source_hash("new"),
        "r_hat": [round(v, 5) for v in r_hat.tolist()],
        "ci_low": [round(v, 5) for v in lo.tolist()],
        "ci_high": [round(v, 5) for v in hi.tolist()],
    }


def table(path: Path = OUT) -> str:
    """The docs table: per cell and smoother the row with the most replicates (later lines win ties)."""
    rows = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        old = rows.get((r["key"], r["id_kernel"]))
        if old is None or r["replicates"] >= old["replicates"]:
            rows[(r["key"], r["id_kernel"])] = r
    lines = [
        "| cell (seeds × checkpoints) | ID smoother | reps | bias ± MC SE | excludes 0 ± MC SE | coverage ± MC SE "
        "| median width |",
        "|---|---|---|---|---|---|---|",
    ]
    order = {k: i for i, k in enumerate(KERNELS)}
    for (key, k), r in sorted(rows.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 99))):
        c = parse_key(key)
        name = (
            f"{c['dependence']}{', rough ID' if c['variant'] == 'rough_id' else ''}, {c['id_items']} ID items, "
            f"{c['seeds']} seeds × {c['checkpoints']}, ρ {c['rho']:g}"
        )
        lines.append(
            f"| {name} | {k} | {r['replicates']} | {r['bias']:+.3f} ± {r['bias_se']:.3f} "
            f"| {r['excludes_0']:.3f} ± {r['excludes_0_se']:.3f} "
            f"| {r['coverage']:.3f} ± {r['coverage_se']:.3f} "
            f"| {r['median_width']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def grid_change(path: Path, now: str | None = None) -> dict:
    """The repository's grid (bench/stats/interval_grid.py's results) before and after the smoother changed: per cell,
    the new interval's last row, computed from the current sources, against the last row computed from other
    sources (the same replicates when the replicate counts agree: the cell key fixes the draws). Cells with no
    earlier row or other replicate counts are left out. Width ratio = median width after / before. `now`: the
    sources hash of the rows that count as after (default: the current sources'; the committed comparison's rows
    carry 89742077c96f, hashed before gp_smooth.py joined the grid's sources)."""
    from interval_grid import read_rows

    now = now or source_hash("new")
    last = {k: r for k, r in read_rows(path).items() if r.get("sources", {}).get("new") == now}
    before = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if "new" in r and r["key"] in last and r["sources"].get("new") != last[r["key"]]["sources"].get("new"):
            before[r["key"]] = r
    cells = []
    for key, b in before.items():
        a, b = last[key]["new"], b["new"]
        if a["replicates"] != b["replicates"] or not (a["median_width"] and b["median_width"]):
            continue
        cells.append(
            {
                "key": key,
                "replicates": a["replicates"],
                "coverage": [b["coverage"], a["coverage"]],
                "coverage_se": a["coverage_se"],
                "median_width": [b["median_width"], a["median_width"]],
                "width_ratio": a["median_width"] / b["median_width"],
                "excludes_0": [b["rejects_zero_defined"], a["rejects_zero_defined"]],
            }
        )
    return {"cells": cells}


def grid_change_table(change: dict) -> str:
    """Per scenario (variant, dependence, seeds): cells, width ratio median and max, coverage before and after (min),
    cells whose coverage fell below 0.93 - 2 MC SE."""
    groups = {}
    for c in change["cells"]:
        k = parse_key(c["key"])
        groups.setdefault((k["variant"], k["dependence"], k["seeds"]), []).append(c)
    lines = [
        "| scenario | seeds | cells | width after / before: median, max | coverage min: before → after "
        "| cells below 0.93 − 2 MC SE: before → after |",
        "|---|---|---|---|---|---|",
    ]
    for (variant, dep, seeds), cs in sorted(groups.items()):
        ratio = [c["width_ratio"] for c in cs]
        low = [sum(c["coverage"][i] < 0.93 - 2 * c["coverage_se"] for c in cs) for i in (0, 1)]
        name = dep if variant == "base" else f"{dep}, {variant.replace('_', ' ')}"
        lines.append(
            f"| {name} | {seeds} | {len(cs)} | {np.median(ratio):.3f}, {max(ratio):.3f} "
            f"| {min(c['coverage'][0] for c in cs):.3f} → {min(c['coverage'][1] for c in cs):.3f} "
            f"| {low[0]} → {low[1]} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", nargs="*", default=[])
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--kernels", nargs="*", default=list(KERNELS), choices=KERNELS)
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--table", action="store_true")
    ap.add_argument("--now", default=None, help="--grid-change: the sources hash of the rows after the change")
    ap.add_argument(
        "--grid-change",
        action="store_true",
        help="the repository grid's cells before and after the smoother changed: writes " + GRID_OUT.name,
    )
    ap.add_argument("--update-docs", action="store_true", help="write the table between the id_smoother markers")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if args.table:
        sys.stdout.write(table(out))
        return 0
    if args.grid_change:
        change = grid_change(GRID, args.now)
        GRID_OUT.write_text(json.dumps(change, indent=1) + "\n")
        sys.stdout.write(grid_change_table(change))
        return 0
    if args.update_docs:
        text = DOCS.read_text()
        head, rest = text.split(MARKERS[0], 1)
        DOCS.write_text(head + MARKERS[0] + table(out) + MARKERS[1] + rest.split(MARKERS[1], 1)[1])
        return 0
    for key in args.cells:
        for row in run(key, args.reps, args.kernels):
            with out.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
            print(
                f"{key} {row['id_kernel']:8s} bias {row['bias']:+.3f}±{row['bias_se']:.3f} "
                f"excl0 {row['excludes_0']:.3f}±{row['excludes_0_se']:.3f} cov {row['coverage']:.3f} "
                f"width {row['median_width']:.3f} {row['seconds']}s",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
