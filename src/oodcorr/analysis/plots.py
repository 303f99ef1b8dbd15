"""Figures (matplotlib, Agg backend so it works headless and in CI).

  heatmap_<model>[_<train_set>_<shots>shot]_<method>.png   OOD x OOD seed-pooled partial r, stars = BH p
                          (the analysed metric; accuracy's beside it)
  scatter_<a>_<b>.png     per run: ID vs A, ID vs B (with the linear and GAM fits), residual A vs B
  curves_<run>.png        accuracy (and the analysed metric) vs step for every testset (ID bold)
  yes_rate_<run>.png      share of "Yes" answers vs step (answer_bias.py)
  curves_testsets.png     one panel per testset, every run's accuracy (colour = model), one shared y-axis
The train_set/shots suffix appears only when a model was trained in more than one setup.
A figure with nothing to draw (every value NaN) is not written; `notes` gets one line saying why.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from oodcorr.analysis.figure_parts import _plt, empty_panel, fit_title, reliability_label, safe, stars
from oodcorr.settings.analyze import AnalyzeSettings
from oodcorr.stats.methods import METHODS, drawn_smooth
from oodcorr.stats.metrics import BASELINE_METRIC, DEFAULT_METRIC

MAX_SCATTER_RUNS = 6


def heatmap(
    sub, names, title, path, alpha=AnalyzeSettings.alpha, metric: str = BASELINE_METRIC, empty: dict | None = None
):
    """One model x setup x method: symmetric matrix of pooled r, annotated with r and stars; with a metric
    other than accuracy a second panel shows accuracy's (columns r_accuracy, p_bh_accuracy) beside it.
    A panel with no r says why in its middle (`empty`: metric -> reason)."""
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
                    ax.text(
                        j,
                        i,
                        ann[i][j],
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="white" if abs(M[i, j]) > 0.6 else "black",
                    )
        if not np.isfinite(M).any():
            empty_panel(ax, f"no partial r of {label}: {(empty or {}).get(label, 'every pair is flagged')}")
        fig.colorbar(im, ax=ax, shrink=0.8, label=f"partial r of {label} (seeds pooled)")
        fit_title(ax, f"{title}\n{label}" if len(panels) > 1 else title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def scatter_grid(runs: dict, pair, path, method="gam", label: str = BASELINE_METRIC):
    """Rows = runs (up to MAX_SCATTER_RUNS): ID vs A, ID vs B with fits, then residual A vs residual B."""
    from oodcorr.stats.partial import GAM_MIN_N, gam_fit, residualise_linear

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
        use_gam = METHODS[method].operator == "smooth" and len(x) >= GAM_MIN_N and x.std() > 0
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
            if ax.get_legend_handles_labels()[0]:  # no fit lines when the ID series is flat
                ax.legend(fontsize=7)
        ax = row[2]
        ax.scatter(R[:, 0], R[:, 1], s=12, alpha=0.7, color="C2")
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.corrcoef(R[:, 0], R[:, 1])[0, 1] if len(x) > 2 else np.nan
        fit_title(ax, f"{run}: residual r = {r:+.2f} ({'gam' if use_gam else 'linear'})", fontsize=8)
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
        fit_title(ax, run)
        ax.legend(fontsize=6, ncol=2, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _why_empty(rows) -> str:
    """Why a block of pairs has no r, from their flags: the first flag every pair shares (e.g. constant:id, the
    ID accuracy never changed; too_few_checkpoints), else the most common one."""
    per_row = [[f for f in str(v).split(";") if f and f != "nan"] for v in rows.get("flag", [])]
    per_row = [fl for fl in per_row if fl]
    if not per_row:
        return "no pair has a partial r"
    shared = [f for f in per_row[0] if all(f in fl for fl in per_row)]
    flags = [f for fl in per_row for f in fl]
    top = shared[0] if shared else max(set(flags), key=flags.count)
    from oodcorr.stats.flags import describe

    return f"no pair has a partial r: {describe(top)}"


def _why_no_r(runs: dict, metric: str) -> str:
    """Why a model's heatmap panel for `metric` has no r: its ID series never moved in any run, else the flags."""
    ids = []
    for d in runs.values():
        series = (d.get("series") or {}).get(metric) or {}
        x = series.get(d["meta"]["id_testset"]) if series else (d["x"] if metric == BASELINE_METRIC else None)
        if x is not None:
            ids.append(np.asarray(x, float))
    if ids and all(np.nanmax(x) - np.nanmin(x) <= 1e-12 for x in ids if np.isfinite(x).any()):
        return (
            (
                f"the ID {metric} never changed (at {ids[0][np.isfinite(ids[0])][0]:.3f} in every checkpoint), so "
                "there is no ID progress to regress out"
            )
            if np.isfinite(ids[0]).any()
            else "no ID values"
        )
    return "every pair is flagged (pooled_seeds.csv, flag)"


def curves_by_testset(runs: dict, path) -> bool:
    """One panel per testset (ID first), a curve per run coloured by model, all panels on one y-axis."""
    plt = _plt()
    series = {}  # testset -> [(run, model, steps, values)]
    for run, d in runs.items():
        id_name = d["meta"]["id_testset"]
        acc = (d.get("series") or {}).get(BASELINE_METRIC)  # accuracy, whatever metric the analysis used
        if acc:
            cols = [
                (f"{id_name} (ID)" if n == id_name else n, d["steps"], np.asarray(v, float)) for n, v in acc.items()
            ]
        else:
            cols = [(f"{id_name} (ID)", d["steps"], d["x"])] + [
                (n, s.index.to_numpy(), s.to_numpy(float)) for n, s in d["Y"].items()
            ]
        for name, steps, values in cols:
            if np.isfinite(values).any():
                series.setdefault(name, []).append((run, d["meta"]["model"], steps, values))
    if not series:
        return False
    names = sorted(series, key=lambda n: (not n.endswith("(ID)"), n))
    models = sorted({m for v in series.values() for _, m, _, _ in v})
    colour = {m: f"C{i}" for i, m in enumerate(models)}
    ncol = len(names) if len(names) <= 5 else 4
    nrow = -(-len(names) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.2 * ncol, 2.6 * nrow + 0.4), sharey=True, squeeze=False)
    for ax, name in zip(axes.flat, names):
        for run, model, steps, values in series[name]:
            seed = runs[run]["meta"].get("seed", 0)
            ax.plot(
                steps,
                values,
                color=colour[model],
                lw=1.4,
                marker=".",
                ms=4,
                ls=["-", "--", ":", "-."][int(seed) % 4] if str(seed).lstrip("-").isdigit() else "-",
            )
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("step", fontsize=8)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
    for ax in axes.flat[len(names) :]:
        ax.set_visible(False)
    for row in axes:
        row[0].set_ylabel("accuracy", fontsize=8)
    handles = [plt.Line2D([], [], color=colour[m], lw=2) for m in models]
    fig.legend(handles, models, loc="upper center", ncol=len(models), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.35 / (2.6 * nrow + 0.4)))
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def make_figures(
    out: Path,
    runs: dict,
    pooled,
    methods,
    pair,
    alpha=AnalyzeSettings.alpha,
    metric: str = BASELINE_METRIC,
    notes: list | None = None,
    partials=None,
) -> dict[str, str]:
    """Write every figure into `out`; returns {file name: caption}. A figure with nothing to draw is skipped
    and `notes` (when given) gets one line naming it and why (from the per-run `partials`' flags if given)."""
    figs: dict[str, str] = {}
    notes = notes if notes is not None else []
    if len(pooled):
        setups = pooled.groupby("model")[["train_set", "shots"]].apply(lambda g: len(g.drop_duplicates()))
        for (model, train_set, shots, method), sub in pooled.groupby(["model", "train_set", "shots", "method"]):
            if not METHODS[method].controls and method not in methods:
                continue
            names = sorted(set(sub["testset_a"]) | set(sub["testset_b"]))
            tag = f"_{safe(train_set)}_{shots}shot" if setups.get(model, 1) > 1 else ""
            name = f"heatmap_{safe(model)}{tag}_{safe(method)}.png"
            r_cols = [c for c in ("r", "r_accuracy") if c in sub]
            if not np.isfinite(sub[r_cols].to_numpy(float)).any():
                why = sub
                if partials is not None and len(partials):
                    why = partials[(partials["model"] == model) & (partials["method"] == method)]
                notes.append(f"{model} {method} heatmap not drawn: {_why_empty(why if len(why) else sub)}.")
                continue
            seeds = int(sub["n_seeds"].max()) if "n_seeds" in sub else 1
            title = f"{model} | {train_set} {shots}-shot | {method}" + (f" | {seeds} seeds pooled" if seeds > 1 else "")
            mine = {run: d for run, d in runs.items() if d["meta"].get("model") == model}
            heatmap(
                sub,
                names,
                title,
                out / name,
                alpha,
                metric,
                empty={m: _why_no_r(mine, m) for m in {metric, BASELINE_METRIC}},
            )
            figs[name] = f"{title}: partial r of {metric}" + (
                " (left) and accuracy (right)" if metric != BASELINE_METRIC else ""
            )
    if len(runs) and curves_by_testset(runs, out / "curves_testsets.png"):
        figs["curves_testsets.png"] = (
            "accuracy vs step, one panel per testset, every run (colour = model), shared y-axis"
        )
    if pair:
        name = f"scatter_{safe(pair[0])}_{safe(pair[1])}.png"
        if scatter_grid(runs, pair, out / name, drawn_smooth(methods), metric):
            figs[name] = f"ID vs {pair[0]}, ID vs {pair[1]}, and their residuals"
    for run, d in runs.items():
        name = f"curves_{safe(run)}.png"
        curves(run, d, out / name, metric)
        figs[name] = f"accuracy{'' if metric == BASELINE_METRIC else ' and ' + metric} vs step: {run}"
    return figs


def reliability_heatmaps(
    fig_dir,
    reliability,
    reliability_min: float = AnalyzeSettings.reliability_min,
    metric: str = DEFAULT_METRIC,
    notes: list | None = None,
) -> dict:
    """reliability_<metric>_<method>.png: runs x testsets split-half reliability of the residual trajectory,
    for the analysed metric (the other metrics' reliabilities are in reliability.csv and the report)."""
    plt = _plt()
    figures = {}
    for (metric, method), g in reliability[reliability["metric"] == metric].groupby(["metric", "method"], sort=True):
        wide = g.pivot_table(index="run", columns="testset", values="reliability", aggfunc="mean", dropna=False)
        if wide.empty or not np.isfinite(wide.to_numpy(float)).any():
            if notes is not None:
                notes.append(
                    f"reliability heatmap ({metric}, {method}) not drawn: no testset has a reliability "
                    f"(too few items or checkpoints)."
                )
            continue
        fig, ax = plt.subplots(figsize=(1.2 + 0.8 * wide.shape[1], 1.0 + 0.4 * wide.shape[0]))
        im = ax.imshow(wide.to_numpy(float), vmin=0, vmax=1, cmap="viridis", aspect="auto")
        ax.set_xticks(range(wide.shape[1]), wide.columns, rotation=45, ha="right", fontsize=8)
        ax.set_yticks(range(wide.shape[0]), wide.index, fontsize=8)
        for (i, j), v in np.ndenumerate(wide.to_numpy(float)):
            ax.text(
                j,
                i,
                reliability_label(v),
                ha="center",
                va="center",
                fontsize=7,
                color="white" if not np.isfinite(v) or v < 0.6 else "black",
            )
        fig.colorbar(im, ax=ax, fraction=0.04)
        fit_title(ax, f"reliability of residual trajectories ({metric}, {method})")
        fig.tight_layout()
        name = f"reliability_{safe(metric)}_{safe(method)}.png"
        fig.savefig(Path(fig_dir) / name, dpi=100)
        plt.close(fig)
        figures[name] = (
            f"split-half reliability per run x testset ({metric}, {method}); below "
            f"{reliability_min} the residual trajectory is mostly testset noise"
        )
    return figures
