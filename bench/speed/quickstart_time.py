#!/usr/bin/env python3
"""Quickstart wall time: `dvc repro` from scratch with the default params.yaml, `--repeat` times, each in a
fresh copy of the project (tracked files + data/raw; the model cache is warm, as after `make setup`).
Prints each time (wall and the CPU time of `dvc repro` and everything it started) and the median; writes
bench/speed/results/quickstart_time.json. With --keep, the last run's
committed outputs (dvc.lock, results/metrics.json + summary.json, runs/*/eval/{summary.json,accuracy.csv}, and
the README's accuracy-curve figure, docs/quickstart_curves.png) replace the repository's, so the timed run is
the one shown.

    PATH=.venv/bin:$PATH python bench/speed/quickstart_time.py [--repeat 3] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def fresh_copy(dst: Path) -> Path:
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    for rel in files:
        if rel.startswith(("runs/", "results/")) or rel == "dvc.lock":
            continue
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, dst / rel)
    shutil.copytree(REPO / "data" / "raw", dst / "data" / "raw")
    for cmd in (["git", "init", "-q"], ["dvc", "init", "-q", "--force"]):
        subprocess.run(cmd, cwd=dst, check=True)
    return dst


def keep_outputs(root: Path) -> None:
    """The files git tracks among a quickstart's outputs (dvc.yaml: cache: false metrics/plots + dvc.lock)."""
    import yaml

    for old in (REPO / "runs").glob("*/eval/*"):  # a previous quickstart's runs (other keys) go too
        if old.name in ("summary.json", "accuracy.csv"):
            old.unlink()
    keys = yaml.safe_load((root / "params.yaml").read_text())["runs"]
    rels = ["dvc.lock", "results/metrics.json", "results/summary.json"]
    rels += [f"runs/{k}/eval/{f}" for k in keys for f in ("summary.json", "accuracy.csv", ".gitignore")]
    rels += [f"runs/{k}/.gitignore" for k in keys] + ["results/.gitignore"]
    for rel in rels:
        if (root / rel).exists():
            (REPO / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / rel, REPO / rel)
    figs = root / "results" / "figures"
    for old in (REPO / "docs").glob("quickstart_*.png"):
        old.unlink()
    curves = [figs / "curves_testsets.png"] + sorted(figs.glob("curves_*.png"))  # both families per testset first
    curves = [c for c in curves if c.exists()]
    if curves:
        shutil.copy2(curves[0], REPO / "docs" / "quickstart_curves.png")
    print(f"kept the outputs of {root} in {REPO}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="copy the last run's committed outputs into the repo")
    a = ap.parse_args()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "DVC_NO_ANALYTICS": "1"}
    env.pop("OODCORR_THREADS", None)
    env.pop("OMP_NUM_THREADS", None)  # what a user gets: the thread policy decides
    times, cpu, loads = [], [], []
    for i in range(a.repeat):
        with tempfile.TemporaryDirectory(prefix="oodcorr-qs-") as d:
            root = fresh_copy(Path(d))
            loads.append(os.getloadavg()[0])
            t0, r0 = time.time(), resource.getrusage(resource.RUSAGE_CHILDREN)
            res = subprocess.run(["dvc", "repro"], cwd=root, env=env, capture_output=True, text=True)
            took, r1 = time.time() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(round(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, 1))
            if res.returncode != 0:
                raise SystemExit(f"dvc repro failed:\n{res.stderr[-3000:]}")
            times.append(round(took, 1))
            print(
                f"run {i + 1}: {took:.0f} s wall, {cpu[-1]:.0f} s CPU (load average at start {loads[-1]:.2f})",
                flush=True,
            )
            if a.keep and i == a.repeat - 1:
                keep_outputs(root)
    out = {
        "seconds": times,
        "median_s": statistics.median(times),
        "cpu_seconds": cpu,
        "median_cpu_s": statistics.median(cpu),
        "loadavg_at_start": loads,
        "cores": os.cpu_count(),
    }
    print(json.dumps(out))
    (REPO / "bench" / "speed" / "results" / "quickstart_time.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
