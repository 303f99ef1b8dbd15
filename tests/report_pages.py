"""The committed studies' reports rendered from their committed tables (studies/*/results: the CSVs and
summary.json the analysis wrote; the runs' ID curves from plots/accuracy_vs_step.csv; figures left out, they are
not committed), and what a reader sees of a page: its text, heading by heading, and its tables' cells.

    PYTHONPATH=src python tests/report_pages.py --write    # (re)writes tests/fixtures/report_pages/<study>.json
"""

from __future__ import annotations

import json
import sys
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "report_pages"
STUDIES = sorted(p.parents[1].name for p in (REPO / "studies").glob("*/results/consistency.csv"))


def _runs(sdir: Path) -> dict:
    """{run: {"meta", "x", "Y", "series", "n_id"}} as the analysis hands them to the report, from the committed
    curves table (the analysed metric in "x" and "Y", every metric in "series") and the study's params."""
    params = yaml.safe_load((sdir / "params.yaml").read_text())
    summary = json.loads((sdir / "results" / "summary.json").read_text())
    metric = summary.get("metric") or "accuracy"
    curves = pd.read_csv(sdir / "results" / "plots" / "accuracy_vs_step.csv")
    data = params.get("data") or {}
    runs = {}
    for run, c in curves.groupby("run", sort=False):
        entry = params["runs"].get(run, {})
        id_name = str(c.loc[c["role"] == "id", "testset"].iloc[0])
        meta = {
            "model": c["model"].iloc[0],
            "train_set": entry.get("train_set"),
            "shots": entry.get("shots"),
            "seed": int(c["seed"].iloc[0]),
            "id_testset": id_name,
        }
        wide = {m: c.pivot_table(index="step", columns="testset", values=m) for m in ("accuracy", metric)}
        ood = [t for t in wide[metric].columns if t != id_name]
        n_id = ((data.get("testsets") or {}).get(id_name) or {}).get("max_examples") or data.get("max_examples")
        runs[run] = {
            "meta": meta,
            "x": wide[metric][id_name].to_numpy(float),
            "Y": wide[metric][ood],
            "series": {m: {t: w[t].to_numpy(float) for t in w.columns} for m, w in wide.items()},
            "n_id": n_id,
        }
    return runs


def render(name: str, out: Path) -> str:
    """The report of studies/<name> from its committed tables, written to out/report.html; its HTML."""
    from oodcorr.analysis.report import write_report

    res = REPO / "studies" / name / "results"
    summary = json.loads((res / "summary.json").read_text())
    read = lambda f: pd.read_csv(res / f) if (res / f).exists() else None  # noqa: E731
    write_report(
        out / "report.html",
        summary,
        _runs(REPO / "studies" / name),
        read("partial_correlations.csv"),
        read("pooled_seeds.csv"),
        read("consistency.csv"),
        {},
        float(summary.get("alpha") or 0.05),
        reliability=read("reliability.csv"),
        answer_bias=read("answer_bias.csv"),
    )
    return (out / "report.html").read_text()


class _Visible(HTMLParser):
    """Text outside tables as lines (one per block element), and every table as rows of cell texts."""

    BLOCK = {"p", "h1", "h2", "h3", "li", "summary", "pre", "figcaption", "div", "ul", "details", "table", "br"}
    SPLIT = {"br", "details", "summary", "div", "p"}  # inside a cell: a line break between two texts

    def __init__(self):
        super().__init__()
        self.lines, self.tables, self._text, self._cell = [], [], [], None
        self._depth, self._skip = 0, 0

    def handle_starttag(self, tag, attrs):
        if tag in ("style", "title"):
            self._skip += 1
        elif tag == "table":
            self._flush()
            self._depth += 1
            self.tables.append([])
        elif tag == "tr" and self._depth:
            self.tables[-1].append([])
        elif tag in ("td", "th") and self._depth:
            self._cell = []
        elif tag in self.SPLIT and self._cell is not None:
            self._cell.append(" ")
        elif tag in self.BLOCK and not self._depth:
            self._flush()

    def handle_endtag(self, tag):
        if tag in ("style", "title"):
            self._skip -= 1
        elif tag == "table":
            self._depth -= 1
        elif tag in self.SPLIT and self._cell is not None:
            self._cell.append(" ")
        elif tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag in self.BLOCK and not self._depth:
            self._flush()

    def handle_data(self, data):
        if self._skip:
            return
        if self._cell is not None:
            self._cell.append(data)
        elif not self._depth:
            self._text.append(data)

    def _flush(self):
        line = " ".join("".join(self._text).split())
        if line:
            self.lines.append(line)
        self._text = []


def visible(page: str) -> dict:
    """{"text": [lines], "tables": [[[cells]]]}: what a reader sees, markup and styling aside."""
    v = _Visible()
    v.feed(page)
    v.close()
    v._flush()
    return {"text": v.lines, "tables": v.tables}


def dump(seen: dict) -> str:
    """The fixture's JSON: one line per text line and per table row, so a changed page reads as a short diff."""
    row = lambda x: json.dumps(x, ensure_ascii=False)  # noqa: E731
    text = ",\n  ".join(map(row, seen["text"]))
    tables = ",\n  ".join("[\n   " + ",\n   ".join(map(row, t)) + "\n  ]" for t in seen["tables"])
    return f'{{"text": [\n  {text}\n ],\n "tables": [\n  {tables}\n ]\n}}\n'


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    import tempfile

    FIXTURES.mkdir(parents=True, exist_ok=True)
    for study in STUDIES:
        with tempfile.TemporaryDirectory() as tmp:
            seen = visible(render(study, Path(tmp)))
        (FIXTURES / f"{study}.json").write_text(dump(seen))
        print(study, len(seen["text"]), "lines,", len(seen["tables"]), "tables")
