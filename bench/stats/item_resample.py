"""Does the interval hold on real data? A saved study's items re-drawn at smaller sizes, each draw analysed as a
study of its own, against the estimate from all the items.

The trajectories (checkpoints, seeds) stay those of the study; only which items score them changes. Every draw
keeps the same items for every run and checkpoint (as a study does) and is stratified by gold label. For each
draw and family the pooled linear row of the pair gives a noise-free r and its 95 % interval; the reference is
the same row from all the items. A draw's interval "holds" when it contains the reference. With the trajectories
shared, that should happen in at least 95 % of draws if the interval's item-noise part is right (the reference
carries item noise of its own, less than a draw's); far fewer means the interval is too narrow for the item noise
at that size.

  python bench/stats/item_resample.py --draws 40                       # writes bench/stats/results/item_resample.json
  python bench/stats/item_resample.py --study twofamily --sizes mnli_real=128,scitail_real=256,snli_real=256
  python bench/stats/item_resample.py --markdown    # the table in docs/statistics-reference.md, from committed results
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from oodcorr.settings.yaml_dialect import read_yaml  # noqa: E402
from oodcorr.stats.metrics import table_metrics  # noqa: E402

OUT = ROOT / "bench" / "stats" / "results" / "item_resample.json"
TABLED = (OUT, OUT.with_name("item_resample_id512.json"))  # the results docs/statistics-reference.md shows
FAMILY = {"gemma3-270m": "Gemma", "smollm2-135m": "SmolLM2"}
TESTSET = {"mnli_real": "MNLI", "scitail_real": "SciTail", "snli_real": "SNLI"}


def draw_ids(tables: dict, sizes: dict, rng) -> dict:
    """{testset: the ids kept}: `sizes[testset]` items stratified by gold label (all items where none is given)."""
    keep = {}
    for name, t in tables.items():
        n = sizes.get(name)
        if n is None or n >= len(t):
            keep[name] = set(t["id"])
            continue
        ids = []
        for _, g in t.groupby("label"):
            k = int(round(n * len(g) / len(t)))
            ids += list(rng.choice(g["id"].to_numpy(), size=k, replace=False))
        keep[name] = set(ids)
    return keep


def write_draw(study: Path, params: dict, runs: list[str], keep: dict | None, dst: Path) -> Path:
    """A saved study's layout in `dst` (params.yaml, runs/<run>/): the runs' predictions restricted to `keep` (None:
    all) and their metrics.jsonl recomputed from them."""
    import pandas as pd

    for run in runs:
        src, out = study / "runs" / run, dst / "runs" / run
        (out / "eval").mkdir(parents=True)
        shutil.copy2(src / "run.json", out / "run.json")
        lines = []
        with open(src / "eval" / "metrics.jsonl") as fh:
            for line in fh:
                row = json.loads(line)
                if row.get("slice") is not None:
                    continue
                rel = Path("predictions") / f"step-{row['step']}" / f"{row['testset']}.parquet"
                table = pd.read_parquet(src / "eval" / rel)
                if keep is not None:
                    table = table[table["id"].isin(keep[row["testset"]])]
                (out / "eval" / rel).parent.mkdir(parents=True, exist_ok=True)
                table.to_parquet(out / "eval" / rel, index=False)
                for k in ("f1_non_entailment", "macro_f1"):  # not recomputed here; the analysis does not read them
                    row.pop(k, None)
                row.update(table_metrics(table), n=len(table))
                lines.append(json.dumps(row))
        (out / "eval" / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    (dst / "params.yaml").write_text(json.dumps(params))  # YAML is a superset of JSON
    return dst


def analyse(draw: Path, runs: list[str], a: str, b: str) -> dict:
    """{model: (r, ci_low, ci_high, rel_a, rel_b, n_eff, length-scale)} of the pooled linear row of the pair, and
    "per_seed": {model/seed: (r, ci_low, ci_high)}, from the analysis a saved study gets (launch.saved.analyse)."""
    import pandas as pd

    from oodcorr.launch.saved import analyse as analyse_saved

    out = draw / "out"
    analyse_saved(draw, runs, out)
    query = f"method == 'linear' and testset_a == '{a}' and testset_b == '{b}'"
    pooled = pd.read_csv(out / "pooled_seeds.csv").query(query)
    res = {
        r.model: [
            float(r.r_disattenuated),
            float(r.ci2_low),
            float(r.ci2_high),
            float(r.rel_a),
            float(r.rel_b),
            float(r.n_eff),
            float(r.ci2_ell),
        ]
        for r in pooled.itertuples(index=False)
    }
    seeds = pd.read_csv(out / "partial_correlations.csv").query(query)
    res["per_seed"] = {
        f"{r.model}/{int(r.seed)}": [float(r.r_disattenuated), float(r.ci2_low), float(r.ci2_high)]
        for r in seeds.itertuples(index=False)
    }
    return res


def draw_rows(result: dict, model: str, reliability_min: float = 0.5) -> dict:
    """What the table says of one family's draws: how often the interval contains the all-items r (from above /
    below), the draws passing the reliability gate, those excluding 0 and positive, the r's median and range."""
    ref = result["summary"][model]["reference"]["r"]
    rows = np.array([d[model] for d in result["per_draw"]], float)
    lo, hi, r = rows[:, 1], rows[:, 2], rows[:, 0]
    holds = (lo <= ref) & (ref <= hi)
    gate = (rows[:, 3] >= reliability_min) & (rows[:, 4] >= reliability_min)
    sig = gate & ((lo > 0) | (hi < 0))
    return {
        "holds": float(holds.mean()),
        "se": float(np.sqrt(holds.mean() * (1 - holds.mean()) / len(rows))),
        "above": int((lo > ref).sum()),
        "below": int((hi < ref).sum()),
        "draws": len(rows),
        "gate": int(gate.sum()),
        "sig": int(sig.sum()),
        "positive": int((sig & (r > 0)).sum()),
        "median": float(np.median(r)),
        "min": float(r.min()),
        "max": float(r.max()),
        "width": float(np.median(hi - lo)),
    }


def markdown(paths=TABLED) -> str:
    def f(v):
        return f"{v:+.2f}".replace("-", "−")

    lines = []
    for path in paths:
        res = json.loads(Path(path).read_text())
        sizes = ", ".join(f"{TESTSET[t]} {res['sizes'].get(t, 512)}" for t in TESTSET)
        for model in res["summary"]:
            s = draw_rows(res, model)
            lines.append(
                f"| {sizes} | {FAMILY[model]} | {s['holds']:.2f} ± {s['se']:.2f} ({s['above']} above, "
                f"{s['below']} below) | {s['gate']} of {s['draws']} | {s['sig']} / {s['positive']} | "
                f"{f(s['median'])} ({f(s['min'])} to {f(s['max'])}) | {s['width']:.2f} |"
            )
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--study", default="twofamily")
    ap.add_argument("--pair", nargs=2, default=["scitail_real", "snli_real"])
    ap.add_argument(
        "--sizes",
        default="mnli_real=128,scitail_real=256,snli_real=256",
        help="testset=items per draw (the others keep all their items)",
    )
    ap.add_argument("--draws", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--markdown", action="store_true", help="print the docs table from the committed results")
    args = ap.parse_args()
    if args.markdown:
        print(markdown())
        return
    import pandas as pd

    study = ROOT / "studies" / args.study
    params = read_yaml((study / "params.yaml").read_text())
    runs = [k for k in params["runs"] if (study / "runs" / k / "eval" / "metrics.jsonl").exists()]
    sizes = {k: int(v) for k, v in (s.split("=") for s in args.sizes.split(","))}
    params["analyze"].update(methods=["linear"], bootstrap=0)
    first = study / "runs" / runs[0] / "eval" / "predictions" / "step-0"
    tables = {p.stem: pd.read_parquet(p) for p in first.glob("*.parquet")}
    rng = np.random.default_rng(args.seed)
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="oodcorr-resample-") as tmp:
        tmp = Path(tmp)
        ref = analyse(write_draw(study, params, runs, None, tmp / "all"), runs, *args.pair)
        draws = []
        for i in range(args.draws):
            keep = draw_ids(tables, sizes, rng)
            d = tmp / f"d{i}"
            draws.append(analyse(write_draw(study, params, runs, keep, d), runs, *args.pair))
            shutil.rmtree(d)
            print(
                f"draw {i + 1}/{args.draws}: "
                + ", ".join(
                    f"{m} {v[0]:+.2f} [{v[1]:+.2f}, {v[2]:+.2f}] rel {v[3]:.2f}/{v[4]:.2f} "
                    f"n_eff {v[5]:.0f} ell {v[6]:.2f}"
                    for m, v in draws[-1].items()
                    if m != "per_seed"
                ),
                flush=True,
            )
    summary = {}
    for model, (r, lo, hi, ra, rb, neff, ell) in ((m, v) for m, v in ref.items() if m != "per_seed"):
        rows = np.array([d[model] for d in draws if model in d], float)
        ok = np.isfinite(rows[:, 1])
        holds = (rows[ok, 1] <= r) & (r <= rows[ok, 2])
        summary[model] = {
            "reference": {"r": r, "ci_low": lo, "ci_high": hi, "rel_a": ra, "rel_b": rb, "n_eff": neff, "ell": ell},
            "draws": int(len(rows)),
            "defined": int(ok.sum()),
            "holds": float(holds.mean()) if ok.any() else None,
            "holds_se": float(np.sqrt(holds.mean() * (1 - holds.mean()) / ok.sum())) if ok.any() else None,
            "excludes_zero": float(((rows[ok, 1] > 0) | (rows[ok, 2] < 0)).mean()) if ok.any() else None,
            "median_width": float(np.median(rows[ok, 2] - rows[ok, 1])) if ok.any() else None,
            "r_sd": float(np.std(np.arctanh(np.clip(rows[ok, 0], -0.999, 0.999)), ddof=1)) if ok.sum() > 1 else None,
            "median_rel": [float(np.median(rows[:, 3])), float(np.median(rows[:, 4]))],
            "median_n_eff": float(np.median(rows[:, 5])),
            "median_ell": float(np.nanmedian(rows[:, 6])),
        }
    out = {
        "study": args.study,
        "pair": args.pair,
        "sizes": sizes,
        "draws": args.draws,
        "seed": args.seed,
        "seconds": round(time.time() - t0, 1),
        "summary": summary,
        "reference_per_seed": ref["per_seed"],
        "per_seed_median_r": {
            k: float(np.median([d["per_seed"][k][0] for d in draws if k in d["per_seed"]])) for k in ref["per_seed"]
        },
        "per_draw": draws,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    for model, s in summary.items():
        ref_ = s["reference"]
        print(
            f"{model}: all items {ref_['r']:+.2f} [{ref_['ci_low']:+.2f}, {ref_['ci_high']:+.2f}]; draws at "
            f"{sizes}: interval holds in {s['holds']:.2f} ± {s['holds_se']:.2f} of {s['defined']} defined, "
            f"excludes 0 in {s['excludes_zero']:.2f}, median width {s['median_width']:.2f}"
        )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
