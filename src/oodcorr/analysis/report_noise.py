"""report.html's "Signal or noise?" section (templates/noise.html): reliabilities, observed vs disattenuated r,
distinguishable pairs."""

from __future__ import annotations

from pathlib import Path

from oodcorr.analysis.figure_parts import reliability_label
from oodcorr.analysis.html_parts import OPEN_ROWS, cell, figure, number, table
from oodcorr.analysis.templating import render
from oodcorr.settings.analyze import AnalyzeSettings
from oodcorr.stats import partial as _partial


def _in_words(partials) -> list[dict]:
    """The first 60 defined rows of the methods that regress ID out: observed vs noise-free r, in plain words."""
    fin = partials[partials["method"].map(lambda m: _partial.METHODS[m].controls)]
    fin = fin[fin["r"].notna()] if "r" in fin else fin
    rows = []
    for _, row in fin.head(60).iterrows():
        if row.get("distinguishable"):
            verdict = "distinguishable from noise"
        elif "unreliable" in str(row.get("flag", "")):
            verdict = "not distinguishable: a testset's residual trajectory is mostly noise"
        else:
            verdict = "not distinguishable: the noise-corrected CI includes 0"
        rows.append(
            {
                "run": str(row["run"]),
                "method": str(row["method"]),
                "pair": f"{row['testset_a']} ~ {row['testset_b']}",
                "r": number(row["r"]),
                "cells": [cell(row, c) for c in ("r_disattenuated", "ci2", "fitted rel a / b")],
                "verdict": verdict,
            }
        )
    return rows


def _noise_section(summary: dict, partials, reliability, figures: dict, out: Path) -> list[str]:
    """Signal or noise? reliability table/heatmaps, observed vs disattenuated r, distinguishable pairs."""
    info = summary.get("noise") or {}
    if not info.get("enabled"):
        return [render("noise.html", enabled=False, note=info.get("note", "noise analysis off"))]
    methods = [
        {
            "method": m,
            "reliability": reliability_label(s["median_reliability"]),
            "numbers": [number(s[k]) for k in ("share_reliable", "share_distinguishable", "mean_abs_r")]
            + [number(s["mean_abs_r_disattenuated"])],
        }
        for m, s in (info.get("methods") or {}).items()
    ]
    has_rel = reliability is not None and len(reliability)
    cols = ["run", "metric", "method", "testset", "n_items", "n", "split-half reliability", "flag"]
    return [
        render(
            "noise.html",
            enabled=True,
            rmin=info.get("reliability_min", AnalyzeSettings.reliability_min),
            metric=str(info.get("metric")),
            methods=methods,
            words=_in_words(partials),
            reliability=table(
                reliability.rename(columns={"reliability": "split-half reliability"}),
                cols,
                label="every run x testset x metric x method",
            )
            if has_rel
            else None,
            figures=[figure(out / "figures" / f, figures[f]) for f in sorted(figures) if f.startswith("reliability_")],
            not_drawn=[n for n in summary.get("figures_not_drawn") or [] if n.startswith("reliability")],
            open_rows=OPEN_ROWS,
        )
    ]
