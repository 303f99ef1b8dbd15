"""Train stage entry (dvc.yaml `train@<run>`): pattern-based few-shot (Q)LoRA fine-tuning of a causal LM,
with checkpoints on a schedule (step 0 = the untouched base), resumable after a kill (bit-identical on
CPU), tracked in one MLflow run.

Layout: runs/<run>/run.json and runs/<run>/checkpoints/checkpoint-<step>/ (see oodcorr.records.rundir).
"""

from __future__ import annotations

import json
import os
import shutil

import click

from oodcorr.records import rundir
from oodcorr.records.rundir import checkpoint_dirs, read_run_json
from oodcorr.settings.project import Project
from oodcorr.settings.run_settings import RunSettings
from oodcorr.train.checkpoints import has_state, missing_checkpoints, put_away_state, resume_dir, resume_point
from oodcorr.train.loop import train_loop
from oodcorr.train.mlflow_log import finish_record, run_identity, start_record
from oodcorr.train.model import preflight, prepare_model
from oodcorr.train.plan import checkpoint_schedule, examples_digest, plan_steps, sample_shots

NOT_IDENTITY = ("quiet", "gradient_checkpointing")  # keys that do not change the result: editing them does
# not restart a run


def identity(config: dict | None) -> dict | None:
    """What of a run's recorded config (run.json `config`, RunSettings.as_dict) makes it the same run."""
    return None if config is None else {k: v for k, v in config.items() if k not in NOT_IDENTITY}


def load_pool(project: Project, name: str) -> list[dict]:
    from oodcorr.records.prepared import load_prepared, prepared_dir

    return load_prepared(prepared_dir(project), name)


def portable_info(info: dict, run: RunSettings) -> dict:
    """The model as run.json records it: alias / hub id and content hash, never this machine's folder."""
    return {**{k: v for k, v in info.items() if k != "path"}, "path": run.model}


def train_run(params: dict, run_key: str, quiet: bool | None = None) -> dict:
    """Train (or resume, or skip when finished) one run; returns its run.json content (plus the MLflow run id,
    which is kept out of run.json: it differs per machine and run.json is DVC-tracked). One process per run:
    a second one is refused with one line, before it touches anything."""
    from oodcorr.core import locks
    from oodcorr.train.mlflow_log import run_label

    run = RunSettings.from_params(params, run_key)  # every value check (e.g. lr NaN) before anything is touched
    project = Project.from_params(params)  # where runs, data and the MLflow store are; study.threads
    label = run_label(params, run_key, run.as_dict())  # the MLflow run's name and tags, beside the study's others
    with locks.for_rank0(
        locks.lock_path(project.root, f"train-{run_key}"), f"run {run_key} is being trained by another process"
    ):
        return _train_run(run_key, run, project, quiet, label)


def _missing(ckpt_dir, previous: dict) -> tuple[list, int | None, dict]:
    """The same run again: every checkpoint run.json lists (up to where training got) must be there, else those
    missing are rebuilt. Returns them, the step to stop at (a finished run keeps its later checkpoints: training
    stops at the last missing one) and the previous record (not finished where one is missing)."""
    have = checkpoint_dirs(ckpt_dir)
    upto = (
        previous["total_steps"]
        if previous.get("finished")
        else max((s for s, d in have.items() if has_state(d)), default=-1)
    )
    missing = missing_checkpoints(ckpt_dir, previous.get("checkpoint_steps"), upto) if upto >= 0 else []
    if not missing:
        return [], None, previous
    return missing, missing[-1] if previous.get("finished") else None, dict(previous, finished=False)


def _nothing_to_do(run_key: str, run: RunSettings, project: Project, previous: dict) -> dict:
    """A finished run with every checkpoint: finish what the end of training does (a kill right after run.json
    said finished; idempotent) and return its record."""
    from oodcorr.core import io
    from oodcorr.tracking import mirror

    click.echo(f"train {run_key}: finished ({previous['total_steps']} steps); nothing to do", err=True)
    run_dir = rundir.run_dir(project, run_key)
    put_away_state(rundir.checkpoints_dir(run_dir), previous["total_steps"], run)
    recs = io.read_jsonl_tolerant(mirror.record_dir(project, run_key) / "train.jsonl")
    if recs and not any(r.get("type") == "status" for r in recs):
        finish_record(project, run_key, io.sha256_file(run_dir / "run.json"))
    return {**previous, "mlflow_run_id": mirror.mlflow_run_id(project, run_key)}


def _say_rebuilding(run_key: str, run: RunSettings, ckpt_dir, previous: dict, missing: list, to: int) -> None:
    start = resume_point(ckpt_dir, previous["checkpoint_steps"], missing, run)
    click.echo(
        f"train {run_key}: {', '.join(f'checkpoint-{m}' for m in missing)} missing or incomplete "
        f"(run.json lists it); training again from "
        f"{f'checkpoint-{start}' if start >= 0 else 'step 0 (no earlier training state kept)'} "
        f"to step {to} to rebuild it",
        err=True,
    )


def _start(run_key: str, run: RunSettings, project: Project, info: dict, examples, plan: tuple, label) -> dict:
    """The run's MLflow record started and its run.json written (not finished yet); returns that record."""
    from oodcorr.core.io import write_json
    from oodcorr.modeling import threads

    schedule, total, n_threads = plan
    config = run.as_dict()  # as run.json records it
    digest = examples_digest(examples)
    tracking_identity = run_identity(identity(config), digest)
    start_record(project, run, info, tracking_identity, *label)
    record = {
        "run": run_key,
        "config": config,
        "model_info": portable_info(info, run),
        "tracking_identity": tracking_identity,  # lets a clone rebuild the MLflow run (oodcorr sync)
        "example_ids": [e["id"] for e in examples],
        "examples_sha256": digest,
        "checkpoint_steps": schedule,
        "total_steps": total,
        "finished": False,
    }  # the thread count is machine-local (threads.keep): run.json is a DVC output, the same on every machine
    write_json(rundir.run_dir(project, run_key) / "run.json", record)
    threads.keep(rundir.run_dir(project, run_key), n_threads)
    return record


def _finish(run_key: str, run: RunSettings, project: Project, record: dict, last: int) -> dict:
    """run.json says finished, the training state is put away (no resume from the newest) and the MLflow run
    finished; returns the record with its MLflow run id."""
    from oodcorr.core import io
    from oodcorr.core.io import write_json

    run_dir = rundir.run_dir(project, run_key)
    record["finished"] = True
    write_json(run_dir / "run.json", record)
    put_away_state(rundir.checkpoints_dir(run_dir), last, run)
    run_id = finish_record(project, run_key, io.sha256_file(run_dir / "run.json"))
    return {**record, "mlflow_run_id": run_id}


def _same_run(previous: dict | None, config: dict, digest: str) -> bool:
    """The run in run.json is this one: the same settings and the same examples (re-prepared data with other rows
    -> a fresh run)."""
    same_config = previous is not None and identity(previous.get("config")) == identity(config)
    return same_config and previous.get("examples_sha256") == digest


def _train_run(run_key: str, run: RunSettings, project: Project, quiet: bool | None, label: tuple) -> dict:
    """train_run's work, from the settings it resolved once (no params: every value is in `run` or `project`)."""
    from oodcorr.core import io
    from oodcorr.modeling import distributed
    from oodcorr.modeling.prompts import check_pattern
    from oodcorr.tracking import mirror

    config = run.as_dict()  # as run.json records it
    from oodcorr.modeling import threads

    threads.resolve(project)  # a bad OODCORR_THREADS / study.threads fails here, before any work
    quiet = run.quiet if quiet is None else quiet
    run_dir = rundir.run_dir(project, run_key)
    ckpt_dir = rundir.checkpoints_dir(run_dir)
    previous = read_run_json(run_dir) or None
    check_pattern(run.pattern)
    examples = sample_shots(load_pool(project, run.train_set), run.shots, run.sampling, run.data_seed)
    digest = examples_digest(examples)
    same = _same_run(previous, config, digest)
    from oodcorr.tracking import store as tracking

    tracking.check_store(project)  # a locked or damaged MLflow store: one line now, nothing touched
    if os.environ.get("RANK", "0") == "0":
        mirror.sync_pending(project)  # records an earlier stage could not mirror (store was down)
    missing, stop_at, previous = _missing(ckpt_dir, previous) if same else ([], None, previous)
    if same and previous.get("finished") and previous["total_steps"] in checkpoint_dirs(ckpt_dir):
        return _nothing_to_do(run_key, run, project, previous)

    # Everything a user can get wrong is checked before anything is written.
    preflight(run)
    if quiet:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    rank, world = distributed.init()  # >1 under `accelerate launch`: data parallel, rank 0 writes
    # one busy core elsewhere must not stall every step (bench/speed/threads.py); a resumed run keeps its count
    n_threads = threads.apply(project, threads.kept(run_dir) or (previous or {}).get("threads") if same else None)
    model, tok, prompter, info = prepare_model(run, device=distributed.device_for_rank())
    plan = plan_steps(len(examples), run.batch_size, run.grad_accum, run.epochs, run.max_steps, run.seed)
    total = len(plan)
    schedule = checkpoint_schedule(total, run.checkpoints.every, run.checkpoints.log_spaced)

    record = None
    if rank == 0:
        if not same:
            for old in (ckpt_dir, resume_dir(ckpt_dir)):
                if old.exists():
                    shutil.rmtree(old)
        if missing:
            _say_rebuilding(run_key, run, ckpt_dir, previous, missing, stop_at if stop_at is not None else total)
        io.clean_stale_temps(ckpt_dir, run_dir)  # a kill during a checkpoint / run.json write leaves these
        record = _start(run_key, run, project, info, examples, (schedule, total, n_threads), label)
    distributed.barrier()
    args = (examples, plan, schedule, ckpt_dir, project, quiet or rank > 0, rank, world, stop_at)
    train_loop(model, tok, prompter, info, run, *args)
    distributed.barrier()
    if rank > 0:
        return json.loads((run_dir / "run.json").read_text())
    return _finish(run_key, run, project, record, total if stop_at is None else stop_at)


@click.command("train")
@click.option("--run", "run_key", required=True, help="Run key under `runs:` in params.yaml.")
@click.option(
    "--params",
    "params_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="params.yaml (default: the project's).",
)
@click.option("--dry-run", is_flag=True, help="Print sizes, steps and a memory estimate; write nothing.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def train_cmd(run_key, params_file, dry_run, quiet):
    """Few-shot (Q)LoRA training of one run; resumes after a kill, no-op when finished."""
    from oodcorr.settings.config import load_params

    params = load_params(params_file)
    if dry_run:
        from oodcorr.train.sizing import dry_run_info, print_dry_run

        print_dry_run(dry_run_info(RunSettings.from_params(params, run_key)))
        return
    record = train_run(params, run_key, quiet=True if quiet else None)
    where = (
        f"mlflow run {record['mlflow_run_id']}"
        if record.get("mlflow_run_id")
        else "mlflow pending (`oodcorr sync` once the store is reachable)"
    )
    click.echo(
        f"train {run_key}: {record['total_steps']} steps, checkpoints {record['checkpoint_steps']}, {where}", err=True
    )
