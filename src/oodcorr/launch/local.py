"""The `local` executor: processes on this machine (submitit's LocalExecutor), throttled, GPUs split."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from oodcorr.core.errors import UserError
from oodcorr.core.io import write_json
from oodcorr.launch.common import Executor, echo, job_fields


def _visible_gpus() -> list[int]:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [int(x) for x in env.split(",") if x.strip().isdigit()]
    try:
        res = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
        return list(range(sum(1 for line in res.stdout.splitlines() if line.startswith("GPU "))))
    except (OSError, subprocess.SubprocessError):
        return []


def run_local(path: Path, record: dict, jobs_spec: list[dict], cfg: dict) -> None:
    """Processes on this machine through submitit's LocalExecutor, at most max_parallel at once (default 1);
    with gpus_per_run, each process gets its own GPUs (CUDA_VISIBLE_DEVICES)."""
    import submitit

    from oodcorr.launch.job import RunJob

    gpus = cfg.get("gpus_per_run")
    parallel = int(cfg.get("max_parallel") or 1)
    slots: list[list[int] | None] = [None] * parallel
    if gpus:
        visible = _visible_gpus()
        if len(visible) < gpus:
            raise UserError(f"--gpus-per-run {gpus}: this machine shows {len(visible)} GPU(s)")
        parallel = min(parallel, len(visible) // gpus)
        slots = [visible[i * gpus : (i + 1) * gpus] for i in range(parallel)]
    ex = submitit.LocalExecutor(folder=Path(record["folder"]), max_num_timeout=int(cfg["max_requeue"]))
    ex.update_parameters(timeout_min=cfg["time_min"])
    original_cuda = os.environ.get("CUDA_VISIBLE_DEVICES")
    pending = list(jobs_spec)
    active: dict[int, tuple[str, object]] = {}
    try:
        while pending or active:
            for slot in range(parallel):
                if slot in active or not pending:
                    continue
                spec = pending.pop(0)
                if gpus is None:  # leave the GPUs as this process sees them
                    spec["env"]["CUDA_VISIBLE_DEVICES"] = original_cuda
                    ex.update_parameters(gpus_per_node=0, visible_gpus=())
                else:
                    ex.update_parameters(gpus_per_node=gpus, visible_gpus=tuple(slots[slot] or ()))
                job = ex.submit(RunJob(), spec)
                _record_job(path, record, spec["key"], job_fields(job))
                active[slot] = (spec["key"], job)
                echo(f"started {spec['key']} (local process {job.job_id}); log {job.paths.stderr}", err=True)
            for slot, (key, job) in list(active.items()):
                if job.done():
                    del active[slot]
            time.sleep(0.5)
    except KeyboardInterrupt:
        for _, job in active.values():
            job.cancel(check=False)
        raise


def _record_job(path: Path, record: dict, key: str, fields: dict) -> None:
    """Note a started job in the launch record on disk, keeping what others wrote there meanwhile (a
    `study collect` beside the launch marks the runs it committed)."""
    record["runs"][key].update(fields)
    try:
        fresh = json.loads(path.read_text(encoding="utf-8"))
        fresh["runs"][key].update(fields)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        fresh = record
    write_json(path, fresh)


def _started(pid: str) -> str | None:
    """When process `pid` started (clock ticks since boot, /proc), so a reused pid is not taken for it."""
    try:
        return Path(f"/proc/{int(pid)}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, ValueError, IndexError):
        return None


def _pid_alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
        return True
    except (OSError, ValueError):
        return False


class Local(Executor):
    name = "local"

    def submit(self, path: Path, record: dict, jobs_spec: list[dict], cfg: dict, publish) -> None:
        record["launcher"] = {"pid": str(os.getpid()), "started": _started(str(os.getpid()))}
        publish()
        run_local(path, record, jobs_spec, cfg)  # returns when every process has ended

    def queued(self, record: dict) -> str | None:
        launcher = record.get("launcher") or {}
        pid = launcher.get("pid")
        if pid and _pid_alive(pid) and _started(pid) == launcher.get("started"):
            return f"waiting for a free slot in the launch (process {pid})"
        return None

    def state(self, run: dict, queue: dict) -> str | None:
        # no scheduler requeues it, and its pid may be reused once it has ended
        done = Path(run["result"]).exists()
        return "RUNNING" if not done and _pid_alive(run["job_id"]) else None
