"""Every committed study table tells one story per row: a row flagged `unreliable:<testset>` or with its
interval undefined for unreliability reports a reliability below the threshold for that testset, and a row
whose reported reliabilities both pass is not flagged unreliable (the reliabilities shown are those the
interval used, for every method, per run and with seeds pooled)."""

import math
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from oodcorr.settings.analyze import AnalyzeSettings

REPO = Path(__file__).resolve().parents[1]
# the saved studies (runs/*.dvc: `oodcorr study reanalyze` rebuilds their tables with this code); studies/cpu is
# an export of an earlier version's outputs (scripts/export_study.py), its tables as that version wrote them
SAVED = sorted(p.parents[1] for p in (REPO / "studies").glob("*/runs/*.dvc"))
TABLES = sorted(
    p
    for name in ("partial_correlations.csv", "pooled_seeds.csv")
    for s in set(SAVED)
    for p in s.glob(f"results/{name}")
)
EVERY = sorted(p for s in set(SAVED) for p in s.glob("results/*.csv"))
# an estimate and the interval that sits beside it in a table (the report and the pages show them so)
BESIDE = [
    ("r", "ci_low", "ci_high"),
    ("r_disattenuated", "ci2_low", "ci2_high"),
    ("r_even", "ci2even_low", "ci2even_high"),
    ("r_pooled", "ci_low", "ci_high"),
]
BESIDE += [tuple(f"{c}_accuracy" for c in t) for t in BESIDE]
# words that quote an estimate and its interval: "gemma3-270m: r_dis +0.971 [+0.554, +1.000]"
QUOTED = re.compile(r"([+-]\d\.\d+) \[([+-]\d\.\d+), ([+-]\d\.\d+)\]")


def reliability_min(table: Path) -> float:
    """The threshold the study analysed with: its params' analyze.reliability_min, else the default."""
    params = yaml.safe_load((table.parents[1] / "params.yaml").read_text()) or {}
    return float((params.get("analyze") or {}).get("reliability_min", AnalyzeSettings.reliability_min))


@pytest.mark.parametrize("table", TABLES, ids=lambda p: f"{p.parts[-3]}/{p.name}")
def test_flags_and_reported_reliabilities_agree(table):
    rows = pd.read_csv(table).query("method != 'raw'")
    assert len(rows)
    checked, threshold = 0, reliability_min(table)
    for row in rows.itertuples(index=False):
        flags = str(row.flag).split(";") if isinstance(row.flag, str) else []
        rel = {row.testset_a: row.rel_a, row.testset_b: row.rel_b}
        if any(math.isnan(v) for v in rel.values()):
            continue
        checked += 1
        low = {t for t, v in rel.items() if v < threshold}
        assert {f.split(":", 1)[1] for f in flags if f.startswith("unreliable:")} == low, (table.name, row)
        if "ci2_undefined:unreliable" in flags:
            assert low, (table.name, row)
        if not math.isnan(row.ci2_low):
            assert not any(f.startswith("ci2_undefined:") for f in flags), (table.name, row)
    assert checked


@pytest.mark.parametrize("table", TABLES, ids=lambda p: f"{p.parts[-3]}/{p.name}")
def test_every_defined_row_reports_a_point_estimate_inside_its_own_interval(table):
    """r_disattenuated, per run and seeds pooled, lies in [ci2_low, ci2_high] wherever that interval is defined:
    the number a reader quotes and the interval beside it come from one fit."""
    rows = pd.read_csv(table).query("method != 'raw'").dropna(subset=["ci2_low", "ci2_high"])
    for row in rows.itertuples(index=False):
        assert row.ci2_low - 1e-9 <= row.r_disattenuated <= row.ci2_high + 1e-9, (table.name, row)


@pytest.mark.parametrize("table", EVERY, ids=lambda p: f"{p.parts[-3]}/{p.name}")
def test_every_estimate_beside_an_interval_lies_inside_it(table):
    """Every committed row, for every estimate and interval that sit side by side (the observed r and its CI, the
    noise-free r and ci2, r_even and its interval, their accuracy twins, the models' pooled r and its CI) and every
    estimate quoted with its interval in words: the point lies inside its own interval."""
    rows = pd.read_csv(table)
    checked = 0
    for point, low, high in BESIDE:
        if not {point, low, high} <= set(rows) or (point == "r" and "r_pooled" in rows):
            continue
        for row in rows.dropna(subset=[low, high]).itertuples(index=False):
            r, lo, hi = (getattr(row, c) for c in (point, low, high))
            assert lo - 1e-9 <= r <= hi + 1e-9, (table.name, point, row)
            checked += 1
    for col in [c for c in ("models", "models_two_level") if c in rows]:
        for text in rows[col].dropna():
            for r, lo, hi in QUOTED.findall(text):
                assert float(lo) - 1e-3 <= float(r) <= float(hi) + 1e-3, (table.name, col, text)
                checked += 1
    if {"ci_low", "ci2_low"} & set(rows):
        assert checked, table.name
