"""The even-weight estimate (r_even, oodcorr.stats.gp_even) on a real study's own items, beside the likelihood's.

As bench/stats/item_resample.py, but lighter (the pair's series rebuilt directly, no full analysis per draw): the saved
study's SciTail and SNLI items re-drawn at half their number (label-stratified, the same items for every run and
checkpoint), and once more with the MNLI items cut to a quarter too; per draw and family the seeds pooled, and
whether each interval contains its own all-items estimate. With the trajectories shared, only item noise separates a
draw from the reference.

  python bench/stats/even_resample.py --draws 20      # writes bench/stats/results/even_resample.json
  python bench/stats/even_resample.py --update-docs   # the two tables in docs/statistics-reference.md, from the results

The grid table compares the two intervals on the simulation grid's replicates (bench/stats/interval_grid.py: the
likelihood in interval_grid.jsonl, `--methods even` in interval_grid_even.jsonl; the same replicates per cell).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench" / "stats"))

from real_noise_check import item_matrix, series_and_noise  # noqa: E402

from oodcorr.stats.gp_even import even_interval  # noqa: E402
from oodcorr.stats.gp_interval import gp_interval  # noqa: E402

OUT = ROOT / "bench" / "stats" / "results" / "even_resample.json"
GRID = ROOT / "bench" / "stats" / "results" / "interval_grid.jsonl"
GRID_EVEN = ROOT / "bench" / "stats" / "results" / "interval_grid_even.jsonl"
DOCS = ROOT / "docs" / "statistics-reference.md"
RHOS = (0.0, 0.5, 0.8)
FAMILIES = {"gemma3-270m": "Gemma", "smollm2-135m": "SmolLM2"}
ROLES = {"x": "mnli_real", "ya": "scitail_real", "yb": "snli_real"}
DESIGNS = {
    "SciTail, SNLI halved": {"ya": 0.5, "yb": 0.5},
    "SciTail, SNLI halved, MNLI a quarter": {"x": 0.25, "ya": 0.5, "yb": 0.5},
}


def load(study: Path, family: str, seeds=range(4)) -> list[dict]:
    return [
        {k: item_matrix(study / "runs" / f"{family}_mnli_real_1024_s{s}", ts) for k, ts in ROLES.items()} for s in seeds
    ]


def stratified(gold, frac, rng) -> np.ndarray:
    gold = np.asarray(gold, bool)
    return np.sort(
        np.concatenate(
            [
                rng.choice(np.flatnonzero(gold == c), int(round(frac * (gold == c).sum())), replace=False)
                for c in (True, False)
            ]
        )
    )


def seeds_of(raw: list[dict], keep: dict) -> list[dict]:
    out = []
    for run in raw:
        s = {}
        for key, (t, M, g) in run.items():
            if key in keep:
                M, g = M[:, keep[key]], g[keep[key]]
            s[key], s["V" + key[-1]] = series_and_noise(M, g)
        s["t"] = t
        out.append(s)
    return out


def both(seeds: list[dict], seed: int = 0) -> dict:
    fit = gp_interval(seeds)
    ev = even_interval(fit["terms"], fit, seed=seed)
    return {"likelihood": [fit["r_hat"], fit["ci_low"], fit["ci_high"]], "even": [ev["r"], ev["ci_low"], ev["ci_high"]]}


def _rows(path: Path, method: str) -> dict:
    rows = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if method in r:
            rows[r["key"]] = r  # the last line of a key wins
    return rows


def _f(v, fmt="{:.2f}"):
    return "–" if v is None else fmt.format(v)


def grid_markdown() -> str:
    """Per grid group (dependence, ID items, seeds, checkpoints) where both intervals ran: coverage at rho 0 / 0.5 /
    0.8, false-distinguishable at 0, power and median width at 0.5, likelihood | even."""
    new, even = _rows(GRID, "new"), _rows(GRID_EVEN, "even")
    groups = sorted({k.rsplit("|", 1)[0] for k in even if all(f"{k.rsplit('|', 1)[0]}|rho{r}" in new for r in RHOS)})
    out = [
        "| trajectories | ID items | seeds | checkpoints | coverage at ρ 0 / 0.5 / 0.8: likelihood "
        "| the same: even | false-distinguishable at 0: likelihood / even | power at 0.5: likelihood / even "
        "| median width at 0.5: likelihood / even |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for g in groups:
        _, dep, idi, S, n = g.split("|")
        if not all(f"{g}|rho{r}" in even for r in RHOS):
            continue
        c = {m: [rows[f"{g}|rho{r}"][m] for r in RHOS] for m, rows in (("new", new), ("even", even))}
        cov = " / ".join(_f(x["coverage"]) for x in c["new"]) + " | " + " / ".join(_f(x["coverage"]) for x in c["even"])
        out.append(
            f"| {dep} | {idi[2:]} | {S[1:]} | {n[1:]} | {cov} | {_f(c['new'][0]['false_distinguishable'])} / "
            f"{_f(c['even'][0]['false_distinguishable'])} | {_f(c['new'][1]['power'])} / "
            f"{_f(c['even'][1]['power'])} | {_f(c['new'][1]['median_width'])} / "
            f"{_f(c['even'][1]['median_width'])} |"
        )
    return "\n".join(out) + "\n"


def resample_markdown() -> str:
    res = json.loads(OUT.read_text())
    out = [
        "| family | items per draw | interval contains its all-items estimate: likelihood / even | median estimate:"
        " likelihood / even (all items) | median width: likelihood / even |",
        "|---|---|---|---|---|",
    ]
    for name, fam in res["families"].items():
        ref = fam["all_items"]
        for design, d in fam["designs"].items():
            lk, ev = d["summary"]["likelihood"], d["summary"]["even"]
            out.append(
                f"| {name} | {design} | {lk['holds']} of {lk['defined']} / {ev['holds']} of {ev['defined']} | "
                f"{lk['median_r']:+.2f} ({ref['likelihood'][0]:+.2f}) / {ev['median_r']:+.2f} "
                f"({ref['even'][0]:+.2f}) | {_f(lk['median_width'])} / {_f(ev['median_width'])} |"
            )
    return "\n".join(out) + "\n"


def update_docs() -> None:
    text = DOCS.read_text()
    for tag, table in (("even_grid", grid_markdown()), ("even_resample", resample_markdown())):
        head, rest = text.split(f"<!-- {tag}:begin -->\n")
        _, tail = rest.split(f"<!-- {tag}:end -->")
        text = f"{head}<!-- {tag}:begin -->\n{table}<!-- {tag}:end -->{tail}"
    DOCS.write_text(text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--study", default="twofamily")
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--update-docs", action="store_true", help="write the tables into docs/statistics-reference.md")
    args = ap.parse_args(argv)
    if args.update_docs:
        update_docs()
        return 0
    study = ROOT / "studies" / args.study
    t0 = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    res = {"study": args.study, "draws": args.draws, "seed": args.seed, "families": {}}
    for fam, name in FAMILIES.items():
        raw = load(study, fam)
        ref = both(seeds_of(raw, {}))
        fam_out = {"all_items": ref, "designs": {}}
        for design, fracs in DESIGNS.items():
            rows = []
            for i in range(args.draws):
                keep = {k: stratified(raw[0][k][2], f, rng) for k, f in fracs.items()}
                rows.append(both(seeds_of(raw, keep), seed=i))
            summ = {}
            for est in ("likelihood", "even"):
                v = np.array([r[est] for r in rows], float)
                ok = np.isfinite(v[:, 1])
                summ[est] = {
                    "holds": int(((v[:, 1] <= ref[est][0]) & (ref[est][0] <= v[:, 2]))[ok].sum()),
                    "defined": int(ok.sum()),
                    "median_r": float(np.nanmedian(v[:, 0])),
                    "median_width": float(np.median((v[:, 2] - v[:, 1])[ok])) if ok.any() else None,
                    "excluding_0_positive": int(((v[:, 1] > 0) & ok).sum()),
                    "excluding_0_negative": int(((v[:, 2] < 0) & ok).sum()),
                }
            fam_out["designs"][design] = {"summary": summ, "draws": rows}
            print(
                f"{name:8s} {design:38s} "
                + "  ".join(
                    f"{e}: holds {s['holds']}/{s['defined']} median r {s['median_r']:+.2f} "
                    f"width {s['median_width']:.2f}"
                    for e, s in summ.items()
                ),
                flush=True,
            )
        res["families"][name] = fam_out
    res["seconds"] = round(time.perf_counter() - t0, 1)
    OUT.write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)} ({res['seconds']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
