"""README's numbers are the measurements' and the studies' own: the findings table names its metric and shows the
verdict under accuracy beside it (read here from the studies' consistency.csv, not through
bench/studies/study_table.py), the prose says which one the findings rest on and why they differ, and the quickstart's
times are those of the bench results files; numbers that no file backs (a test count, a column count) are not stated."""

from __future__ import annotations

import json
import re

import pandas as pd
import yaml

from study_helpers import REPO

NAMES = {"scitail_real": "SciTail", "snli_real": "SNLI", "sick": "SICK", "hans_real": "HANS"}
WORDS = {
    "consistent_positive": "same sign, positive",
    "consistent_negative": "same sign, negative",
    "insufficient_evidence": "unsettled",
    "unreliable": "unsettled",
}


def readme() -> str:
    return (REPO / "README.md").read_text()


def test_the_findings_table_names_its_metric_and_shows_the_verdict_under_accuracy():
    text = readme()
    head = next(ln for ln in text.splitlines() if ln.startswith("| study | pair |"))
    cells = [c.strip() for c in head.strip("|").split("|")]
    for study in ("twofamily", "sick"):
        metric = yaml.safe_load((REPO / "studies" / study / "params.yaml").read_text())["analyze"]["metric"]
        assert f"across the two families ({metric})" in cells and cells[-1] == "accuracy", head
        cons = pd.read_csv(REPO / "studies" / study / "results" / "consistency.csv").query("method == 'linear'")
        pooled = pd.read_csv(REPO / "studies" / study / "results" / "pooled_seeds.csv").query("method == 'linear'")
        for row in cons.itertuples(index=False):
            a, b = NAMES[row.testset_a], NAMES[row.testset_b]
            line = next(ln for ln in text.splitlines() if ln.startswith(f"| {study} | {a} ~ {b} |"))
            last = line.strip().strip("|").split("|")[-1].strip()
            assert last.startswith(WORDS[row.verdict_accuracy]), (line, row.verdict_accuracy)
            if row.verdict_accuracy != "unreliable":  # each family's noise-free r under accuracy, Gemma first
                pair = pooled[(pooled["testset_a"] == row.testset_a) & (pooled["testset_b"] == row.testset_b)]
                rs = pair.sort_values("model")["r_disattenuated_accuracy"]
                assert last.endswith(" / ".join(f"{r:+.2f}".replace("-", "−") for r in rs)), line
    # the finding that reverses: SICK ~ SNLI is negative under balanced_margin, unsettled and positive under accuracy
    sick = pd.read_csv(REPO / "studies" / "sick" / "results" / "consistency.csv").query("method == 'linear'")
    row = sick.set_index(["testset_a", "testset_b"]).loc[("sick", "snli_real")]
    assert row["verdict"] == "consistent_negative" and row["verdict_accuracy"] == "insufficient_evidence"
    flat = " ".join(text.split())
    sentence = next(s for s in flat.split(". ") if "The findings rest on `balanced_margin`" in s)
    assert "under accuracy" in sentence and '"Yes" answers' in sentence and "unsettled" in sentence, sentence


def _result(name: str) -> dict:
    path = next(REPO.glob(f"bench/**/{name}"))  # bench/results/ or its group's folder after the regroup
    return json.loads(path.read_text())


def _min_s(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s} s"


def test_the_quickstart_times_are_the_bench_results():
    flat = " ".join(readme().split())
    idle, busy = _result("quickstart_time.json"), _result("quickstart_time_busy.json")
    cpu = busy["cpu_s"]
    halves = round(cpu / 30) / 2
    words = f"{int(halves)}½" if halves % 1 else f"{int(halves)}"
    assert f"about {words} CPU-minutes ({round(cpu)} s measured)" in flat
    assert f"{_min_s(idle['median_s'])} on an idle 2-core CPU (median of {len(idle['seconds'])} runs)" in flat
    assert f"{round(busy['wall_s'] / 60)} min on a 2-core machine busy with other jobs" in flat
    assert f"about {words} CPU-minutes, {_min_s(idle['median_s'])} on 2 idle cores" in flat  # the presets table


def test_numbers_no_file_backs_are_not_stated():
    flat = " ".join(readme().split())
    assert not re.search(r"runs \d[\d,]* tests|the other \d+|\d+ marked slow", flat)  # pytest --collect-only counts
    assert "byte for byte" not in flat and "within stated tolerances" in flat  # reanalyze --check's compare
    assert "about 150 columns" not in flat and "within 200 characters" in flat  # test_workflows_dvc_views checks it
    assert "about a minute" not in flat  # measuring rates takes minutes per model
    assert "report-first-screen.png" not in flat


def test_the_pilots_plan_on_the_studies_page_is_the_bench_output():
    """docs/studies.md's account of what today's planner answers from studies/pilot is bench/planner's output."""
    out = next(REPO.glob("bench/**/pilot_plan_now.txt")).read_text()
    flat = " ".join((REPO / "docs" / "studies.md").read_text().split())
    d = re.search(
        r"design: (\d+) seeds x (\d+) checkpoints, \d+ ID items, (\d+) items per OOD testset.*?: ([0-9.]+) h", out
    )
    assert (
        f"chooses {d.group(1)} seeds × {d.group(2)} checkpoints, {d.group(3)} items per OOD testset, {d.group(4)} h"
        in flat
    )
    power = re.search(r"expected power ([0-9.]+) per pair in each family", out).group(1)
    settled = re.search(r"settles: ([0-9.]+) of (\d+) pairs", out)
    need = re.search(r"80% power at \|r\| = 0.5 needs a budget of ([0-9.]+) h", out).group(1)
    assert f"expected power {power} per pair in each family" in flat
    assert f"{settled.group(1)} of the {settled.group(2)} pair settled; 80 % needs {need} h" in flat
    hans = re.search(r"hans_real ([0-9.]+) in (\w+)-", out)
    assert (
        hans
        and hans.group(2) == "gemma3"
        and f"HANS is left out (reliability {hans.group(1)} at full size in Gemma)" in flat
    )
