"""The analysis' outputs: the results folder it may replace (check_out_dir), and writing every table, figure,
summary.json, the DVC metric metrics.json and report.html into it in one atomic step."""

from __future__ import annotations

import json
from pathlib import Path

from oodcorr.errors import UserError

OUTPUT_NAMES = {"partial_correlations.csv", "pooled_seeds.csv", "consistency.csv", "reliability.csv", "plots",
                "answer_bias.csv",
                "figures", "summary.json", "metrics.json", "report.html", ".gitignore"}
OUTPUT_SUFFIXES = {".csv", ".json", ".png", ".svg", ".pdf", ".html", ".txt"}


def check_out_dir(out_dir: Path) -> None:
    """`out_dir` is replaced as a whole, so it must hold nothing this tool did not write: refuse a folder with
    foreign files (one line, nothing touched), a file, or a place that cannot be written."""
    import os

    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out {out_dir}: is a file, not a folder")
    if out_dir.is_dir():
        foreign = []
        for entry in sorted(out_dir.iterdir()):
            if entry.name not in OUTPUT_NAMES or entry.is_symlink():
                foreign.append(entry.name)
            elif entry.is_dir():
                foreign += [str(f.relative_to(out_dir)) for f in sorted(entry.rglob("*"))
                            if f.is_symlink() or (f.is_file() and f.suffix not in OUTPUT_SUFFIXES)]
        if foreign:
            shown = ", ".join(foreign[:3]) + (f" (+{len(foreign) - 3} more)" if len(foreign) > 3 else "")
            raise UserError(f"--out {out_dir}: holds files oodcorr did not write ({shown}); the analysis replaces "
                            "this folder as a whole, so choose an empty or new folder")
    parent = out_dir if out_dir.is_dir() else out_dir.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not os.access(parent, os.W_OK | os.X_OK) or (out_dir.is_dir() and not os.access(out_dir.parent, os.W_OK)):
        raise UserError(f"--out {out_dir}: not writable ({parent} is read-only for this user)")


def curves_table(runs: dict):
    """Every available metric (accuracy, the analysed one, yes_rate, ...) per run x step x testset, ID and OOD:
    plots/accuracy_vs_step.csv."""
    import pandas as pd

    rows = []
    for run, d in runs.items():
        names = [d["meta"]["id_testset"], *d["Y"].columns, *(d.get("one_class") or [])]
        ser = d.get("series") or {"accuracy": {d["meta"]["id_testset"]: d["x"], **{t: d["Y"][t].to_numpy()
                                                                                  for t in d["Y"].columns}}}
        for name in names:
            for i, step in enumerate(d["steps"]):
                row = {"run": run, "model": d["meta"]["model"], "seed": d["meta"]["seed"], "step": int(step),
                       "testset": name, "role": "id" if name == d["meta"]["id_testset"] else "ood"}
                row.update({m: float(v[name][i]) for m, v in ser.items()})
                rows.append(row)
    return pd.DataFrame(rows).dropna(subset=["accuracy"]) if rows else pd.DataFrame(rows)


def write_outputs(out_dir: Path, settings, summary: dict, runs: dict, tables: dict, curves, all_methods: list,
                  pair, plots: bool) -> None:
    """Every output into a temporary folder that replaces `out_dir` only when all of it is written.
    `tables`: partials, pooled, consistency, reliability (None: no predictions / noise off)."""
    import pandas as pd

    from oodcorr.analysis.noise_tables import RELIABILITY_COLUMNS
    from oodcorr.io import atomic_dir

    partials, pooled, consistency, reliability = (tables[k] for k in ("partials", "pooled", "consistency",
                                                                      "reliability"))
    alpha = settings.alpha
    with atomic_dir(Path(out_dir)) as tmp:
        partials.to_csv(tmp / "partial_correlations.csv", index=False)
        pooled.to_csv(tmp / "pooled_seeds.csv", index=False)
        consistency.to_csv(tmp / "consistency.csv", index=False)
        if reliability is None:  # no predictions / noise off: the same columns, no rows (a declared DVC out)
            reliability = pd.DataFrame(columns=RELIABILITY_COLUMNS)
        reliability.to_csv(tmp / "reliability.csv", index=False)
        from oodcorr.analysis.answer_bias import COLUMNS as BIAS_COLUMNS

        bias = tables.get("answer_bias")
        (bias if bias is not None else pd.DataFrame(columns=BIAS_COLUMNS)).to_csv(tmp / "answer_bias.csv",
                                                                                  index=False)
        (tmp / "plots").mkdir()
        curves.to_csv(tmp / "plots" / "accuracy_vs_step.csv", index=False)
        figures = {}
        if plots:
            from oodcorr.analysis.plots import make_figures

            (tmp / "figures").mkdir()
            figures = make_figures(tmp / "figures", runs, pooled, all_methods, pair, alpha, settings.metric)
            if bias is not None and len(bias):
                from oodcorr.analysis.answer_bias import yes_rate_figures

                figures.update(yes_rate_figures(tmp / "figures", {
                    run: {"yes_rate": {t: d["series"]["yes_rate"][t] for t in bias[bias["run"] == run]["testset"]},
                          "yes_share_gold": d["gold_share"]} for run, d in runs.items()},
                    {run: d["steps"] for run, d in runs.items()}))
            if reliability is not None and len(reliability):
                from oodcorr.analysis.plots import reliability_heatmaps

                figures.update(reliability_heatmaps(tmp / "figures", reliability, settings.reliability_min,
                                                    settings.metric))
        summary["figures"] = sorted(figures)
        (tmp / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
        from oodcorr.analysis.headline import headline

        io_json = json.dumps(headline(summary, curves, settings.methods[0]), indent=2)
        (tmp / "metrics.json").write_text(io_json + "\n")  # the DVC metric: a few headline numbers
        from oodcorr.analysis.report import write_report

        write_report(tmp / "report.html", summary, runs, partials, pooled, consistency, figures, alpha,
                     reliability=reliability, answer_bias=bias)
