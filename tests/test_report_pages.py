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
