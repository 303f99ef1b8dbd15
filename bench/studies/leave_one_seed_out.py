"""Leave one seed out: each pair's verdict across families re-read with one run of the study left out, run by run.

  python bench/studies/leave_one_seed_out.py sick   # the summary; writes results/leave_one_seed_out_sick.csv

For every saved run of studies/NAME (one family's seed), `oodcorr analyze` on all the other runs, with the study's
own params, one thread, no MLflow: what `oodcorr study reanalyze` runs (tracking/saved_view.analyse_saved). Per OOD
pair and method it records the verdict across families with that run left out and each family's seeds-pooled
noise-free r with its interval (pooled_seeds.csv: r_disattenuated, ci2_low, ci2_high). A finding holds under
leave-one-seed-out when every leave-out keeps its verdict; the summary says in how many it did, and how far each
family's r moved. The saved runs must be present (`dvc --cd studies pull -R NAME/runs`).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd

NEEDS_ARGS = "a saved study's NAME"  # bench/run.py runs it only with --only

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from study_table import FAMILIES, NAMES, _num  # noqa: E402

from oodcorr.tracking.saved_view import analyse_saved  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
KEEP = ["method", "testset_a", "testset_b"]


def runs(sdir: Path) -> list[str]:
    keys = sorted(p.name[: -len(".dvc")] for p in (sdir / "runs").glob("*.dvc"))
    missing = [k for k in keys if not (sdir / "runs" / k / "eval" / "metrics.jsonl").is_file()]
    if missing:
        sys.exit(f"{sdir}: runs {', '.join(missing)} not pulled: dvc --cd studies pull -R {sdir.name}/runs")
    return keys


def read(out: Path, left_out: str) -> pd.DataFrame:
    """One analysis' verdicts with each family's pooled r and interval beside them, one row per method and pair."""
    verdicts = pd.read_csv(out / "consistency.csv")[[*KEEP, "verdict"]]
    pooled = pd.read_csv(out / "pooled_seeds.csv")
    for model, g in pooled.groupby("model"):
        g = g[[*KEEP, "n_seeds", "r_disattenuated", "ci2_low", "ci2_high"]].rename(
            columns=lambda c: c if c in KEEP else f"{model}:{c}"
        )
        verdicts = verdicts.merge(g, on=KEEP, how="left")
    return verdicts.assign(left_out=left_out)


def without(sdir: Path, keys: list[str], k: str) -> pd.DataFrame:
    """The analysis of every run but `k`, read as one frame. It runs on a copy of the study's params.yaml, so
    that analyses of one study can run side by side (an analysis locks the folder its params.yaml is in)."""
    with tempfile.TemporaryDirectory(prefix="oodcorr-loso-") as tmp:
        study, out = Path(tmp) / sdir.name, Path(tmp) / "results"
        study.mkdir()
        shutil.copy2(sdir / "params.yaml", study / "params.yaml")
        others = [sdir / "runs" / o / "eval" / "metrics.jsonl" for o in keys if o != k]
        analyse_saved(study, out, others, study)
        print(f"left out {k}", file=sys.stderr)
        return read(out, k)


def leave_one_out(name: str, jobs: int = 1) -> pd.DataFrame:
    """The committed tables (every run) and one analysis per run left out, `jobs` analyses at a time."""
    sdir = ROOT / "studies" / name
    keys = runs(sdir)
    with ThreadPoolExecutor(jobs) as pool:  # each analysis is a process of its own
        frames = list(pool.map(lambda k: without(sdir, keys, k), keys))
    return pd.concat([read(sdir / "results", ""), *frames], ignore_index=True)


def summary(df: pd.DataFrame, method: str = "linear") -> str:
    """Per pair: the verdict with every run, in how many leave-outs it held, and each family's r range."""
    df = df[df["method"] == method]
    models = sorted(c.split(":")[0] for c in df.columns if c.endswith(":r_disattenuated"))
    head = [
        "pair",
        "verdict (all runs)",
        "held with one run left out",
        *(FAMILIES.get(m, m) + " r, range" for m in models),
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (a, b), g in df.groupby(["testset_a", "testset_b"], sort=True):
        full, loo = g[g["left_out"] == ""].iloc[0], g[g["left_out"] != ""]
        held = loo[loo["verdict"] == full["verdict"]]
        other = sorted(set(loo.loc[loo["verdict"] != full["verdict"], "verdict"]))
        cells = [
            f"{NAMES.get(a, a)} ~ {NAMES.get(b, b)}",
            full["verdict"].replace("_", " "),
            f"{len(held)} of {len(loo)}"
            + (f" (else {', '.join(v.replace('_', ' ') for v in other)})" if other else ""),
        ]
        for m in models:
            r = loo[f"{m}:r_disattenuated"].dropna()
            cells.append(f"{_num(full[f'{m}:r_disattenuated'])}, {_num(r.min())} to {_num(r.max())}" if len(r) else "–")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name", help="the saved study's folder under studies/")
    ap.add_argument("--method", default="linear", help="the method the summary reads (the CSV keeps every one)")
    ap.add_argument("--reuse", action="store_true", help="summarise the CSV written before (no analysis run)")
    ap.add_argument("--jobs", type=int, default=1, help="analyses at a time (one thread each)")
    args = ap.parse_args()
    path = RESULTS / f"leave_one_seed_out_{args.name}.csv"
    if args.reuse:
        df = pd.read_csv(path).fillna({"left_out": ""})
    else:
        df = leave_one_out(args.name, args.jobs)
        RESULTS.mkdir(exist_ok=True)
        df.to_csv(path, index=False)
    print(summary(df, args.method))
