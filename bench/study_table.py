"""The findings table of a saved study, per OOD pair and family, from its committed tables (no analysis run).

  python bench/study_table.py sick            # prints the Markdown table docs/studies.md shows for studies/sick

Each cell: the seeds-pooled linear partial r of `balanced_margin` with its noise-corrected 95 % interval (the
likelihood's ci2), the reliabilities it used, and the even-weight estimate r_even with its interval; the last
column is the verdict across families from consistency.csv. A test holds docs/studies.md to this output.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
NAMES = {"scitail_real": "SciTail", "snli_real": "SNLI", "sick": "SICK", "hans_real": "HANS", "mnli_real": "MNLI"}
FAMILIES = {"gemma3-270m": "Gemma-3-270M", "smollm2-135m": "SmolLM2-135M"}


def _iv(lo, hi) -> str:
    if pd.isna(lo) or pd.isna(hi):
        return "no interval"
    return f"[{_num(lo)}, {_num(hi)}]"


def _num(x) -> str:
    return f"{x:+.2f}".replace("-", "−")


def table(name: str) -> str:
    res = ROOT / "studies" / name / "results"
    pooled = pd.read_csv(res / "pooled_seeds.csv").query("method == 'linear'")
    verdicts = pd.read_csv(res / "consistency.csv").query("method == 'linear'")
    models = sorted(pooled["model"].unique())
    seeds = {m: int(pooled.loc[pooled["model"] == m, "n_seeds"].max()) for m in models}
    head = ["pair", *(f"{FAMILIES.get(m, m)} ({seeds[m]} seed{'s' * (seeds[m] > 1)})" for m in models), "verdict"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (a, b), g in pooled.groupby(["testset_a", "testset_b"], sort=True):
        cells = [f"{NAMES.get(a, a)} ~ {NAMES.get(b, b)}"]
        for m in models:
            row = g[g["model"] == m]
            if row.empty:
                cells.append("not run")
                continue
            r = row.iloc[0]
            cells.append(f"{_num(r['r_disattenuated'] if pd.notna(r['r_disattenuated']) else r['r'])} "
                         f"{_iv(r['ci2_low'], r['ci2_high'])}, reliability {r['rel_a']:.2f} / {r['rel_b']:.2f}; "
                         f"even {_num(r['r_even'])} {_iv(r['ci2even_low'], r['ci2even_high'])}"
                         if pd.notna(r["r_even"]) else
                         f"{_num(r['r'])} {_iv(r['ci2_low'], r['ci2_high'])}")
        v = verdicts[(verdicts["testset_a"] == a) & (verdicts["testset_b"] == b)]
        cells.append(str(v.iloc[0]["verdict"]).replace("_", " ") if len(v) else "one family")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name", help="the study's folder under studies/")
    print(table(ap.parse_args().name))
