"""The report opens with what a user came for (the accuracy curves, then one table: per OOD pair, settled / null /
unsettled across model families, with each family's seed-pooled r), then what the study can show; the details
follow with long tables collapsed; no cell wraps mid-word. `oodcorr analyze` ends with the verdicts' counts and
the report's path."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from click.testing import CliRunner

from oodcorr.cli import cli
from oodcorr.core.io import write_json, write_jsonl
from oodcorr.stats.simulate import metrics_rows

OOD = ["hans", "anli", "wnli", "rte", "scitail"]


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    for i, (model, rho) in enumerate({"m1": 0.7, "m2": 0.6}.items()):
        for seed in (0, 1):
            run = f"{model}-s{seed}"
            write_jsonl(
                root / "runs" / run / "eval" / "metrics.jsonl", metrics_rows(model, seed, 20, rho, OOD, run=run)
            )
            write_json(root / "runs" / run / "run.json", {"run": run, "mlflow_run_id": f"train{i}{seed}"})
    (root / "params.yaml").write_text(
        "study: {name: demo}\nanalyze: {out: results, methods: [linear, rank], bootstrap: 0, mlflow: false}\n"
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        res = CliRunner().invoke(cli, ["analyze"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return root / "results", res.output


def test_report_opens_with_the_curves_and_the_verdict_per_pair_and_family(analysed):
    out, _ = analysed
    html = (out / "report.html").read_text()
    heads = re.findall(r"<h2>(.*?)</h2>", html)
    assert heads[:3] == [
        "Accuracy per testset, every run",
        "Does a relation between OOD testsets hold across model families?",
        "In short: what this study can and cannot show",
    ], heads
    assert html.index("curves_testsets.png") < html.index("<table class='verdicts'>") < html.index("In short")
    table = html[html.index("<table class='verdicts'>") :]
    table = table[: table.index("</table>")]
    consistency = pd.read_csv(out / "consistency.csv")
    linear = consistency[consistency["method"] == "linear"]
    rows = table.split("<tr>")[2:]
    assert len(rows) == len(linear) == 10  # one row per pair, the first method's verdicts only (never raw)
    assert "m1: " in table and "m2: " in table  # a column per family
    outcomes = [re.search(r"<b>(settled|null|unsettled)</b>", r).group(1) for r in rows]
    assert outcomes == sorted(outcomes, key=["settled", "null", "unsettled"].index)  # settled pairs first
    assert "overflow-wrap:anywhere" not in html  # a narrow cell wraps after '_', never mid-word
    heads = re.findall(r"<th>(.*?)</th>", table)
    assert all("-" not in re.sub(r"<span style='white-space:nowrap'>[^<]*</span>", "", h) for h in heads), heads
    assert "`" not in table  # quoted commands in the why text are set as code
    assert "insufficient_<wbr>evidence" in html or "insufficient_evidence" not in html


def test_long_tables_are_collapsed_and_raw_is_labelled_a_reference(analysed):
    out, _ = analysed
    html = (out / "report.html").read_text()
    partials = pd.read_csv(out / "partial_correlations.csv")
    assert len(partials) > 12
    assert f"every run, method and pair ({len(partials)} rows)</summary>" in html
    assert "raw (ID not regressed out: a reference, not a verdict)" in html


def test_analyze_ends_with_the_verdicts_and_the_report(analysed):
    out, output = analysed
    lines = output.strip().splitlines()
    assert lines[-1] == "report: results/report.html", lines  # relative to where it ran
    verdicts = next(line for line in lines if line.startswith("verdicts across models"))
    assert re.search(
        r"\(linear, 10 pairs\): balanced_margin: settled \d+( \([^)]*\))?, "
        r"null \d+, unsettled \d+",
        verdicts,
    ), verdicts
    assert len(lines) <= 8, output


def test_the_why_text_sets_quoted_commands_as_code_without_backticks():
    from oodcorr.analysis.overview import _why

    row = {"train_set": "t", "shots": 8, "testset_a": "a", "testset_b": "b"}
    keyed = {("t", 8, "m1", "a", "b"): {"ci2_why": "wide; `oodcorr plan` suggests 12 seeds"}}
    why = _why(keyed, row, ["m1"])
    assert "<code>oodcorr plan</code> suggests 12 seeds" in why and "`" not in why
