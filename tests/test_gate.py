"""Near the reliability gate (stats.gate): the items factor against a direct root of Spearman-Brown, and the words
the report gives a silenced family on a generated study."""

from __future__ import annotations

import html
import json
import math

import numpy as np
import pytest
from scipy.optimize import brentq

from oodcorr.stats.gate import gate_gaps, gate_words, items_factor, spearman_brown


@pytest.mark.parametrize("rel", [0.05, 0.2, 0.37, 0.49])
@pytest.mark.parametrize("gate", [0.3, 0.5, 0.7])
def test_items_factor_is_the_root_of_spearman_brown(rel, gate):
    k = items_factor(rel, gate)
    if rel >= gate:
        assert k == 1.0
        return
    direct = brentq(lambda k: k * rel / (1 + (k - 1) * rel) - gate, 1.0, 1e6, xtol=1e-12)
    assert k == pytest.approx(direct, rel=1e-9)
    assert spearman_brown(rel, k) == pytest.approx(gate, abs=1e-12)
    # doubling the items of a 0.5 testset: 2/3 (the textbook value)
    assert spearman_brown(0.5, 2) == pytest.approx(2 / 3)


def test_no_signal_cannot_be_lifted_and_the_gaps_name_what_fell_short():
    assert items_factor(0.0) is None and items_factor(-0.2) is None and items_factor(math.nan) is None
    gaps = gate_gaps({"a": 0.62, "b": 0.4, "c": -0.1, "d": math.nan}, 0.5, n_items={"b": 100})
    assert [g["testset"] for g in gaps] == ["b", "c", "d"]
    b = gaps[0]
    assert b["below_by"] == pytest.approx(0.1) and b["factor"] == pytest.approx(1.5) and b["items"] == 150
    assert gaps[1]["lift"] is False and gaps[2]["factor"] is None
    words = gate_words({"a": 0.62, "b": 0.4}, 0.5, n_items={"b": 100})
    assert "b 0.40, 0.10 below; about 1.5 times its items (100 -> 150)" in words and "a 0.62" not in words
    assert gate_words({"a": 0.62, "b": 0.5}, 0.5) == ""
    # a factor past any practical item count is said in words, not as "about 46624078.9 times"
    tiny = gate_words({"a": 1e-8, "b": 0.4}, 0.5, n_items={"a": 128, "b": 100})
    assert "a 0.00, 0.50 below; no practical number of items would lift it (it would take over 100 times" in tiny
    assert "b 0.40, 0.10 below; about 1.5 times its items (100 -> 150)" in tiny
    assert "times its items (128 ->" not in tiny and "e+" not in tiny
    edge = gate_words({"a": 0.5 / 100.5}, 0.5)  # 200 times its items: past the practical bound
    assert "no practical number of items" in edge


def test_the_report_says_how_far_a_silenced_family_fell_and_what_would_lift_it(tmp_path):
    """A generated study with a 10-item OOD testset: its families fall below the gate, and the verdict table's
    words give each such family's reliability, its distance below the gate and the items factor, recomputed here
    from pooled_seeds.csv by Spearman-Brown."""
    import pandas as pd

    from oodcorr.analysis.pipeline import run_analysis
    from test_analysis_noise import make_project

    files = make_project(tmp_path, models=("m1", "m2"), seeds=(0, 1), n=12, items=(200, 200, 10))
    out = tmp_path / "results"
    run_analysis(files, out, methods=("linear",), plots=False, metric="accuracy")
    pooled = pd.read_csv(out / "pooled_seeds.csv")
    pl = pooled[(pooled["method"] == "linear") & pooled["r"].notna()]
    low = pl[(pl["rel_a"] < 0.5) | (pl["rel_b"] < 0.5)]
    assert len(low), "the 10-item testset should fall below the gate"
    cons = pd.read_csv(out / "consistency.csv")
    text = html.unescape((out / "report.html").read_text())
    assert "held back by the reliability gate (0.5, on the fitted reliability)" in text
    checked = 0
    for _, row in low.iterrows():
        verdict = cons[
            (cons["method"] == "linear")
            & (cons["testset_a"] == row["testset_a"])
            & (cons["testset_b"] == row["testset_b"])
        ]["verdict"].iloc[0]
        if verdict in ("consistent_positive", "consistent_negative", "model_dependent", "consistent_null"):
            continue  # the words sit under unsettled verdicts only
        for name, rel in ((row["testset_a"], row["rel_a"]), (row["testset_b"], row["rel_b"])):
            if not rel < 0.5:
                continue
            if rel <= 0:
                assert f"{name} {rel:.2f}: no signal above testset noise" in text
            else:
                k = 0.5 * (1 - rel) / (rel * 0.5)
                if k > 100:
                    assert f"{name} {rel:.2f}, {0.5 - rel:.2f} below; no practical number of items" in text
                else:
                    assert f"{name} {rel:.2f}, {0.5 - rel:.2f} below; about {k:.1f} times its items" in text
            checked += 1
    assert checked
    assert np.isfinite(low["r"]).all()


def test_docs_gate_table_is_the_results_file():
    from study_helpers import REPO, load_script

    bench = load_script(REPO / "bench" / "stats" / "gate_rule.py")
    text = (REPO / "docs" / "statistics-reference.md").read_text()
    inside = text.split("<!-- gate_rule:start -->\n", 1)[1].split("<!-- gate_rule:end -->", 1)[0]
    assert inside == bench.table()
    # what the docs say of it: every bin below the gate holds 5 % + 2 MC SE at rho = 0 and coverage within two MC
    # SE of 0.93 at both rho, on at least 50 replicates from 0.3 to 0.5
    for cell in json.loads(bench.OUT.read_text())["cells"]:
        for b in bench.bins(cell):
            if b["bin"][0] >= 0.5:
                continue
            se = (0.05 * 0.95 / b["n"]) ** 0.5
            assert b["coverage"] >= 0.93 - 2 * max(b["coverage_se"], se)
            if cell["rho"] == 0:
                assert b["excludes_0"] <= 0.05 + 2 * max(b["excludes_0_se"], se)
            if b["bin"][0] in (0.3, 0.4):
                assert b["n"] >= 50
