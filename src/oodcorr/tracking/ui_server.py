"""`oodcorr ui`'s server: `mlflow server` started as a child process on 127.0.0.1, polled until it answers
(/health) with progress on stderr, so the links are printed only once they open; then it runs in the
foreground until Ctrl-C (or SIGTERM), which stops it. MLflow's start-up output is shown only if it fails."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time

import click

from oodcorr.credentials import mask_secrets
from oodcorr.errors import UserError

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


def serve(cmd: list[str], base: str, env: dict, on_ready) -> None:
    """Run `cmd` (an `mlflow server` on `base`), wait until it answers, call `on_ready(seconds)`, then wait for
    it to end; Ctrl-C / SIGTERM stop it. A server that exits or stays silent before answering is a UserError
    carrying the last line it printed."""
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, errors="replace",
                            start_new_session=True)  # its own process group: stopped with its workers
    tail: collections.deque[str] = collections.deque(maxlen=20)
    ready = threading.Event()

    def pump():  # before it answers: kept for the error line; afterwards: passed through (masked)
        for line in proc.stderr:
            if ready.is_set():
                sys.stderr.write(mask_secrets(line))
            else:
                tail.append(line.rstrip())

    threading.Thread(target=pump, daemon=True).start()
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        took = _wait(proc, base, tail)
        ready.set()
        on_ready(took)
        proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        _stop(proc)


def _interrupt(*_):
    raise KeyboardInterrupt


def _wait(proc, base: str, tail) -> float:
    tty = sys.stderr.isatty()
    t0 = last = time.monotonic()
    while not answers(base):
        now = time.monotonic()
        if proc.poll() is not None:
            raise UserError(f"the MLflow server exited (code {proc.returncode}) before it answered on {base}: "
                            f"{mask_secrets(_last_line(tail))}")
        if now - t0 > START_TIMEOUT_S:
            raise UserError(f"the MLflow server did not answer on {base} within {START_TIMEOUT_S} s (a busy CPU?); "
                            f"last output: {mask_secrets(_last_line(tail))}")
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
