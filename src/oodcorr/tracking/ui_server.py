"""`oodcorr ui`'s server: `mlflow server` started as a child process on 127.0.0.1, polled until it answers
(/health) with progress on stderr, so the links are printed only once they open; then it runs in the
foreground until Ctrl-C, which stops it. MLflow's start-up output is shown only if it fails.

The server never outlives the command, whatever stops it: SIGINT, SIGTERM, SIGHUP (a closed terminal) and
SIGQUIT are caught from before the server starts and stop its whole process group (`mlflow server` starts
uvicorn as a child of its own); a SIGKILL, which cannot be caught, reaches the group through a small guard
process at its head that Linux signals when `oodcorr ui` dies (PR_SET_PDEATHSIG) and that then stops the group."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time

import click

from oodcorr.core.credentials import mask_secrets
from oodcorr.core.errors import UserError

START_TIMEOUT_S = 300  # a shared CPU can take minutes; a server that never answers is stopped then
POLL_S = 0.25
PROGRESS_EVERY_S = 10  # a progress line this often when stderr is not a terminal (logs, CI)


def answers(base: str, timeout: float = 2.0) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"{base}/health", timeout=timeout) as r:
            return r.status == 200
    except OSError:
        return False


STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT") if hasattr(signal, n))
# The head of the server's process group: asks Linux for SIGTERM when its parent (`oodcorr ui`) dies, even by
# SIGKILL, then runs the server; on any stop signal it stops the whole group (the server and its uvicorn child).
GUARD = r"""
import ctypes, os, signal, subprocess, sys, time
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
server = None
def others():  # live members of this process group besides this one (the server and its children)
    out = []
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and int(d) != os.getpid() and os.getpgid(int(d)) == os.getpgid(0):
                with open(f"/proc/{d}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                        out.append(int(d))
        except OSError:
            pass
    return out
def stop(*_):
    for s in SIGNALS:
        signal.signal(s, signal.SIG_IGN)  # the group's SIGTERM below reaches this process too
    os.killpg(0, signal.SIGTERM)
    deadline = time.time() + 15
    while time.time() < deadline and (server is None or server.poll() is None or others()):
        time.sleep(0.2)
    os.killpg(0, signal.SIGKILL)  # whatever is left, this guard included
for s in SIGNALS:
    signal.signal(s, stop)
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: SIGTERM when the parent dies
except (OSError, AttributeError):
    pass
if os.getppid() != int(sys.argv[1]):  # `oodcorr ui` died before that request was in place
    sys.exit(143)
server = subprocess.Popen(sys.argv[2:])
code = server.wait()
stop() if code < 0 else sys.exit(code)
"""


def serve(cmd: list[str], base: str, env: dict, on_ready) -> None:
    """Run `cmd` (an `mlflow server` on `base`), wait until it answers, call `on_ready(seconds)`, then wait for
    it to end; any stop signal (STOP_SIGNALS) stops it, also during start-up. A server that exits or stays
    silent before answering is a UserError carrying the last line it printed."""
    previous = {sig: signal.signal(sig, _interrupt) for sig in STOP_SIGNALS}  # before the server exists
    try:
        _serve(cmd, base, env, on_ready)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _serve(cmd: list[str], base: str, env: dict, on_ready) -> None:
    proc = None
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", GUARD, str(os.getpid()), *cmd],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
        )  # its own process group: stopped with its workers
    except KeyboardInterrupt:  # a stop signal while the guard was being started
        return
    tail: collections.deque[str] = collections.deque(maxlen=20)
    ready = threading.Event()

    def pump():  # before it answers: kept for the error line; afterwards: passed through (masked)
        for line in proc.stderr:
            if ready.is_set():
                sys.stderr.write(mask_secrets(line))
            else:
                tail.append(line.rstrip())

    try:
        threading.Thread(target=pump, daemon=True).start()
        took = _wait(proc, base, tail)
        ready.set()
        on_ready(took)
        proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        _stop(proc)


def _interrupt(*_):
    raise KeyboardInterrupt


def _wait(proc, base: str, tail) -> float:
    tty = sys.stderr.isatty()
    t0 = last = time.monotonic()
    while not answers(base):
        now = time.monotonic()
        if proc.poll() is not None:
            raise UserError(
                f"the MLflow server exited (code {proc.returncode}) before it answered on {base}: "
                f"{mask_secrets(_last_line(tail))}"
            )
        if now - t0 > START_TIMEOUT_S:
            raise UserError(
                f"the MLflow server did not answer on {base} within {START_TIMEOUT_S} s (a busy CPU?); "
                f"last output: {mask_secrets(_last_line(tail))}"
            )
        if tty:
            click.echo(f"\r  starting the MLflow server ... {now - t0:.0f} s", err=True, nl=False)
        elif now - last >= PROGRESS_EVERY_S:
            click.echo(f"  still starting ({now - t0:.0f} s)", err=True)
            last = now
        time.sleep(POLL_S)
    if tty:
        click.echo("\r" + " " * 40 + "\r", err=True, nl=False)
    return time.monotonic() - t0


def _last_line(tail) -> str:
    lines = [x for x in tail if x.strip()]
    return " ".join(lines[-1].split())[:200] if lines else "no output"


def _stop(proc) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)  # the server and its workers
        except ProcessLookupError:
            break
        try:
            proc.wait(20)
            break
        except subprocess.TimeoutExpired:
            continue


def server_env() -> dict:
    env = dict(os.environ)
    env.setdefault("PYTHONWARNINGS", "ignore")  # a viewer: starlette/mlflow deprecation notices are not for users
    env.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    return env
