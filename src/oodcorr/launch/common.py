"""What every launch module shares: progress lines, the fields a submitted job leaves in the launch record,
and the interface of an executor (one module per executor: local.py, slurm.py; the table: executors.py)."""

from __future__ import annotations

import sys
from pathlib import Path


def echo(msg: str = "", err: bool = False) -> None:
    print(msg, file=sys.stderr if err else sys.stdout, flush=True)


def job_fields(job) -> dict:
    """Where a submitted job's logs are (its outcome: the JSON file named by its spec's "result")."""
    return {"job_id": str(job.job_id), "stdout": str(job.paths.stdout), "stderr": str(job.paths.stderr)}


class Executor:
    """How runs become jobs somewhere. `publish()` (given to submit) writes the launch record and marks it the
    latest launch; an executor calls it once the record holds what a later `status` needs."""

    name = ""
    detached = False  # jobs outlive the launching command (`--no-wait` possible)

    def check(self, cfg: dict) -> None:
        """Raise UserError (one line) when this executor cannot run here with these settings."""

    def submit(self, path: Path, record: dict, jobs_spec: list[dict], cfg: dict, publish) -> None:
        raise NotImplementedError

    def queued(self, record: dict) -> str | None:
        """Why a run without a job id is still waiting (its launch is alive to start it), None when it never will."""
        return None

    def queue(self) -> dict[str, str] | None:
        """{job id: scheduler state} of queued/running jobs; None when the scheduler did not answer."""
        return {}

    def state(self, run: dict, queue: dict) -> str | None:
        """The scheduler's state of a submitted run (PENDING, RUNNING, ...), None once it has ended."""
        raise NotImplementedError
