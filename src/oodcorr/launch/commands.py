"""`oodcorr study launch | status | collect`, `save | reanalyze` from saved.py and `verify` from verify_cmd.py
(registered on the `study` group in oodcorr.study). Heavy imports (DVC, submitit, mlflow) happen inside the
commands, so `oodcorr --help` stays fast."""

from __future__ import annotations

from pathlib import Path

import click

from oodcorr.core.errors import UserError
from oodcorr.launch.common import echo
from oodcorr.launch.executors import EXECUTORS

_PARAMS = click.option(
    "--params",
    "params_file",
    default=None,
    type=click.Path(dir_okay=False),
    help="params.yaml of the project (default: found from the current folder).",
)


def _load(params_file):
    from oodcorr.settings.config import load_params

    return load_params(params_file)


@click.command("launch")
@click.option(
    "--executor",
    type=click.Choice(list(EXECUTORS)),
    default=None,
    help="slurm: one job per run (a job array); local: processes on this machine. "
    "[default: study.launch.executor, else local]",
)
@click.option("--partition", default=None, help="SLURM partition (sbatch --partition).")
@click.option(
    "--gpus-per-run",
    type=int,
    default=None,
    help="GPUs per run (SLURM default 1; locally, GPUs are split between the parallel runs).",
)
@click.option("--cpus-per-run", type=int, default=None, help="sbatch --cpus-per-task.")
@click.option("--mem-gb", type=float, default=None, help="sbatch --mem, in GB.")
@click.option("--time", "time_", default=None, help="Time limit per job: minutes or [D-]HH:MM[:SS] (default 24:00:00).")
@click.option(
    "--max-parallel",
    type=int,
    default=None,
    help="Runs at once (SLURM array throttle %N; locally the number of processes, default 1).",
)
@click.option("--runs", "only", default=None, help="Comma list of run keys (default: every out-of-date run).")
@click.option(
    "--wait/--no-wait",
    default=True,
    show_default=True,
    help="Wait for the jobs and collect them; --no-wait returns after submitting (SLURM).",
)
@click.option("--dry-run", is_flag=True, help="List the runs that would be launched; submit nothing.")
@_PARAMS
def launch_cmd(
    executor, partition, gpus_per_run, cpus_per_run, mem_gb, time_, max_parallel, only, wait, dry_run, params_file
):
    """Run the out-of-date train/evaluate stages of the study as one job per run, then record them in
    dvc.lock (`dvc commit`), so `dvc repro` afterwards runs only the analysis. Relaunching resumes failed or
    preempted runs from their newest checkpoint."""
    from oodcorr.launch import core

    params = _load(params_file)
    cfg = core.settings(
        params,
        executor=executor,
        partition=partition,
        gpus_per_run=gpus_per_run,
        cpus_per_run=cpus_per_run,
        mem_gb=mem_gb,
        time=time_,
        max_parallel=max_parallel,
    )
    root = Path(params["_root"])
    ex = EXECUTORS[cfg["executor"]]()
    ex.check(cfg)
    keys = [k.strip() for k in only.split(",") if k.strip()] if only else None
    busy = _busy(params, cfg, root, dry_run)
    stale, _ = core.plan(params, cfg, keys, prepare=not dry_run)
    for key in sorted(busy & set(stale)):
        echo(
            f"{key}: still queued or running in an earlier launch; not submitted again (`oodcorr study status`)",
            err=True,
        )
    stale = {k: v for k, v in stale.items() if k not in busy}
    n_runs = len(params.get("runs") or {})
    if not stale:
        echo(
            f"nothing to launch: the train/evaluate stages of all {n_runs} runs are up to date in "
            "dvc.lock" + ("" if not busy else f" or running ({len(busy)})") + "; `dvc repro` runs what is left"
        )
        return
    if dry_run:
        for key, stages in stale.items():
            echo(f"{key}: {' -> '.join(stages)}")
        echo(f"{len(stale)} of {n_runs} runs would be launched ({cfg['executor']})")
        return
    if not ex.detached and not wait:
        detached = " or ".join(n for n, c in EXECUTORS.items() if c.detached)
        raise UserError(f"--no-wait needs --executor {detached} ({ex.name} runs are child processes of this command)")
    _submit(params, cfg, root, stale, wait)


def _busy(params: dict, cfg: dict, root: Path, dry_run: bool) -> set[str]:
    """Earlier launches first: commit what finished (not in a dry run), and return the runs still queued or
    running there, so a run never runs twice at once."""
    from oodcorr.launch import core, records

    previous = records.open_records(root, cfg)
    if previous and dry_run:
        return {
            key
            for path in previous
            for key, st in records.run_states(records.read_record(path)).items()
            if st["state"] in records.ACTIVE or st["state"] == "UNKNOWN"
        }
    if not previous:
        return set()
    outcome = core.collect(params, cfg, previous, quiet=True)
    if outcome["committed"]:
        echo(f"committed {len(outcome['committed'])} run(s) finished in an earlier launch", err=True)
    return set(outcome["active"])


def _submit(params: dict, cfg: dict, root: Path, stale: dict, wait: bool) -> None:
    """Submit the stale runs; with `wait`, wait for them and record the finished ones in dvc.lock (exit 1 when
    one failed or is still stale)."""
    from oodcorr.launch import core, records
    from oodcorr.tracking import store as tracking

    tracking.setup(params)  # create the store and experiment once, before jobs log to it concurrently
    records.supersede(records.open_records(root, cfg), set(stale))
    path = core.submit(params, cfg, stale)
    if not wait:
        echo(
            "not waiting: `oodcorr study status` shows the jobs, `oodcorr study collect` records the "
            "finished ones in dvc.lock"
        )
        return
    try:
        core.wait(path)
    except KeyboardInterrupt:
        echo("\nstopped waiting; the jobs keep running: `oodcorr study status`, `oodcorr study collect`", err=True)
        raise SystemExit(130) from None
    outcome = core.collect(params, cfg, [path])
    if outcome["failed"] or outcome["stale"]:
        raise SystemExit(1)


@click.command("status")
@click.option("--all", "all_", is_flag=True, help="Every recorded launch, not only the latest.")
@_PARAMS
def status_cmd(all_, params_file):
    """State of the launched runs: PENDING/RUNNING, DONE (to collect), COMMITTED, FAILED (with its log)."""
    from oodcorr.launch import core, records

    params = _load(params_file)
    cfg = core.settings(params)
    root = Path(params["_root"])
    paths = records.records(root, cfg) if all_ else [records.latest_record(root, cfg)]
    for path in paths:
        record = records.read_record(path)
        click.echo(f"launch {path.parent.name} ({record['executor']}, {len(record['runs'])} runs)")
        for key, st in records.run_states(record).items():
            run = record["runs"][key]
            line = f"  {key:<40} {st['state']:<11} job {run.get('job_id', '-')}"
            if st["state"] in ("FAILED", "LOST", "STALE"):
                line += f"  {st['detail']}  log: {run.get('stderr')}"
            click.echo(line)


@click.command("collect")
@click.option("--wait", is_flag=True, help="Wait for queued and running jobs first.")
@_PARAMS
def collect_cmd(wait, params_file):
    """Record the finished runs of every open launch in dvc.lock (`dvc commit` of their stages) and report
    failed ones with their run key and log path."""
    from oodcorr.launch import core, records

    params = _load(params_file)
    cfg = core.settings(params)
    root = Path(params["_root"])
    paths = records.open_records(root, cfg)
    if not paths:
        echo("nothing to collect: no open launch")
        return
    if wait:
        for path in paths:
            core.wait(path)
    outcome = core.collect(params, cfg, paths)
    if outcome["failed"] or outcome["stale"]:
        raise SystemExit(1)


from oodcorr.launch.saved import COMMANDS as SAVED  # noqa: E402  save | reanalyze
from oodcorr.launch.verify_cmd import verify_cmd  # noqa: E402  verify

COMMANDS = (launch_cmd, status_cmd, collect_cmd, *SAVED, verify_cmd)
