"""The analysis' outputs: the results folder it may replace (check_out_dir: only what an earlier analysis wrote,
by its manifest), and writing every table, figure, summary.json, the DVC metric metrics.json, report.html and
the manifest into it in one atomic step."""

from __future__ import annotations

import json
import os
from pathlib import Path

from oodcorr.core.errors import UserError
from oodcorr.stats.methods import primary

MANIFEST = ".oodcorr-outputs.json"  # {"tool", "version", "written_by", "files": {path: sha256}, "dirs": [...]}
WRITTEN_BY = "oodcorr analyze"  # the marker: a folder is the analysis' own only with a manifest saying this


def _sha256(path: Path) -> str | None:
    from oodcorr.core.io import sha256_file

    try:
        return sha256_file(path)
    except OSError:
        return None


def _dvc_gitignore(path: Path, names: set[str]) -> bool:
    """A .gitignore as DVC writes it next to outputs: `/name` lines naming our top-level outputs."""
    try:
        lines = [x.strip() for x in path.read_text(encoding="utf-8").splitlines()]
    except (OSError, UnicodeDecodeError):
        return False
    return all(not x or x.startswith("#") or (x.startswith("/") and x[1:] in names) for x in lines)


def read_manifest(out_dir: Path) -> tuple[dict, set]:
    """(files, dirs) the analysis recorded in `out_dir`'s manifest; empty unless the manifest is one oodcorr
    wrote (its tool name, a version): a file's shape never makes it ours."""
    try:
        manifest = json.loads((out_dir / MANIFEST).read_text(encoding="utf-8"))
        if (
            manifest.get("tool") != "oodcorr"
            or manifest.get("written_by") != WRITTEN_BY
            or not isinstance(manifest.get("version"), str)
        ):
            return {}, set()
        files, dirs = dict(manifest.get("files") or {}), set(manifest.get("dirs") or [])
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError, TypeError, ValueError):
        return {}, set()
    return files, dirs


TOP_LEVEL = {
    "partial_correlations.csv",
    "pooled_seeds.csv",
    "consistency.csv",
    "reliability.csv",
    "report.html",
    "answer_bias.csv",
    "plots",
    "figures",
    "summary.json",
    "metrics.json",
    "versions.json",  # oodcorr.records.versions.FILE: the packages it ran with
    MANIFEST,
}


def check_out_dir(out_dir: Path) -> None:
    """`out_dir` is replaced as a whole, so it must hold nothing but what an earlier analysis wrote: every file
    must be listed, with the same content, in the folder's manifest (written with the outputs: the tool's name and
    version), except a DVC-written .gitignore (kept). A file, a folder with anything else, or a place that cannot
    be written is refused with one line, before any work."""
    out_dir = Path(out_dir)
    if out_dir.is_symlink():  # replacing it would drop the link and leave the folder it points to stale
        raise UserError(
            f"--out {out_dir}: is a symbolic link (to {os.readlink(out_dir)}); give the folder itself "
            "as --out (or analyze.out), or remove the link"
        )
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out {out_dir}: is a file, not a folder")
    if out_dir.is_dir():
        files, dirs = read_manifest(out_dir)
        foreign: list[str] = []

        def walk(folder: Path) -> None:
            for entry in sorted(folder.iterdir()):
                rel = entry.relative_to(out_dir).as_posix()
                if rel == MANIFEST:
                    continue
                if entry.is_dir() and not entry.is_symlink():
                    if rel in dirs:
                        walk(entry)
                    else:
                        foreign.append(rel)
                elif rel in files:
                    if files[rel] != _sha256(entry):
                        foreign.append(f"{rel} (changed since)")
                elif not (rel == ".gitignore" and _dvc_gitignore(entry, TOP_LEVEL)):
                    foreign.append(rel)

        walk(out_dir)
        if foreign:
            shown = ", ".join(foreign[:3]) + (f" (+{len(foreign) - 3} more)" if len(foreign) > 3 else "")
            raise UserError(
                f"--out {out_dir}: holds files oodcorr did not write ({shown}); the analysis replaces "
                "this folder as a whole, so move them away or choose an empty or new folder"
            )
    check_writable(out_dir)


def check_writable(out_dir: Path) -> None:
    """The results folder is written next to itself (a temporary folder renamed onto it): try that in the nearest
    existing folder, so a read-only place, /proc or a name too long is one line before any work."""
    import tempfile

    parent = out_dir.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    try:
        if len(out_dir.name.encode()) > 200:
            raise OSError(36, "File name too long")
        tempfile.TemporaryDirectory(dir=parent, prefix=".oodcorr-probe-").cleanup()
    except OSError as e:
        raise UserError(
            f"--out {out_dir}: not writable ({parent}: {e.strerror or e}); choose another folder, "
            "e.g. one in your project"
        ) from None


def write_manifest(folder: Path, out_dir: Path) -> None:
    """The manifest of everything in `folder` (the analysis's temporary folder, about to become `out_dir`);
    DVC's .gitignore in the old `out_dir` is carried over."""
    import shutil

    old = out_dir / ".gitignore"
    if old.is_file() and not (folder / ".gitignore").exists() and _dvc_gitignore(old, TOP_LEVEL):
        shutil.copyfile(old, folder / ".gitignore")
    files, dirs = {}, []
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if p.is_dir():
            dirs.append(rel)
        elif rel != ".gitignore":
            files[rel] = _sha256(p)
    from oodcorr import __version__

    (folder / MANIFEST).write_text(
        json.dumps(
            {"tool": "oodcorr", "version": __version__, "written_by": WRITTEN_BY, "files": files, "dirs": dirs},
            indent=1,
        )
        + "\n"
    )


def curves_table(runs: dict):
    """Every available metric (accuracy, the analysed one, yes_rate, ...) per run x step x testset, ID and OOD:
    plots/accuracy_vs_step.csv."""
    import pandas as pd

    rows = []
    for run, d in runs.items():
        names = [d["meta"]["id_testset"], *d["Y"].columns, *(d.get("one_class") or [])]
        ser = d.get("series") or {
            "accuracy": {d["meta"]["id_testset"]: d["x"], **{t: d["Y"][t].to_numpy() for t in d["Y"].columns}}
        }
        for name in names:
            for i, step in enumerate(d["steps"]):
                row = {
                    "run": run,
                    "model": d["meta"]["model"],
                    "seed": d["meta"]["seed"],
                    "step": int(step),
                    "testset": name,
                    "role": "id" if name == d["meta"]["id_testset"] else "ood",
                }
                row.update({m: float(v[name][i]) for m, v in ser.items()})
                rows.append(row)
    return pd.DataFrame(rows).dropna(subset=["accuracy"]) if rows else pd.DataFrame(rows)


def _figures(tmp: Path, settings, runs: dict, tables: dict, bias, all_methods: list, pair, summary: dict) -> dict:
    """Every figure into tmp/figures ({file: caption}); summary["figures_not_drawn"]: those with nothing to draw."""
    from oodcorr.analysis.plots import make_figures

    partials, pooled, reliability = (tables[k] for k in ("partials", "pooled", "reliability"))
    (tmp / "figures").mkdir()
    notes: list[str] = []  # figures with nothing to draw: one line each, in the report
    figures = make_figures(
        tmp / "figures",
        runs,
        pooled,
        all_methods,
        pair,
        settings.alpha,
        settings.metric,
        notes=notes,
        partials=partials,
    )
    if bias is not None and len(bias):
        from oodcorr.analysis.answer_bias import yes_rate_figures

        rates = {
            run: {
                "yes_rate": {t: d["series"]["yes_rate"][t] for t in bias[bias["run"] == run]["testset"]},
                "yes_share_gold": d["gold_share"],
            }
            for run, d in runs.items()
        }
        figures.update(yes_rate_figures(tmp / "figures", rates, {run: d["steps"] for run, d in runs.items()}))
    if reliability is not None and len(reliability):
        from oodcorr.analysis.plots import reliability_heatmaps

        figures.update(
            reliability_heatmaps(tmp / "figures", reliability, settings.reliability_min, settings.metric, notes=notes)
        )
    summary["figures_not_drawn"] = notes
    return figures


def write_outputs(
    out_dir: Path, settings, summary: dict, runs: dict, tables: dict, curves, all_methods: list, pair, plots: bool
) -> None:
    """Every output into a temporary folder that replaces `out_dir` only when all of it is written.
    `tables`: partials, pooled, consistency, reliability (None: no predictions / noise off)."""
    import pandas as pd

    from oodcorr.analysis.noise_tables import RELIABILITY_COLUMNS
    from oodcorr.core.io import atomic_dir

    partials, pooled, consistency, reliability = (
        tables[k] for k in ("partials", "pooled", "consistency", "reliability")
    )
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
        (bias if bias is not None else pd.DataFrame(columns=BIAS_COLUMNS)).to_csv(tmp / "answer_bias.csv", index=False)
        (tmp / "plots").mkdir()
        curves.to_csv(tmp / "plots" / "accuracy_vs_step.csv", index=False)
        figures = _figures(tmp, settings, runs, tables, bias, all_methods, pair, summary) if plots else {}
        summary["figures"] = sorted(figures)
        (tmp / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
        from oodcorr.analysis.headline import headline

        io_json = json.dumps(headline(summary, curves, primary(settings.methods) or settings.methods[0]), indent=2)
        (tmp / "metrics.json").write_text(io_json + "\n")  # the DVC metric: a few headline numbers
        from oodcorr.analysis.report import write_report

        write_report(
            tmp / "report.html",
            summary,
            runs,
            partials,
            pooled,
            consistency,
            figures,
            alpha,
            reliability=reliability,
            answer_bias=bias,
        )
        from oodcorr.records import versions

        (tmp / versions.FILE).write_text(versions.document())  # what a saved study's reanalyze checks
        write_manifest(tmp, Path(out_dir))
