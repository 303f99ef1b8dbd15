"""docs/studies.md's account of studies/sickprobe is its committed tables and plan output: SICK's reliability beside
SciTail's and SNLI's, the interval's fitted reliabilities, that no pair is settled, and the plan's numbers."""

from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "studies" / "sickprobe" / "results"


def test_the_page_states_the_probe_as_its_tables_and_plan_say():
    page = " ".join((REPO / "docs" / "studies.md").read_text().split())
    rel = pd.read_csv(RESULTS / "reliability.csv").query("metric == 'balanced_margin' and method == 'linear'")
    r = dict(zip(rel["testset"], rel["reliability"]))
    n = dict(zip(rel["testset"], rel["n_items"]))
    assert n == {"sick": 512, "scitail_real": 256, "snli_real": 256}
    assert (
        f"Split-half reliability {r['sick']:.2f} at 512 items (SciTail {r['scitail_real']:.2f}, SNLI "
        f"{r['snli_real']:.2f} at 256)"
    ) in page
    pairs = pd.read_csv(RESULTS / "partial_correlations.csv").query("method == 'linear'")
    fitted = pd.concat([pairs["rel_a"], pairs["rel_b"]])
    assert f"fitted reliabilities are {fitted.min():.2f}–{fitted.max():.2f}" in page
    assert ((pairs["ci2_low"] < 0) & (pairs["ci2_high"] > 0)).all() and (pairs["ci2_high"] - pairs["ci2_low"] > 1).all()
    plan = (REPO / "bench" / "planner" / "results" / "sickprobe_plan.txt").read_text()
    assert "reliability at full size: scitail_real 0.90, sick 0.97, snli_real 0.97 (kept >= 0.5: 3)" in plan
    assert "6 seeds x 17 checkpoints, 256 ID items, 256 items per OOD testset, 2 run(s) per seed: 11.5 h" in plan
    assert "expected power 0.96 at |r| = 0.8" in plan and "needs a budget of 7.5 h" in plan
    assert "SciTail 0.90, SICK 0.97, SNLI 0.97" in page and "11.5 h, predicted power 0.96" in page


def test_the_page_states_the_gemma_probe_as_its_tables_say():
    page = " ".join((REPO / "docs" / "studies.md").read_text().split())
    res = REPO / "studies" / "sickprobe-gemma" / "results"
    rel = pd.read_csv(res / "reliability.csv").query("metric == 'balanced_margin' and method == 'linear'")
    r = dict(zip(rel["testset"], rel["reliability"]))
    assert dict(zip(rel["testset"], rel["n_items"])) == {"sick": 256, "scitail_real": 128, "snli_real": 128}
    assert (
        f"split-half {r['sick']:.2f} at 256 items, against {r['scitail_real']:.2f} and {r['snli_real']:.2f} for "
        "SciTail and SNLI at 128"
    ) in page
    pairs = pd.read_csv(res / "partial_correlations.csv").query("method == 'linear'")
    fitted = pd.concat([pairs["rel_a"], pairs["rel_b"]])
    assert f"fitted reliabilities are {fitted.min():.2f}–{fitted.max():.2f}, and one run of 9 checkpoints" in page
    assert set(pairs["n"]) == {9} and ((pairs["ci2_low"] < 0) & (pairs["ci2_high"] > 0)).all()
