"""What runs inside one job: a run's out-of-date stages, each as `dvc repro` would run it (the stage's `cmd` from
dvc.yaml, in the project folder, after removing its non-persistent outputs), but as an argument list without a
shell. Its outcome is a JSON file (spec["result"]). Imports only the standard library and submitit, so nothing
heavy is unpickled on the node.

A preempted or timed-out SLURM job is requeued by submitit (Checkpointable) and simply runs the commands
again: `oodcorr train` resumes from its newest checkpoint and finds its MLflow run by run key; evaluation
skips the (checkpoint, testset) pairs already in its cache."""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

try:  # submitit is only needed when the job is pickled by the launcher
    from submitit.helpers import Checkpointable as _Base
except ImportError:  # pragma: no cover
    _Base = object


class StageFailed(RuntimeError):
    """A stage command exited non-zero; the message names the run, the stage, the exit code and the last
    lines the command wrote to stderr."""


class RunJob(_Base):
    """Callable with one spec: {"key", "root", "stages": [{"name", "cmd", "remove": [paths]}], "env": {...},
    "result": path}. The outcome is written as JSON to spec["result"] (what `oodcorr study status` reads; it
    never unpickles anything from the launch folder)."""

    def __call__(self, spec: dict) -> dict:
        result = Path(spec["result"]) if spec.get("result") else None
        if result is not None:
            result.unlink(missing_ok=True)  # a requeued attempt: the earlier attempt's outcome is void
        try:
            out = self._stages(spec)
        except Exception as e:  # a failed stage (not a requeue/cancel signal, which is a BaseException)
            lines = str(e).strip().splitlines()
            _write_result(result, {"outcome": "error", "message": lines[-1] if lines else type(e).__name__})
            raise
        _write_result(result, {"outcome": "success", **out})
        return out

    def _stages(self, spec: dict) -> dict:
        root = Path(spec["root"])
        env = dict(os.environ)
        # the launcher's interpreter (submitit runs this job with it) holds `oodcorr` and `dvc`
        env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
        for name, value in (spec.get("env") or {}).items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = str(value)
        done = []
        for stage in spec["stages"]:
            argv = command_argv(stage["cmd"])  # refused before anything of this stage is removed
            for rel in stage.get("remove") or []:
                _remove(root / rel)
            print(f"[oodcorr launch] {spec['key']}: {stage['name']}: {stage['cmd']}", flush=True)
            start = time.time()
            rc, tail = _run(argv, root, env)
            if rc != 0:
                last = " | ".join(tail) if tail else "no output on stderr"
                raise StageFailed(f"{spec['key']}: {stage['name']} exited {rc}: {last}")
            done.append({"name": stage["name"], "seconds": round(time.time() - start, 1)})
        return {"key": spec["key"], "stages": done}


SHELL_SYNTAX = set("|&;<>()$`\\*?\n")  # what only a shell would interpret


def command_argv(cmd: str) -> list[str]:
    """A stage's `cmd` as an argument list, run without a shell: words split as a shell would (quotes
    honoured); a command that needs a shell (pipes, redirections, variables, globs, several commands) is
    refused, so no text from params.yaml can become shell syntax. dvc.yaml's stage commands need none."""
    import shlex

    bad = sorted(set(cmd) & SHELL_SYNTAX)
    try:
        argv = shlex.split(cmd, posix=True)
    except ValueError as e:
        raise StageFailed(f"stage command {cmd!r}: {e}") from None
    if bad or not argv:
        raise StageFailed(
            f"stage command {cmd!r} needs a shell ({' '.join(map(repr, bad)) or 'empty'}); "
            "`oodcorr study launch` runs stage commands without one"
        )
    return argv


def _write_result(path: Path | None, outcome: dict) -> None:
    if path is None:
        return
    import json
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(outcome, f)
    os.replace(tmp, path)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _run(argv: list[str], cwd: Path, env: dict) -> tuple[int, list[str]]:
    """Run the stage's command (an argument list: no shell); stdout goes to the job log, stderr too, and its
    last non-empty lines are kept for the failure message."""
    tail: collections.deque[str] = collections.deque(maxlen=3)
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stderr=subprocess.PIPE, text=True, errors="replace", bufsize=1)
    except OSError as e:  # the program itself is missing
        return 127, [f"{argv[0]}: {e.strerror or e}"]
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            sys.stderr.write(line)
            if line.strip():
                tail.append(line.strip()[:300])
        sys.stderr.flush()
        return proc.wait(), list(tail)
    except BaseException:  # requeue (SystemExit from the signal handler), cancel: stop the stage too
        proc.kill()
        proc.wait()
        raise
