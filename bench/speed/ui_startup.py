#!/usr/bin/env python3
"""`oodcorr ui` start-up: seconds from launch until the MLflow UI answers (GET / returns the page and
/health returns 200) on the project's sqlite store, against MLflow's own `mlflow server` on the same store
(the baseline a user would otherwise type), alternating, `--repeat` times each, medians and ratio in one
process. Also counts warning lines each printed. Writes bench/speed/results/ui_startup.json.

    PYTHONPATH=src .venv/bin/python bench/speed/ui_startup.py [--project .] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_and_time(cmd: list[str], port: int, cwd: Path, timeout: float = 300) -> tuple[float, int]:
    """Seconds until / and /health answer; number of stderr lines mentioning a warning."""
    err = tempfile.TemporaryFile()
    t0 = time.time()
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=err,
        start_new_session=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    try:
        while time.time() - t0 < timeout:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    ok = r.status == 200
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
                    ok = ok and b"<html" in r.read(4096).lower()
                if ok:
                    took = time.time() - t0
                    break
            except OSError:
                time.sleep(0.1)
        else:
            raise SystemExit(f"{cmd[:4]}: no answer within {timeout:.0f} s")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    err.seek(0)
    warnings = sum("warn" in line.lower() for line in err.read().decode(errors="replace").splitlines())
    return took, warnings


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--project", type=Path, default=Path.cwd())
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    root = a.project.resolve()
    db = root / "mlruns" / "mlflow.db"
    if not db.exists():
        raise SystemExit(f"{db}: no store (run the quickstart first)")
    oodcorr = Path(sys.executable).with_name("oodcorr")
    times = {"oodcorr_ui": [], "mlflow_server": []}
    warns = {k: [] for k in times}
    for _ in range(a.repeat):
        for name in times:
            port = free_port()
            cmd = (
                [str(oodcorr), "ui", "--port", str(port)]
                if name == "oodcorr_ui"
                else [
                    sys.executable,
                    "-m",
                    "mlflow",
                    "server",
                    "--backend-store-uri",
                    f"sqlite:///{db}",
                    "--default-artifact-root",
                    str(root / "mlruns" / "artifacts"),
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                ]
            )
            t, w = start_and_time(cmd, port, root)
            times[name].append(round(t, 2))
            warns[name].append(w)
            print(f"{name}: {t:.1f} s, {w} warning line(s)", flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    out = {
        "repeat": a.repeat,
        "seconds": times,
        "median_s": med,
        "warning_lines": warns,
        "ratio_oodcorr_ui_vs_mlflow_server": round(med["oodcorr_ui"] / med["mlflow_server"], 3),
        "loadavg_start_end": os.getloadavg(),
        "cores": os.cpu_count(),
    }
    print(json.dumps(out, indent=1))
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "ui_startup.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
