"""What runs inside one job: a run's out-of-date stages, each exactly as `dvc repro` would run it (the stage's
`cmd` from dvc.yaml, in the project folder, after removing its non-persistent outputs). Imports only the
standard library and submitit, so nothing heavy is unpickled on the node.

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
    """Callable with one spec: {"key", "root", "stages": [{"name", "cmd", "remove": [paths]}], "env": {...}}."""

    def __call__(self, spec: dict) -> dict:
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
            for rel in stage.get("remove") or []:
                _remove(root / rel)
            print(f"[oodcorr launch] {spec['key']}: {stage['name']}: {stage['cmd']}", flush=True)
            start = time.time()
            rc, tail = _run(stage["cmd"], root, env)
            if rc != 0:
                last = " | ".join(tail) if tail else "no output on stderr"
                raise StageFailed(f"{spec['key']}: {stage['name']} exited {rc}: {last}")
            done.append({"name": stage["name"], "seconds": round(time.time() - start, 1)})
        return {"key": spec["key"], "stages": done}


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _run(cmd: str, cwd: Path, env: dict) -> tuple[int, list[str]]:
    """Run `cmd` through the shell (as DVC does); stdout goes to the job log, stderr too, and its last
    non-empty lines are kept for the failure message."""
    tail: collections.deque[str] = collections.deque(maxlen=3)
    proc = subprocess.Popen(cmd, shell=True, cwd=cwd, env=env, stderr=subprocess.PIPE, text=True,
                            errors="replace", bufsize=1)
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
