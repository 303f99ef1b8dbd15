#!/usr/bin/env python3
"""Quickstart wall time: `dvc repro` from scratch with the default params.yaml, `--repeat` times, each in a
fresh copy of the project (tracked files + data/raw; the model cache is warm, as after `make setup`).
Prints each time and the median; writes bench/results/quickstart_time.json.

    PATH=.venv/bin:$PATH python bench/quickstart_time.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "DVC_NO_ANALYTICS": "1"}
    env.pop("OODCORR_THREADS", None)
    env.pop("OMP_NUM_THREADS", None)  # what a user gets: the thread policy decides
    times, loads = [], []
    for i in range(a.repeat):
        with tempfile.TemporaryDirectory(prefix="oodcorr-qs-") as d:
            root = fresh_copy(Path(d))
            loads.append(os.getloadavg()[0])
            t0 = time.time()
            res = subprocess.run(["dvc", "repro"], cwd=root, env=env, capture_output=True, text=True)
            took = time.time() - t0
            if res.returncode != 0:
                raise SystemExit(f"dvc repro failed:\n{res.stderr[-3000:]}")
            times.append(round(took, 1))
            print(f"run {i + 1}: {took:.0f} s (load average at start {loads[-1]:.2f})", flush=True)
    out = {"seconds": times, "median_s": statistics.median(times), "loadavg_at_start": loads,
           "cores": os.cpu_count()}
    print(json.dumps(out))
    (REPO / "bench" / "results" / "quickstart_time.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
