"""The report's HTML pieces: the page's CSS, number formatting, tables (long ones collapsed, combined interval
columns) and inline figures (data URIs), so report.html needs no external assets."""

from __future__ import annotations

import base64
import html
import math
from pathlib import Path

from oodcorr.analysis.figure_parts import reliability_label
from oodcorr.stats.flags import first as first_flag

CSS = (
    "body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}\n"
    "table{border-collapse:collapse;font-size:12px;margin:1em 0;max-width:100%}"
    "th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}\n"
    "th{background:#f0f0f0}td.l{text-align:left}.consistent_positive{background:#d8f0d8}"
    ".consistent_negative{background:#dde6f8}\n"
    ".model_dependent{background:#f8dada}.consistent_null{background:#eef4ee}.unreliable{background:#f3ecd0}"
    ".insufficient_evidence{color:#777}img{max-width:100%;border:1px solid #eee}\n"
    "figure{margin:1em 0}figcaption{font-size:12px;color:#555}"
    "pre{background:#f7f7f7;padding:.6em;font-size:12px;white-space:pre-wrap}\n"
    "details{margin:.6em 0}summary{cursor:pointer;color:#245;font-size:14px}table.verdicts{font-size:13px}"
    "table.verdicts td{white-space:nowrap}table.verdicts td.l{white-space:normal}\n"
    "p.legend{font-size:12px;color:#444}figure.first img{max-height:46vh;width:auto}"
)

MAX_ROWS = 400  # long tables are truncated in the page; the CSVs next to it hold everything
OPEN_ROWS = 12  # a table with more rows is collapsed (<details>) with its row count, so the page stays scannable


def _fmt(v) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        return f"{v:.3g}" if abs(v) < 1e-3 and v != 0 else f"{v:.3f}"
    return html.escape(str(v))


# Columns the page combines to stay within ~1,300 px (the CSVs keep every column): name -> source columns.
COMBINED = {
    "pair": ("testset_a", "testset_b"),
    "CI": ("ci_low", "ci_high"),
    "ci2": ("ci2_low", "ci2_high"),
    "ci2 even": ("ci2even_low", "ci2even_high"),
    "CI acc": ("ci_low_accuracy", "ci_high_accuracy"),
    "rel a / b": ("rel_a", "rel_b"),
}


def _breakable(text: str) -> str:
    """Escaped text that a narrow column may wrap after '_' (a name such as insufficient_evidence), never mid-word."""
    return text.replace("_", "_<wbr>")


def _details(label: str, inner: str, rows: int) -> str:
    """`inner` as is when short, else collapsed under `label (N rows)`."""
    if rows <= OPEN_ROWS:
        return inner
    return f"<details><summary>{html.escape(label)} ({rows} rows)</summary>{inner}</details>"


def _reason(row, column: str = "flag") -> str:
    """Why a value is empty, from the row's flag (its first entry) in words, for a '—' cell."""
    words = first_flag(row.get(column, ""), "the analysed metric")
    return f" ({html.escape(words)})" if words else ""


def _cell(row, col: str) -> str:
    if col == "pair":
        return f'<td class="l">{html.escape(str(row["testset_a"]))} ~ {html.escape(str(row["testset_b"]))}</td>'
    if col in ("CI", "ci2", "ci2 even", "CI acc"):
        lo, hi = (row.get(c) for c in COMBINED[col])
        if lo is None or hi is None or lo != lo or hi != hi:
            why = "" if col == "ci2 even" else _reason(row, "flag_accuracy" if col == "CI acc" else "flag")
            return f'<td class="l">—{why}</td>'
        return f"<td>[{lo:+.2f}, {hi:+.2f}]</td>"
    if col == "rel a / b":
        return f"<td>{reliability_label(row.get('rel_a'))} / {reliability_label(row.get('rel_b'))}</td>"
    if col == "reliability":
        return f"<td>{reliability_label(row.get(col))}</td>"
    value = row[col]
    if col == "r" and isinstance(value, float) and value != value:
        return f'<td class="l">—{_reason(row)}</td>'
    return f'<td class="l">{_breakable(_fmt(value))}</td>' if isinstance(value, str) else f"<td>{_fmt(value)}</td>"


def table(df, columns, css_col: str | None = None, label: str = "the table") -> str:
    """An HTML table of selected columns (first MAX_ROWS rows); `css_col` values become row classes.
    Combined columns (COMBINED: pair, CI, ci2, rel a / b) are shown when their sources are in `df`.
    Longer than OPEN_ROWS rows, it is collapsed under `label`."""
    columns = [c for c in columns if c in df.columns or all(s in df.columns for s in COMBINED.get(c, ("-",)))]
    head = "".join(f"<th>{_breakable(html.escape(c))}</th>" for c in columns)
    body = []
    for _, row in df.head(MAX_ROWS).iterrows():
        cls = f' class="{html.escape(str(row[css_col]))}"' if css_col else ""
        cells = "".join(_cell(row, c) for c in columns)
        body.append(f"<tr{cls}>{cells}</tr>")
    more = f"<p>… {len(df) - MAX_ROWS} more rows in the CSV.</p>" if len(df) > MAX_ROWS else ""
    return _details(label, f"<table><tr>{head}</tr>{''.join(body)}</table>{more}", len(df))


def _img(path: Path, caption: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (
        f'<figure><img alt="{html.escape(path.name)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{html.escape(path.name)}: {html.escape(caption)}</figcaption></figure>"
    )
