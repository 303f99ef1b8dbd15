"""The figures' shared pieces: file-safe names, reliability labels, significance stars, titles that fit, empty
panels that say why, and matplotlib loaded headless (Agg)."""

from __future__ import annotations

import re

import numpy as np

from oodcorr.settings.analyze import AnalyzeSettings


def safe(name) -> str:
    """A file-name-safe version of a model/testset/run name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(name)).strip("-") or "x"


def reliability_label(v) -> str:
    """Reliability on its own scale: 0..1, "none" at or below 0 (the halves share no signal), "–" if undefined."""
    if v is None or not np.isfinite(v):
        return "–"
    return "none" if v <= 0 else f"{v:.2f}"


def stars(p, alpha: float = AnalyzeSettings.alpha) -> str:
    if not np.isfinite(p) or p >= alpha:
        return ""
    return "***" if p < 0.001 else "**" if p < 0.01 else "*"


def fit_title(ax, text: str, fontsize: float = 9) -> None:
    """The axes' title, wrapped at spaces to the axes' width (a long run key or setup never runs off the figure)."""
    import textwrap

    fig = ax.get_figure()
    width_pt = ax.get_position().width * fig.get_figwidth() * 72
    chars = max(12, int(width_pt / (0.56 * fontsize)))
    ax.set_title(
        "\n".join(textwrap.fill(line, chars, break_on_hyphens=False) for line in text.split("\n")), fontsize=fontsize
    )


def empty_panel(ax, why: str) -> None:
    """Say in the panel why it has nothing drawn (instead of an empty frame)."""
    import textwrap

    ax.text(
        0.5,
        0.5,
        textwrap.fill(why, 34),
        ha="center",
        va="center",
        fontsize=8,
        color="#444",
        transform=ax.transAxes,
        bbox={"facecolor": "white", "edgecolor": "#bbb", "boxstyle": "round"},
    )


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
