"""The committed studies' reports, rendered from their committed tables, show what the fixtures recorded: the
same text, heading by heading, and the same table cells (tests/report_pages.py; `--write` records them again
after an intended change of the page, committed on its own with what changed)."""

import json

import pytest

from report_pages import FIXTURES, STUDIES, render, visible


def test_every_committed_study_has_a_fixture():
    assert len(STUDIES) >= 7 and sorted(p.stem for p in FIXTURES.glob("*.json")) == STUDIES


@pytest.mark.parametrize("study", STUDIES)
def test_the_report_shows_what_it_showed(study, tmp_path):
    seen = visible(render(study, tmp_path))
    want = json.loads((FIXTURES / f"{study}.json").read_text())
    assert seen["text"] == want["text"]
    assert len(seen["tables"]) == len(want["tables"])
    for got, expected in zip(seen["tables"], want["tables"]):
        assert got == expected


def test_visible_reads_text_and_cells_apart():
    page = "<h1>A &amp; B</h1><p>one <b>two</b></p><table><tr><th>x</th></tr><tr><td>1<br>[2]</td></tr></table><p>z"
    assert visible(page) == {"text": ["A & B", "one two", "z"], "tables": [[["x"], ["1 [2]"]]]}


def test_names_are_escaped_by_the_templates():
    """A name that looks like markup shows as text in every table and in the verdict table's header and rows."""
    import pandas as pd

    from oodcorr.analysis.html_parts import table
    from oodcorr.analysis.overview import verdict_table

    evil = "<script>x</script>"
    page = table(pd.DataFrame({"run": [evil], "r": [0.5]}), ["run", "r"])
    assert evil not in page and "&lt;script&gt;" in page
    assert visible(page)["tables"] == [[["run", "r"], [evil, "0.500"]]]
    row = {"method": "linear", "testset_a": evil, "testset_b": "b", "verdict": "insufficient_evidence"}
    pooled = pd.DataFrame([{**row, "model": evil, "r": 0.1, "ci_low": -0.5, "ci_high": 0.6, "p_bh": 0.9}])
    page = "".join(verdict_table({"methods": ["linear"], "metric": "accuracy"}, pd.DataFrame([row]), pooled))
    assert evil not in page
    cells = visible(page)["tables"][0]
    assert cells[0][1] == f"{evil}: accuracy" and cells[1][0] == f"{evil} ~ b"


def test_a_study_that_can_show_nothing_says_so_above_its_verdicts(tmp_path):
    """Issue 63 item 9: the quickstart (no pair distinguishable from noise) puts "what this study can and cannot
    show" above the verdict table; a study with a finding (sick) keeps the verdicts first."""
    quick = visible(render("quickstart", tmp_path))["text"]
    short = quick.index("In short: what this study can and cannot show")
    assert short < quick.index("Does a relation between OOD testsets hold across model families?")
    assert any("they are not a finding" in line for line in quick[short:])
    (tmp_path / "sick").mkdir()
    sick = visible(render("sick", tmp_path / "sick"))["text"]
    verdicts = sick.index("Does a relation between OOD testsets hold across model families?")
    assert verdicts < sick.index("In short: what this study can and cannot show")


@pytest.mark.parametrize("study", ["quickstart", "sick-first-pass"])
def test_a_family_below_the_gate_is_unreadable_not_a_number(study, tmp_path):
    """Issue 63 item 9: a verdict-table cell whose family has a testset below the reliability gate (its fitted
    reliability, pooled_seeds.csv rel_a / rel_b) reads "unreadable (why)" with those reliabilities, never an
    estimate, and so does one whose interval spans -1 to +1; every other cell of the analysed metric is the
    estimate itself. No cell of the table, accuracy's included, shows -1.00 [-1.00, +1.00] or such."""
    import pandas as pd

    from report_pages import REPO

    res = REPO / "studies" / study / "results"
    rmin = json.loads((res / "summary.json").read_text())["noise"]["reliability_min"]
    pooled = pd.read_csv(res / "pooled_seeds.csv").query("method == 'linear'")
    table = visible(render(study, tmp_path))["tables"][0]
    head, rows = table[0], table[1:]
    checked = 0
    for row in rows:
        a, b = row[0].split(" ~ ")
        for model, p in pooled[(pooled["testset_a"] == a) & (pooled["testset_b"] == b)].groupby("model"):
            p = p.iloc[0]
            cell = row[head.index(f"{model}: {json.loads((res / 'summary.json').read_text())['metric']}")]
            low = [(t, v) for t, v in ((a, p["rel_a"]), (b, p["rel_b"])) if not v >= rmin]
            if low and (p["r"] == p["r"] or p["r_disattenuated"] == p["r_disattenuated"]):
                words = ", ".join(f"{t} {v:.2f}" if v == v else f"{t} –" for t, v in low)
                assert cell == f"unreadable (fitted reliability below {rmin:g}: {words})", cell
                checked += 1
            elif p["r_disattenuated"] == p["r_disattenuated"]:
                full = f"{p['ci2_low']:+.2f}, {p['ci2_high']:+.2f}" == "-1.00, +1.00"
                want = "unreadable (its interval spans -1 to +1)" if full else f"{p['r_disattenuated']:+.2f} "
                assert cell.startswith(want), cell
    assert checked
    assert not any("[-1.00, +1.00]" in cell for row in rows for cell in row)
