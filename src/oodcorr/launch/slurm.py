"""The `slurm` executor: one job array per launch through submitit, states from `squeue`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from oodcorr.core.errors import UserError
from oodcorr.launch.common import Executor, echo, job_fields


def check_slurm(partition: str | None) -> None:
    """One line saying why no SLURM cluster is reachable, as a UserError."""
    hint = "(run on the cluster's login node, set SLURM_CONF, or use --executor local)"
    for tool in ("sbatch", "squeue", "sinfo"):
        if shutil.which(tool) is None:
            raise UserError(f"no SLURM cluster reachable: `{tool}` not found on PATH {hint}")
    conf = os.environ.get("SLURM_CONF")
    if conf and not Path(conf).is_file():
        raise UserError(f"no SLURM cluster reachable: SLURM_CONF={conf} does not exist {hint}")
    try:
        res = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        raise UserError(f"no SLURM cluster reachable: `sinfo` did not answer within 30 s {hint}") from None
    if res.returncode != 0:
        last = [line.removeprefix("sinfo: ") for line in res.stderr.splitlines() if line.strip()]
        raise UserError(f"no SLURM cluster reachable: sinfo: {last[-1] if last else f'exit {res.returncode}'} {hint}")
    partitions = sorted({p.rstrip("*") for p in res.stdout.split()})
    if partition and partition not in partitions:
        from oodcorr.core.errors import closest

        raise UserError(
            f"SLURM partition {partition!r} not found{closest(partition, partitions)}; "
            f"partitions: {', '.join(partitions) or 'none'}"
        )


def squeue_states() -> dict[str, str] | None:
    """{job id (array tasks as A_i): state} of this user's queued/running jobs; None if squeue fails."""
    try:
        res = subprocess.run(["squeue", "--me", "-h", "-r", "-o", "%i|%T"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if res.returncode != 0:
        return None
    out = {}
    for line in res.stdout.splitlines():
        if "|" in line:
            job, state = line.strip().split("|", 1)
            out[job] = state
    return out


def _slurm_executor(folder: Path, cfg: dict, n_jobs: int):
    import submitit

    ex = submitit.SlurmExecutor(folder=folder, max_num_timeout=int(cfg["max_requeue"]))
    gpus = cfg["gpus_per_run"] if cfg["gpus_per_run"] is not None else 1
    kw = {
        "time": cfg["time_min"],
        "job_name": "oodcorr",
        "nodes": 1,
        "ntasks_per_node": 1,
        "setup": list(cfg.get("setup") or []),
    }
    if gpus:
        kw["gpus_per_node"] = gpus
    for key, name in (
        ("partition", "partition"),
        ("cpus_per_run", "cpus_per_task"),
        ("account", "account"),
        ("qos", "qos"),
        ("constraint", "constraint"),
    ):
        if cfg.get(key) is not None:
            kw[name] = cfg[key]
    if cfg.get("mem_gb") is not None:
        kw["mem"] = f"{int(round(float(cfg['mem_gb']) * 1024))}M"
    if cfg.get("max_parallel"):
        kw["array_parallelism"] = min(int(cfg["max_parallel"]), max(n_jobs, 1))
    if cfg.get("sbatch"):
        kw["additional_parameters"] = {str(k).replace("-", "_"): v for k, v in cfg["sbatch"].items()}
    ex.update_parameters(**kw)
    return ex


class Slurm(Executor):
    name = "slurm"
    detached = True

    def check(self, cfg: dict) -> None:
        check_slurm(cfg.get("partition"))

    def submit(self, path: Path, record: dict, jobs_spec: list[dict], cfg: dict, publish) -> None:
        from oodcorr.launch.job import RunJob

        folder = Path(record["folder"])
        ex = _slurm_executor(folder, cfg, len(jobs_spec))
        try:
            jobs = ex.map_array(RunJob(), jobs_spec)
        except Exception as e:  # noqa: BLE001 - sbatch refused (partition, account, limits): one line
            lines = [line.strip() for line in str(e).splitlines() if line.strip()]
            errors = [line for line in lines if "error" in line.lower()] or lines[-1:]
            raise UserError(
                f"sbatch refused the job array: {errors[0] if errors else type(e).__name__} "
                f"(settings: study.launch / command-line options)"
            ) from None
        for spec, job in zip(jobs_spec, jobs):
            record["runs"][spec["key"]].update(job_fields(job))
        publish()
        first = jobs[0].job_id.split("_")[0] if jobs else "?"
        echo(
            f"submitted {len(jobs)} run(s) as SLURM job array {first} "
            f"({', '.join(r['key'] for r in jobs_spec)}); logs in {folder}"
        )

    def queue(self) -> dict[str, str] | None:
        return squeue_states()

    def state(self, run: dict, queue: dict) -> str | None:
        return queue.get(run["job_id"])
