#!/usr/bin/env python3
"""Copy a finished study's outputs (what `dvc repro` wrote) into a folder that git can hold, e.g. docs/cpu-study:

    python scripts/export_study.py /path/to/project docs/cpu-study

Copied: params.yaml, dvc.lock, results/ (metrics, CSVs, report, figures, plots), and per run
runs/<run>/eval/{summary.json,accuracy.csv} and runs/<run>/tracking/train.jsonl (the loss curve). Not copied:
adapters, per-example predictions and the eval cache (large; `dvc repro` rebuilds them).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

PER_RUN = ["eval/summary.json", "eval/accuracy.csv", "tracking/train.jsonl"]


def export(src: Path, dst: Path) -> list[Path]:
    if not (src / "results" / "summary.json").exists():
        raise SystemExit(f"{src}: no results/summary.json; run `dvc repro` there first")
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    copied = []
    for rel in ("params.yaml", "dvc.lock"):
        shutil.copy2(src / rel, dst / rel)
        copied.append(dst / rel)
    shutil.copytree(src / "results", dst / "results", ignore=shutil.ignore_patterns(".gitignore"))
    copied.append(dst / "results")
    for run in sorted(p for p in (src / "runs").iterdir() if p.is_dir()):
        for rel in PER_RUN:
            if (run / rel).exists():
                (dst / "runs" / run.name / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(run / rel, dst / "runs" / run.name / rel)
                copied.append(dst / "runs" / run.name / rel)
    return copied


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("dst", type=Path)
    a = ap.parse_args()
    copied = export(a.src, a.dst)
    size = sum(f.stat().st_size for p in copied for f in ([p] if p.is_file() else p.rglob("*")) if f.is_file())
    print(f"{len(copied)} entries, {size / 1e6:.1f} MB -> {a.dst}")


if __name__ == "__main__":
    main()
