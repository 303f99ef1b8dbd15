"""`oodcorr ui` never leaves its MLflow server behind: a real `oodcorr ui` is stopped while the server is
starting, by each signal that can end it (a closed terminal's SIGHUP, SIGTERM, Ctrl-C's SIGINT, and SIGKILL,
which no handler sees), and no process of that server (the guard, `mlflow server`, its uvicorn) survives."""

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from study_helpers import BIN, env

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_pids(port: int) -> list[int]:
    """Live processes whose command line names this port and MLflow or uvicorn: the server of one `oodcorr ui`."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and f" {port}" in cmd and ("mlflow" in cmd or "uvicorn" in cmd):
            out.append(int(d.name))
    return out


def uvicorn(port: int) -> bool:
    return any(b"uvicorn" in Path(f"/proc/{p}/cmdline").read_bytes() for p in server_pids(port))


@pytest.mark.parametrize(
    "sig", [signal.SIGHUP, signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=lambda s: signal.Signals(s).name
)
def test_no_server_survives_a_signal_during_start_up(tmp_path, sig):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"study": {"name": "signals"}}))
    port = free_port()
    proc = subprocess.Popen(
        [str(BIN / "oodcorr"), "ui", "--port", str(port)],
        cwd=tmp_path,
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.time() + 240
        while not uvicorn(port) and time.time() < deadline:  # late in start-up: the web server is starting
            assert proc.poll() is None, "oodcorr ui ended before its server started"
            time.sleep(0.05)
        assert uvicorn(port), "no MLflow server process appeared"
        proc.send_signal(sig)  # oodcorr only, as a closing terminal or a service manager would
        proc.wait(60)
        deadline = time.time() + 60
        while server_pids(port) and time.time() < deadline:
            time.sleep(0.2)
        assert server_pids(port) == [], f"left behind after {signal.Signals(sig).name}: {server_pids(port)}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in server_pids(port):  # never leave one behind for the next test
            try:
                os.killpg(os.getpgid(pid), signal.SIGKILL)
            except OSError:
                pass
