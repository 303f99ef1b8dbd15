"""Figures (matplotlib, Agg backend so it works headless and in CI).

  heatmap_<model>[_<train_set>_<shots>shot]_<method>.png   OOD x OOD seed-pooled partial r, stars = BH p
                          (the analysed metric; accuracy's beside it)
  scatter_<a>_<b>.png     per run: ID vs A, ID vs B (with the linear and GAM fits), residual A vs B
  curves_<run>.png        accuracy (and the analysed metric) vs step for every testset (ID bold)
  yes_rate_<run>.png      share of "Yes" answers vs step (answer_bias.py)
The train_set/shots suffix appears only when a model was trained in more than one setup.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from oodcorr.analysis.settings import AnalyzeSettings
from oodcorr.metrics import BASELINE_METRIC, DEFAULT_METRIC

MAX_SCATTER_RUNS = 6


def safe(name) -> str:
    """A file-name-safe version of a model/testset/run name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(name)).strip("-") or "x"


def stars(p, alpha: float = AnalyzeSettings.alpha) -> str:
    if not np.isfinite(p) or p >= alpha:
        return ""
    return "***" if p < 0.001 else "**" if p < 0.01 else "*"


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def heatmap(sub, names, title, path, alpha=AnalyzeSettings.alpha, metric: str = BASELINE_METRIC):
    """One model x setup x method: symmetric matrix of pooled r, annotated with r and stars; with a metric
    other than accuracy a second panel shows accuracy's (columns r_accuracy, p_bh_accuracy) beside it."""
    plt = _plt()
    idx = {n: i for i, n in enumerate(names)}
    T = len(names)
    panels = [(metric, "r", "p_bh")]
    if metric != BASELINE_METRIC and "r_accuracy" in sub:
        panels.append((BASELINE_METRIC, "r_accuracy", "p_bh_accuracy"))
    size = max(4.0, 0.7 * T + 2)
    fig, axes = plt.subplots(1, len(panels), figsize=((size + 1) * len(panels), size), squeeze=False)
    for ax, (label, rcol, pcol) in zip(axes[0], panels):
        M = np.full((T, T), np.nan)
        ann = [["" for _ in names] for _ in names]
        for a, b, r, p in zip(sub["testset_a"], sub["testset_b"], sub[rcol], sub[pcol]):
            i, j = idx[a], idx[b]
            M[i, j] = M[j, i] = r
            ann[i][j] = ann[j][i] = "" if not np.isfinite(r) else f"{r:+.2f}\n{stars(p, alpha)}"
        im = ax.imshow(M, cmap="RdBu_r", vmin=-1, vmax=1)
        ax.set_xticks(range(T), names, rotation=60, ha="right", fontsize=8)
        ax.set_yticks(range(T), names, fontsize=8)
        for i in range(T):
            for j in range(T):
                if ann[i][j]:
                    ax.text(j, i, ann[i][j], ha="center", va="center", fontsize=7,
                            color="white" if abs(M[i, j]) > 0.6 else "black")
        fig.colorbar(im, ax=ax, shrink=0.8, label=f"partial r of {label} (seeds pooled)")
        ax.set_title(f"{title}\n{label}" if len(panels) > 1 else title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def scatter_grid(runs: dict, pair, path, method="gam", label: str = BASELINE_METRIC):
    """Rows = runs (up to MAX_SCATTER_RUNS): ID vs A, ID vs B with fits, then residual A vs residual B."""
    from oodcorr.analysis.partial import GAM_MIN_N, gam_fit, residualise_linear

    plt = _plt()
    a, b = pair
    chosen = [(run, d) for run, d in runs.items() if a in d["Y"] and b in d["Y"]][:MAX_SCATTER_RUNS]
    if not chosen:
        return False
    fig, axes = plt.subplots(len(chosen), 3, figsize=(11, 3 * len(chosen)), squeeze=False)
    for row, (run, d) in zip(axes, chosen):
        Y = d["Y"][[a, b]].to_numpy()
        keep = ~np.isnan(Y).any(axis=1)
        x, Y = d["x"][keep], Y[keep]
        order = np.argsort(x)
        use_gam = method == "gam" and len(x) >= GAM_MIN_N and x.std() > 0
        R = gam_fit(x, Y)[0] if use_gam else residualise_linear(x, Y)
        for ax, j, name in ((row[0], 0, a), (row[1], 1, b)):
            ax.scatter(x, Y[:, j], s=12, alpha=0.7)
            if x.std() > 0:
                lin = np.polyval(np.polyfit(x, Y[:, j], 1), x)
                ax.plot(x[order], lin[order], "k--", lw=1, label="linear")
                if use_gam:
                    ax.plot(x[order], (Y[:, j] - R[:, j])[order], "r-", lw=1.2, label="GAM")
            ax.set_xlabel(f"ID ({d['meta']['id_testset']}) {label}", fontsize=8)
            ax.set_ylabel(f"{name} {label}", fontsize=8)
            ax.legend(fontsize=7)
        ax = row[2]
        ax.scatter(R[:, 0], R[:, 1], s=12, alpha=0.7, color="C2")
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.corrcoef(R[:, 0], R[:, 1])[0, 1] if len(x) > 2 else np.nan
        ax.set_title(f"{run}: residual r = {r:+.2f} ({'gam' if use_gam else 'linear'})", fontsize=8)
        ax.set_xlabel(f"{a} residual", fontsize=8)
        ax.set_ylabel(f"{b} residual", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return True


def curves(run: str, d: dict, path, metric: str = BASELINE_METRIC):
    """Accuracy vs step, every testset of one run (ID bold black); with a metric other than accuracy, that
    metric's curves in a second panel beside it."""
    plt = _plt()
    ser = d.get("series") or {}
    panels = [BASELINE_METRIC] + ([metric] if metric != BASELINE_METRIC and metric in ser else [])
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 4), squeeze=False)
    id_name = d["meta"]["id_testset"]
    for ax, m in zip(axes[0], panels):
        s = ser.get(m) or {id_name: d["x"], **{t: d["Y"][t].to_numpy() for t in d["Y"].columns}}
        ax.plot(d["steps"], s[id_name], "k-o", lw=2.2, ms=3, label=f"{id_name} (ID)")
        for name in [t for t in s if t != id_name]:
            ax.plot(d["steps"], s[name], "-", lw=1, marker=".", ms=3, label=name)
        positive = d["steps"][d["steps"] > 0]
        if len(positive) and positive.max() > 100 * positive.min():  # log-spaced checkpoint schedules
            ax.set_xscale("symlog", linthresh=float(positive.min()))
        ax.set_xlabel("step")
        ax.set_ylabel(m)
        ax.set_title(run, fontsize=9)
        ax.legend(fontsize=6, ncol=2, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def make_figures(out: Path, runs: dict, pooled, methods, pair, alpha=AnalyzeSettings.alpha,
                 metric: str = BASELINE_METRIC) -> dict[str, str]:
    """Write every figure into `out`; returns {file name: caption}."""
    figs: dict[str, str] = {}
    if len(pooled):
        setups = pooled.groupby("model")[["train_set", "shots"]].apply(lambda g: len(g.drop_duplicates()))
        for (model, train_set, shots, method), sub in pooled.groupby(["model", "train_set", "shots", "method"]):
            if method == "raw" and "raw" not in methods:
                continue
            names = sorted(set(sub["testset_a"]) | set(sub["testset_b"]))
            tag = f"_{safe(train_set)}_{shots}shot" if setups.get(model, 1) > 1 else ""
            name = f"heatmap_{safe(model)}{tag}_{safe(method)}.png"
            title = f"{model} | {train_set} {shots}-shot | {method} (seeds: {sub['n_seeds'].max()})"
            heatmap(sub, names, title, out / name, alpha, metric)
            figs[name] = f"{title}: partial r of {metric}" + (" (left) and accuracy (right)"
                                                              if metric != BASELINE_METRIC else "")
    if pair:
        name = f"scatter_{safe(pair[0])}_{safe(pair[1])}.png"
        if scatter_grid(runs, pair, out / name, "gam" if "gam" in methods else "linear", metric):
            figs[name] = f"ID vs {pair[0]}, ID vs {pair[1]}, and their residuals"
    for run, d in runs.items():
        name = f"curves_{safe(run)}.png"
        curves(run, d, out / name, metric)
        figs[name] = f"accuracy{'' if metric == BASELINE_METRIC else ' and ' + metric} vs step: {run}"
    return figs


def reliability_heatmaps(fig_dir, reliability, reliability_min: float = AnalyzeSettings.reliability_min,
                         metric: str = DEFAULT_METRIC) -> dict:
    """reliability_<metric>_<method>.png: runs x testsets split-half reliability of the residual trajectory,
    for the analysed metric (the other metrics' reliabilities are in reliability.csv and the report)."""
    plt = _plt()
    figures = {}
    for (metric, method), g in reliability[reliability["metric"] == metric].groupby(["metric", "method"], sort=True):
        wide = g.pivot_table(index="run", columns="testset", values="reliability", aggfunc="mean")
        if wide.empty:
            continue
        fig, ax = plt.subplots(figsize=(1.2 + 0.8 * wide.shape[1], 1.0 + 0.4 * wide.shape[0]))
        im = ax.imshow(wide.to_numpy(float), vmin=0, vmax=1, cmap="viridis", aspect="auto")
        ax.set_xticks(range(wide.shape[1]), wide.columns, rotation=45, ha="right", fontsize=8)
        ax.set_yticks(range(wide.shape[0]), wide.index, fontsize=8)
        for (i, j), v in np.ndenumerate(wide.to_numpy(float)):
            ax.text(j, i, "–" if not np.isfinite(v) else f"{v:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if not np.isfinite(v) or v < 0.6 else "black")
        fig.colorbar(im, ax=ax, fraction=0.04)
        ax.set_title(f"reliability of residual trajectories ({metric}, {method})", fontsize=9)
        fig.tight_layout()
        name = f"reliability_{safe(metric)}_{safe(method)}.png"
        fig.savefig(Path(fig_dir) / name, dpi=100)
        plt.close(fig)
        figures[name] = (f"split-half reliability per run x testset ({metric}, {method}); below "
                         f"{reliability_min} the residual trajectory is mostly testset noise")
    return figures
