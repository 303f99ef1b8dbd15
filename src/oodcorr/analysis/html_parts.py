"""The report's values for its tables and figures: number formats, table cells (long tables collapsed, combined
interval columns) and inline figures (data URIs), so report.html needs no external assets. The tags are in
templates/_parts.html; these functions return plain values, or a part rendered from it."""

from __future__ import annotations

import base64
import math
from pathlib import Path

from oodcorr.analysis.figure_parts import reliability_label
from oodcorr.analysis.templating import render
from oodcorr.stats.flags import first as first_flag

MAX_ROWS = 400  # long tables are truncated in the page; the CSVs next to it hold everything
OPEN_ROWS = 12  # a table with more rows is collapsed (<details>) with its row count, so the page stays scannable


def _fmt(v) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        return f"{v:.3g}" if abs(v) < 1e-3 and v != 0 else f"{v:.3f}"
    return str(v)


def number(v) -> str:
    """A summary number as the tables show it: 3 decimals, '–' where there is none."""
    return _fmt(float(v)) if v is not None else "–"


# Columns the page combines to stay within ~1,300 px (the CSVs keep every column): name -> source columns.
COMBINED = {
    "pair": ("testset_a", "testset_b"),
    "CI": ("ci_low", "ci_high"),
    "ci2": ("ci2_low", "ci2_high"),
    "ci2 even": ("ci2even_low", "ci2even_high"),
    "CI acc": ("ci_low_accuracy", "ci_high_accuracy"),
    "fitted rel a / b": ("rel_a", "rel_b"),
}


def _reason(row, column: str = "flag") -> str:
    """Why a value is empty, from the row's flag (its first entry) in words, for a '—' cell."""
    words = first_flag(row.get(column, ""), "the analysed metric")
    return f" ({words})" if words else ""


def _c(text: str, left: bool = False, wrap: bool = False) -> dict:
    return {"text": text, "left": left, "wrap": wrap}


def cell(row, col: str) -> dict:
    """One table cell as values: {"text", "left" (aligned left), "wrap" (may wrap after '_')}."""
    if col == "pair":
        return _c(f"{row['testset_a']} ~ {row['testset_b']}", left=True)
    if col in ("CI", "ci2", "ci2 even", "CI acc"):
        lo, hi = (row.get(c) for c in COMBINED[col])
        if lo is None or hi is None or lo != lo or hi != hi:
            why = "" if col == "ci2 even" else _reason(row, "flag_accuracy" if col == "CI acc" else "flag")
            return _c(f"—{why}", left=True)
        return _c(f"[{lo:+.2f}, {hi:+.2f}]")
    if col == "fitted rel a / b":
        return _c(f"{reliability_label(row.get('rel_a'))} / {reliability_label(row.get('rel_b'))}")
    if col in ("reliability", "split-half reliability"):
        return _c(reliability_label(row.get(col)))
    value = row[col]
    if col == "r" and isinstance(value, float) and value != value:
        return _c(f"—{_reason(row)}", left=True)
    return _c(_fmt(value), left=True, wrap=True) if isinstance(value, str) else _c(_fmt(value))


def table_values(df, columns, css_col: str | None = None, label: str = "the table") -> dict:
    """A table of selected columns (first MAX_ROWS rows) as values; `css_col` values become row classes.
    Combined columns (COMBINED: pair, CI, ci2, fitted rel a / b) are shown when their sources are in `df`."""
    columns = [c for c in columns if c in df.columns or all(s in df.columns for s in COMBINED.get(c, ("-",)))]
    rows = [
        {"cls": str(row[css_col]) if css_col else None, "cells": [cell(row, c) for c in columns]}
        for _, row in df.head(MAX_ROWS).iterrows()
    ]
    return {"head": columns, "rows": rows, "more": max(len(df) - MAX_ROWS, 0), "label": label, "n": len(df)}


def table(df, columns, css_col: str | None = None, label: str = "the table") -> str:
    """The table of table_values as HTML; longer than OPEN_ROWS rows, it is collapsed under `label`."""
    return render("_table.html", t=table_values(df, columns, css_col, label), open_rows=OPEN_ROWS)


def figure(path: Path, caption: str) -> dict:
    """An inline figure's values: its name, data URI and caption."""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return {"name": path.name, "src": f"data:image/png;base64,{data}", "caption": caption}


def _img(path: Path, caption: str) -> str:
    return render("_figure.html", f=figure(path, caption))
