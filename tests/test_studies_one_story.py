"""Every committed study table tells one story per row: a row flagged `unreliable:<testset>` or with its
interval undefined for unreliability reports a reliability below the threshold for that testset, and a row
whose reported reliabilities both pass is not flagged unreliable (the reliabilities shown are those the
interval used, for every method, per run and with seeds pooled)."""

import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from oodcorr.settings.analyze import AnalyzeSettings

REPO = Path(__file__).resolve().parents[1]
TABLES = sorted(p for name in ("partial_correlations.csv", "pooled_seeds.csv")
                for p in (REPO / "studies").glob(f"*/results/{name}"))


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
