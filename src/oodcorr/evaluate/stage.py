"""Evaluate stage entry (dvc.yaml `evaluate@<run>`): every checkpoint of a run x every testset -> metrics.jsonl,
predictions, MLflow.

Why it is built this way: a study has tens of checkpoints x ~10 testsets per run, so the base model is
loaded once and LoRA adapters are swapped per checkpoint, each testset is tokenized once, and results are
cached per (checkpoint content, testset content, scoring settings) key, so a rerun (or a new checkpoint or
testset) only scores what is new. Under `accelerate launch` the pending pairs are sharded across
processes; rank 0 assembles the outputs after a barrier.
"""

from __future__ import annotations

import os

import click

from oodcorr.core import io
from oodcorr.core.errors import UserError
from oodcorr.evaluate.cache import cache_key, cache_usable, resolve_settings
from oodcorr.evaluate.checkpoints import list_checkpoints
from oodcorr.evaluate.outputs import write_outputs
from oodcorr.evaluate.scorer import score_pairs
from oodcorr.evaluate.settings import EvaluateSettings
from oodcorr.modeling import distributed
from oodcorr.records.rundir import checkpoints_dir, read_run_json, run_dir
from oodcorr.records.rundir import eval_dir as rundir_eval_dir
from oodcorr.settings.config import load_params
from oodcorr.settings.project import Project
from oodcorr.settings.run_settings import RunSettings


def testset_names(ev: EvaluateSettings, trained: RunSettings, only: list[str] | None = None) -> list[str]:
    names = [trained.id_testset, *(only if only else ev.testsets)]
    return list(dict.fromkeys(str(n) for n in names))


def _silence() -> None:
    """--quiet: no weight-loading bars or MLflow store INFO lines, so stderr holds only errors."""
    import logging

    from transformers.utils import logging as hf_logging

    try:
        import mlflow  # noqa: F401  (mlflow sets its logger levels on import; override them after)
    except ImportError:  # study.tracking: none on a machine without mlflow
        pass

    logging.getLogger("mlflow").setLevel(logging.WARNING)
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def evaluate_run(params: dict, run: str, testsets: list[str] | None = None, quiet: bool = False) -> dict:
    """Every checkpoint of `run` x every testset -> {"scored": [(step, testset)] by this process, "cached", "failed",
    ...}; UserError (after writing the outputs of what worked) when checkpoints failed. One process (launch)
    per run: a second one is refused with one line, before it touches anything."""
    from oodcorr.core import locks

    trained = RunSettings.from_params(params, run)  # same defaults (pattern, verbaliser, max_length, ...)
    project = Project.from_params(params)  # where runs, data and the MLflow store are; study.threads
    ev = EvaluateSettings.from_params(params)  # evaluate's section, checked before anything is touched
    with locks.for_rank0(
        locks.lock_path(project.root, f"evaluate-{run}"), f"run {run} is being evaluated by another process"
    ):
        return _evaluate_run(run, trained, ev, project, testsets, quiet)


def _evaluate_run(
    run: str, trained: RunSettings, ev: EvaluateSettings, project: Project, testsets: list[str] | None, quiet: bool
) -> dict:
    """evaluate_run's work, from the settings it resolved once (no params: every value is in `trained`, `ev` or
    `project`)."""
    from oodcorr.records.prepared import load_prepared, prepared_dir

    if quiet:
        _silence()
    from oodcorr.tracking import store as tracking

    tracking.check_store(project)  # a locked or damaged MLflow store: one line now, nothing touched
    if os.environ.get("RANK", "0") == "0":
        from oodcorr.tracking import mirror

        mirror.sync_pending(project)  # records an earlier stage could not mirror (store was down)
    names = testset_names(ev, trained, testsets)
    pdir = prepared_dir(project)
    rdir = _check_inputs(run, project, names, pdir)
    run_json = read_run_json(rdir)
    settings = resolve_settings(ev, trained)
    checkpoints = list_checkpoints(
        rdir, trained.model, settings["_path"], run_json.get("checkpoint_steps"), run_json.get("finished", True)
    )
    failed = [f"{ck.name} ({ck.error})" for ck in checkpoints if ck.error]
    good = [ck for ck in checkpoints if not ck.error]
    eval_dir = rundir_eval_dir(rdir)
    cache_dir = eval_dir / "cache"
    pairs, pending = _pairs(eval_dir, cache_dir, good, names, pdir, settings)
    rank, world = distributed.init()
    loaded: dict[str, list[dict]] = {}

    def rows_of(name):  # read each testset once, only if some pair needs it
        return loaded[name] if name in loaded else loaded.setdefault(name, load_prepared(pdir, name))

    mine = pending[rank::world]
    if mine:
        from oodcorr.modeling import threads

        threads.apply(project)  # one busy core elsewhere must not stall scoring (bench/speed/threads.py)
    scored, fails = score_pairs(mine, good, rows_of, settings, cache_dir, rank, quiet) if mine else ([], [])
    fails = _gathered(fails, world)
    failed += sorted(set(fails))
    result = {"scored": scored, "cached": len(pairs) - len(pending), "failed": failed, "eval_dir": str(eval_dir)}
    result.update(rank=rank, world_size=world)
    try:
        if rank == 0:
            bad_steps = {f.split(" ", 1)[0] for f in fails}
            done = [
                p for p in pairs if f"checkpoint-{p[0]}" not in bad_steps and (cache_dir / f"{p[2]}.parquet").exists()
            ]
            result.update(write_outputs(project, trained, run_json, done, cache_dir, eval_dir))
    finally:
        _close(world)
    if failed:
        if rank != 0:
            raise SystemExit(2)
        raise UserError(f"run {run}: {len(failed)} checkpoint(s) failed, the rest were evaluated: {'; '.join(failed)}")
    return result


def _check_inputs(run: str, project: Project, names: list[str], pdir):
    """Every testset prepared and the run trained, else one line saying which command makes it -> the run's
    folder."""
    from oodcorr.records.prepared import read_manifest, testset_file

    manifest = read_manifest(pdir)["testsets"]
    missing = [n for n in names if n not in manifest or not testset_file(pdir, n).exists()]
    if missing:
        raise UserError(
            f"testset {', '.join(missing)} was not prepared in {pdir}; run "
            "`dvc repro prepare` (or `oodcorr data prepare`): it prepares every testset in runs and "
            "evaluate.testsets"
        )
    rdir = run_dir(project, run)
    if not checkpoints_dir(rdir).is_dir():
        raise UserError(
            f"run {run}: no checkpoints under {checkpoints_dir(rdir)}; run `oodcorr train --run {run}` first"
        )
    return rdir


def _pairs(eval_dir, cache_dir, good, names: list[str], pdir, settings: dict) -> tuple[list, list]:
    """(every (step, testset, cache key) pair, those not cached yet); the output folders checked and a killed
    evaluate's temps cleared first."""
    from oodcorr.records.prepared import testset_file

    for folder in (eval_dir, cache_dir):
        if folder.exists() and not folder.is_dir():
            raise UserError(
                f"{folder}: is a file; evaluate keeps its outputs in this folder: move the file away and rerun"
            )
    io.clean_stale_temps(eval_dir, cache_dir)  # left by a killed evaluate (only dead processes' temps)
    # the content as it is now (a testset edited after `prepare` must not reuse its old scores)
    sha = {n: io.sha256_file(testset_file(pdir, n)) for n in names}
    pairs = [(ck.step, n, cache_key(ck.sha256, sha[n], settings)) for ck in good for n in names]
    return pairs, [p for p in pairs if not cache_usable(cache_dir / f"{p[2]}.parquet")]


def _close(world: int) -> None:
    """Leave the process group (every rank waits for rank 0's outputs first)."""
    if world > 1:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()


def _gathered(fails: list[str], world: int) -> list[str]:
    """Every process's failures (under `accelerate launch`; also the barrier: every shard's cache files are
    written)."""
    if world == 1:
        return fails
    import torch.distributed as dist

    gathered: list = [None] * world
    dist.all_gather_object(gathered, fails)
    return [f for g in gathered for f in g]


@click.command("evaluate")
@click.option("--run", "run_key", required=True, help="Run key from params.yaml `runs`.")
@click.option("--params", "params_file", type=click.Path(dir_okay=False), default=None, help="params.yaml to use.")
@click.option(
    "--testsets",
    default=None,
    help="Comma-separated testsets (default: evaluate.testsets); the run's ID testset is always included.",
)
@click.option("--quiet", is_flag=True, help="No progress bar or summary.")
def evaluate_cmd(run_key, params_file, testsets, quiet):
    """Score every checkpoint of a run on every testset (cached; shard with `accelerate launch`)."""
    params = load_params(params_file)
    quiet = quiet or EvaluateSettings.from_params(params).quiet
    only = [t.strip() for t in testsets.split(",") if t.strip()] if testsets else None
    res = evaluate_run(params, run_key, only, quiet)
    if not quiet:
        who = f" [rank {res['rank']}/{res['world_size']}]" if res["world_size"] > 1 else ""
        where = f" -> {res['metrics']}" if "metrics" in res else ""
        click.echo(f"{run_key}{who}: scored {len(res['scored'])} pair(s), {res['cached']} cached{where}")
