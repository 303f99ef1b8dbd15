"""The findings table of a saved study, per OOD pair and family, from its committed tables (no analysis run).

  python bench/studies/study_table.py sick            # prints the Markdown table docs/studies.md shows for studies/sick
  python bench/studies/study_table.py sick --across   # each family's r and interval, and across the two
  python bench/studies/study_table.py twofamily sick --findings   # the README's one table: those rows, study by study,
                                                          # with the verdict under accuracy beside each
  python bench/studies/study_table.py sick --facts    # what the pages say beside it: seeds alone, rank/GAM, definedness

Each cell: the seeds-pooled linear partial r of `balanced_margin` with its noise-corrected 95 % interval (the
likelihood's ci2), the reliabilities it used, and the even-weight estimate r_even with its interval; the last
column is the verdict across families from consistency.csv. A test holds docs/studies.md to this output.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

NEEDS_ARGS = "a saved study's NAME"  # bench/run.py runs it only with --only

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from oodcorr.settings.analyze import AnalyzeSettings  # noqa: E402

FLOOR = AnalyzeSettings.reliability_min  # a verdict reads a pair only where both reliabilities reach it
NAMES = {
    "scitail_real": "SciTail",
    "snli_real": "SNLI",
    "sick": "SICK",
    "hans_real": "HANS",
    "mnli_real": "MNLI",
    "anli_r1_real": "ANLI R1",
    "paws_qqp_real": "PAWS-QQP",
    "rte_real": "RTE",
    "wnli_real": "WNLI",
}
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
            cells.append(
                f"{_cell(r)}, reliability {r['rel_a']:.2f} / {r['rel_b']:.2f}; "
                f"even {_num(r['r_even'])} {_iv(r['ci2even_low'], r['ci2even_high'])}"
                if pd.notna(r["r_even"])
                else _cell(r)
            )
        v = verdicts[(verdicts["testset_a"] == a) & (verdicts["testset_b"] == b)]
        cells.append(str(v.iloc[0]["verdict"]).replace("_", " ") if len(v) else "one family")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(r) -> str:
    """A row's noise-free r and its own interval (ci2), as the pages quote them; '–' where that r is undefined."""
    point = r["r_disattenuated"] if isinstance(r, pd.Series) else r.r_disattenuated
    lo, hi = (r["ci2_low"], r["ci2_high"]) if isinstance(r, pd.Series) else (r.ci2_low, r.ci2_high)
    return f"{_num(point) if pd.notna(point) else '–'} {_iv(lo, hi)}"


ACROSS = {
    "consistent_positive": "**same sign, positive**",
    "consistent_negative": "**same sign, negative**",
    "model_dependent": "**opposite signs**",
    "consistent_null": "**no relation beyond ±0.3 in either**",
}


def _unsettled(v: str, rows: pd.DataFrame, a: str, b: str) -> str:
    """Why a pair is unsettled, in words: the testset below reliability 0.5, or the intervals that include 0."""
    if v == "unreliable":
        for t, col in ((a, "rel_a"), (b, "rel_b")):
            if (rows[col] < FLOOR).any():
                return f"unsettled: {NAMES.get(t, t)} reliability " + " / ".join(f"{x:.2f}" for x in rows[col])
    short = [
        FAMILIES.get(r.model, r.model).split("-")[0] for r in rows.itertuples() if not (r.ci2_low > 0 or r.ci2_high < 0)
    ]
    if len(short) == len(rows):
        return "unsettled: both intervals include 0"
    return f"unsettled: {' and '.join(short)}'s interval includes 0"


def metric(name: str) -> str:
    """The metric a saved study's verdicts use (its params' analyze.metric)."""
    import yaml

    params = yaml.safe_load((ROOT / "studies" / name / "params.yaml").read_text())
    return (params.get("analyze") or {}).get("metric") or AnalyzeSettings.metric


ACCURACY = {
    "consistent_positive": "same sign, positive",
    "consistent_negative": "same sign, negative",
    "model_dependent": "opposite signs",
    "consistent_null": "no relation beyond ±0.3",
    "insufficient_evidence": "unsettled",
    "unreliable": "unsettled",
}


def _accuracy(v: str, g: pd.DataFrame) -> str:
    """The verdict the same pair gets under accuracy (consistency.csv's verdict_accuracy), with each family's
    noise-free r of accuracy where the testsets are reliable enough to read it."""
    words = ACCURACY.get(v, v.replace("_", " "))
    if v == "unreliable":
        return f"{words} (unreliable)"
    return f"{words}: " + " / ".join(_num(x) for x in g["r_disattenuated_accuracy"])


def across(name: str, settled: bool = False) -> str:
    """The README's table: per pair, each family's seeds-pooled noise-free r of the study's metric with its
    interval, in words what the two families say together (the verdict of consistency.csv), and the verdict the
    same pair gets under accuracy beside it (verdict_accuracy, each family's noise-free r of accuracy). With
    `settled`, only the pairs the two families settle (a verdict in ACROSS)."""
    res = ROOT / "studies" / name / "results"
    pooled = pd.read_csv(res / "pooled_seeds.csv").query("method == 'linear'").sort_values("model")
    verdicts = pd.read_csv(res / "consistency.csv").query("method == 'linear'")
    models = sorted(pooled["model"].unique())
    head = ["pair", *(FAMILIES.get(m, m) for m in models), f"across the two families ({metric(name)})", "accuracy"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (a, b), g in pooled.groupby(["testset_a", "testset_b"], sort=True):
        cells = [f"{NAMES.get(a, a)} ~ {NAMES.get(b, b)}"]
        cells += [_cell(r) for r in g.itertuples()]
        row = verdicts[(verdicts["testset_a"] == a) & (verdicts["testset_b"] == b)].iloc[0]
        v = str(row["verdict"])
        if settled and v not in ACROSS:
            continue
        cells.append(ACROSS.get(v) or _unsettled(v, g, a, b))
        cells.append(_accuracy(str(row["verdict_accuracy"]), g))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def findings(names: list[str], settled_only: tuple[str, ...] = ()) -> str:
    """The README's one table of what the saved studies found: across()'s rows of each study, the study named
    first; of the studies in `settled_only`, the settled pairs alone (the rest are counted in words)."""
    tables = [across(n, settled=n in settled_only).splitlines() for n in names]
    assert len({t[0] for t in tables}) == 1, "the studies' families differ"
    lines = ["| study " + tables[0][0], "|---" + tables[0][1]]
    return "\n".join(lines + [f"| {n} {row}" for n, t in zip(names, tables) for row in t[2:]])


def defined(name: str) -> dict:
    """{method: (defined, rows)} over the per-run rows whose two fitted reliabilities are both >= 0.5, and
    ("pooled", method) over the seeds-pooled rows: how often the data gave the interval."""
    res = ROOT / "studies" / name / "results"
    runs, pooled = (pd.read_csv(res / f) for f in ("partial_correlations.csv", "pooled_seeds.csv"))
    out = {}
    for method in ("linear", "rank", "gam"):
        rows = runs[(runs["method"] == method) & (runs[["rel_a", "rel_b"]].min(axis=1) >= FLOOR)]
        out[method] = (int(rows[["ci2_low", "ci2_high"]].notna().all(axis=1).sum()), len(rows))
        rows = pooled[pooled["method"] == method]
        out[("pooled", method)] = (int(rows[["ci2_low", "ci2_high"]].notna().all(axis=1).sum()), len(rows))
    return out


def readable(name: str) -> dict:
    """{OOD testset: {model: mean over the runs of its split-half reliability}} (reliability.csv: the study's
    metric, linear ID residuals): a testset reads in a family when that mean reaches the verdicts' floor."""
    rel = pd.read_csv(ROOT / "studies" / name / "results" / "reliability.csv")
    rel = rel[(rel["metric"] == metric(name)) & (rel["method"] == "linear")]
    mean = rel.groupby(["testset", "model"])["reliability"].mean().round(2)
    return {t: g.droplevel(0).to_dict() for t, g in mean.groupby(level=0)}


def settled(name: str) -> tuple[int, int, int]:
    """(settled, readable, all) pairs of the linear verdicts: settled = a verdict in ACROSS, readable = every
    pair whose reliabilities both reach the floor in each family (not "unreliable")."""
    v = pd.read_csv(ROOT / "studies" / name / "results" / "consistency.csv").query("method == 'linear'")["verdict"]
    return int(v.isin(list(ACROSS)).sum()), int((v != "unreliable").sum()), len(v)


def seeds_alone(name: str) -> dict:
    """{(model, testset_a, testset_b): [(seed, cell)]}: the linear per-run rows whose interval excludes 0."""
    runs = pd.read_csv(ROOT / "studies" / name / "results" / "partial_correlations.csv").query("method == 'linear'")
    out: dict = {}
    for r in runs.sort_values("seed").itertuples():
        if r.ci2_low > 0 or r.ci2_high < 0:
            out.setdefault((r.model, r.testset_a, r.testset_b), []).append((int(r.seed), _cell(r)))
    return out


def facts(name: str) -> str:
    res = ROOT / "studies" / name / "results"
    pooled = pd.read_csv(res / "pooled_seeds.csv")
    verdicts = pd.read_csv(res / "consistency.csv").set_index(["method", "testset_a", "testset_b"])["verdict"]
    alone = seeds_alone(name)
    lines = []
    for (a, b), g in pooled.groupby(["testset_a", "testset_b"], sort=True):
        lines.append(f"{NAMES.get(a, a)} ~ {NAMES.get(b, b)}")
        for method in ("rank", "gam"):
            cells = ", ".join(
                f"{FAMILIES.get(r.model, r.model).split('-')[0]} {_cell(r)}"
                for r in g[g["method"] == method].itertuples()
            )
            lines.append(f"  {method}: {verdicts.get((method, a, b), '?')}; {cells}")
        for m in sorted(g["model"].unique()):
            got = alone.get((m, a, b), [])
            lines.append(f"  {m} seeds excluding 0 alone: " + (", ".join(f"{s} {c}" for s, c in got) or "none"))
    for key, (n, of) in defined(name).items():
        lines.append(f"defined {key}: {n} of {of}")
    n, readable_pairs, pairs = settled(name)
    lines.append(f"settled {n} of {pairs} pairs; {readable_pairs} readable in both families")
    for t, by_model in readable(name).items():
        lines.append(f"reliability {t}: " + ", ".join(f"{m} {x:.2f}" for m, x in sorted(by_model.items())))
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name", nargs="+", help="the study's folder under studies/ (--findings: several)")
    ap.add_argument("--across", action="store_true", help="the README's table (families side by side, in words)")
    ap.add_argument("--facts", action="store_true", help="seeds that settle a pair alone, rank/GAM, definedness")
    ap.add_argument("--findings", action="store_true", help="the README's table over the studies named")
    ap.add_argument("--settled-only", action="append", default=[], help="with --findings: this study's settled pairs")
    args = ap.parse_args()
    if args.findings:
        print(findings(args.name, tuple(args.settled_only)))
    else:
        name = args.name[0]
        print(across(name) if args.across else facts(name) if args.facts else table(name))
