"""Saved studies (`oodcorr study save | reanalyze`): a study's analysis inputs kept in the repository, so any
clone re-analyses it without scoring.

    studies/<name>/params.yaml          the study's params, as it ran
    studies/<name>/dvc.lock             the lock of the project it ran in (code, data and params of every stage)
    studies/<name>/runs/<run>.dvc       DVC-tracked: the run's run.json and eval/ (metrics.jsonl, predictions/,
                                        summary.json, accuracy.csv), never its checkpoints; pushed to the
                                        `studies` remote, which lives in the repository (.dvc/studies-remote)
    studies/.dvc/                       studies/ is a DVC subrepo (records/studies_repo.py): every dvc command
                                        on a study runs there, so the project's `dvc status` never lists them
    studies/<name>/results/             the tables the analysis writes from those runs (git; figures and the
                                        report are rebuilt, not committed)

`save` adds finished runs one at a time (a study in progress grows over sessions); `reanalyze` pulls the saved
runs and runs `oodcorr analyze` on them, nothing else: no train or evaluate stage, no model. Stages run through
their CLI, as everywhere in launch/.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import click

from oodcorr.core.errors import UserError
from oodcorr.launch import remote, save_runs, share_guard, verify
from oodcorr.launch.common import echo
from oodcorr.launch.compare import compare
from oodcorr.records import studies_repo, versions
from oodcorr.tracking.saved_view import (  # the saved-study layout and analysis, written once
    STUDIES,
    analyse_saved,
)

REMOTE = studies_repo.IN_GIT  # studies/.dvc/config: url = ../../.dvc/studies-remote (inside the repository)
REMOTE_URL = "studies-remote"  # the folder under the project's .dvc/
# what a saved run keeps: everything the analysis reads (rundir's layout), not the checkpoints
RUN_FILES = ("run.json", "eval/metrics.jsonl", "eval/predictions", "eval/summary.json", "eval/accuracy.csv")
RUNS_GITIGNORE = "# the saved runs' folders: DVC-tracked by runs/<run>.dvc (`dvc pull` brings them)\n/*/\n"
RESULTS_GITIGNORE = (
    "# rebuilt by `oodcorr study reanalyze`; only the tables are committed\n/figures/\n/report.html\n"
    "/.oodcorr-outputs.json\n"
)


def repo_root(start: Path | None = None) -> Path:
    """The DVC repository holding studies/ (the folder with .dvc/, walking up from `start` or the cwd; the studies
    subrepo, a .dvc/ under the project's, is not it)."""
    here = Path(start or os.getcwd()).resolve()
    for d in (here, *here.parents):
        if (d / ".dvc").is_dir() and not (d.name == STUDIES and (d.parent / ".dvc").is_dir()):
            return d
    raise UserError(f"{here}: not inside a DVC repository (no .dvc/ folder above it); run this in the oodcorr clone")


def study_dir(root: Path, name: str) -> Path:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name or ""):
        raise UserError(f"study name {name!r}: use letters, digits, '.', '_' and '-' (it names studies/<name>/)")
    return root / STUDIES / name


def saved_runs(sdir: Path) -> list[str]:
    """Run keys saved in a study (studies/<name>/runs/<run>.dvc), in the order of its params' runs."""
    from oodcorr.settings.yaml_dialect import read_yaml

    have = {p.name[: -len(".dvc")] for p in (sdir / "runs").glob("*.dvc")}
    order = list((read_yaml((sdir / "params.yaml").read_text()) or {}).get("runs") or {})
    return [k for k in order if k in have] + sorted(have - set(order))


def dvc(args: list[str], root: Path, check: bool = True) -> subprocess.CompletedProcess:
    """One dvc command in the saved studies' subrepo (cwd studies/: paths relative to it), waiting for a lock
    another dvc process holds."""
    exe = shutil.which("dvc") or str(Path(sys.executable).with_name("dvc"))
    env = dict(os.environ, DVC_NO_ANALYTICS="1")
    sub = studies_repo.ensure(root)
    res = subprocess.run([exe, "--wait-for-lock", *args], cwd=sub, env=env, capture_output=True, text=True)
    if check and res.returncode != 0:
        raise UserError(share_guard.dvc_failure(args, sub, res))
    return res


def ensure_remote(root: Path, name: str) -> None:
    """Remote `name` usable in the studies subrepo: the project's section copied there (studies_repo.sync); the
    `studies` remote, inside the repository when nothing else is configured, so it travels with every clone
    (like .dvc/demo-remote): for the small bundled studies."""
    studies_repo.sync(root, name, commit=True)
    if name == REMOTE and REMOTE not in remote.remotes(root)[0]:
        dvc(["remote", "add", REMOTE, "../.dvc/" + REMOTE_URL], root)  # given from studies/, stored rebased


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def finished_runs(source: Path, params: dict) -> dict[str, str]:
    """{run: why not} for every run of `source`; '' when its evaluation is finished and recorded: metrics.jsonl
    and predictions present and, where the project has a dvc.lock, the lock's evaluate@<run> names that
    metrics.jsonl (so a half-scored run or one scored under older params is not saved)."""
    lock = source / "dvc.lock"
    stages = verify.read_lock(lock).get("stages") or {} if lock.exists() else None
    out = {}
    for key in params.get("runs") or {}:
        ev = source / "runs" / key / "eval"
        if not (ev / "metrics.jsonl").is_file() or not (ev / "predictions").is_dir():
            out[key] = "not evaluated yet (no eval/metrics.jsonl and predictions/)"
            continue
        if stages is not None:
            rel = f"runs/{key}/eval/metrics.jsonl"
            recorded = [
                o.get("md5") for o in (stages.get(f"evaluate@{key}") or {}).get("outs") or [] if o.get("path") == rel
            ]
            if recorded != [md5(ev / "metrics.jsonl")]:
                out[key] = (
                    f"evaluate@{key} not recorded in {lock} for this metrics.jsonl (still running, or run "
                    f"`dvc repro evaluate@{key}` there)"
                )
                continue
        out[key] = ""
    return out


def track(root: Path, runs: list[Path], push: bool, study: list[Path] = (), name: str = REMOTE) -> list[Path]:
    """`dvc add` each saved run folder, name the study's remote in its .dvc file, and push it there with the
    study's other runs (`study`: their .dvc files; what an interrupted push left out goes too)."""
    import yaml

    from oodcorr.core.io import write_text
    from oodcorr.settings.yaml_dialect import read_yaml

    rel = [studies_repo.rel(root, r) for r in runs]
    (runs[0].parent / ".gitignore").write_text(RUNS_GITIGNORE)  # one static rule: no per-run lines to conflict
    dvc(["add", *rel], root)
    files = [r.with_name(r.name + ".dvc") for r in runs]
    for f in files:
        doc = read_yaml(f.read_text())
        for out in doc.get("outs") or []:
            out["remote"] = name  # `dvc pull` / `dvc push` of this file use the study's remote
        write_text(f, yaml.safe_dump(doc, sort_keys=False))
    if push:
        dvc(["push", "-r", name, *sorted({studies_repo.rel(root, f) for f in (*files, *study)})], root)
    return files


def analyse(sdir: Path, keys: list[str], out: Path) -> None:
    """`oodcorr analyze` on the saved runs, single-threaded, no MLflow: the stage's own command."""
    analyse_saved(sdir, out, [sdir / "runs" / key / "eval" / "metrics.jsonl" for key in keys], sdir)


def rebuild(sdir: Path, keys: list[str], check: bool) -> tuple[list[str], list[str], list[str], list[str]]:
    """Analyse the saved runs into a temporary folder and compare its tables with studies/<name>/results;
    unless `check`, the new outputs then replace results/ (tables, figures, report)."""
    results = sdir / "results"
    with tempfile.TemporaryDirectory(prefix="oodcorr-reanalyze-") as tmp:
        out = Path(tmp) / "results"
        analyse(sdir, keys, out)
        outcome = compare(out, results)
        if not check:
            if results.exists():
                shutil.rmtree(results)
            shutil.copytree(out, results)
            (results / ".gitignore").write_text(RESULTS_GITIGNORE)
    return outcome


REMOTE_OPTION = click.option(
    "--remote",
    "remote_name",
    default=None,
    help="The DVC remote holding the study (default: the one its runs/*.dvc name, else `studies`, else the "
    "project's default remote).",
)


@click.command("save")
@click.argument("name")
@click.option(
    "--from",
    "source",
    type=click.Path(file_okay=False, exists=True),
    default=".",
    show_default=True,
    help="The project the study ran in (its params.yaml, dvc.lock and runs/).",
)
@click.option("--run", "only", multiple=True, help="Run key(s) to save (default: every finished run).")
@click.option("--push/--no-push", default=True, show_default=True, help="Push the saved runs to the study's remote.")
@REMOTE_OPTION
@click.option(
    "--allow-outside",
    is_flag=True,
    help="Push to a remote that is a folder outside the project (refused otherwise, before anything is written).",
)
def save_cmd(name, source, only, push, remote_name, allow_outside):
    """Save a study's finished runs into studies/NAME (their predictions DVC-tracked and pushed to the study's
    remote: --remote, or `studies`), copy its params.yaml and dvc.lock, and rebuild its tables; then commit what
    it lists. Run it again as more runs finish."""
    from oodcorr.settings.config import load_params

    root = repo_root()
    source = Path(source).resolve()
    params = load_params(source / "params.yaml")
    sdir = study_dir(root, name)
    text = (source / "params.yaml").read_text()
    if (sdir / "params.yaml").exists() and (sdir / "params.yaml").read_text() != text:
        raise UserError(
            f"{sdir / 'params.yaml'} differs from {source / 'params.yaml'}: a study's runs share one "
            "params file; save these runs under another name"
        )
    share_guard.refuse_secrets(root)
    share_guard.refuse_conflicts(sdir)
    state = finished_runs(source, params)
    unknown = [k for k in only if k not in state]
    if unknown:
        raise UserError(f"--run {unknown[0]}: not a run of {source / 'params.yaml'}; runs: {', '.join(state)}")
    keys = [k for k in (only or state) if not state[k]]
    for k in only or state:
        if state[k]:
            echo(f"{k}: skipped, {state[k]}", err=True)
    if not keys:
        raise UserError(f"no finished run to save in {source}")
    target = remote.choose(root, sdir, remote_name)
    far = remote.outside(root, target) if push else None
    if far is not None and not allow_outside:
        raise UserError(
            f"the {target} remote is the folder {far}, outside this project: nothing was written there; pass "
            f"--allow-outside to save there, or `--remote NAME` for another remote"
        )
    if far is not None:
        echo(f"pushing to {far} (the {target} remote, outside this project)", err=True)
    undo = share_guard.Rollback(root, sdir)
    try:
        ensure_remote(root, target)
        if push:  # a missing plugin, a server down or refusing the credentials: said before anything is written
            remote.Remote(root, target).listed()
        keys, files, problems = _store(root, sdir, source, keys, text, push, target)
    except BaseException:
        undo.restore()
        raise
    _report(root, sdir, name, source, keys, files, problems, push, target, len(state))


def _store(root, sdir, source, keys, text, push, target):
    """Copy, check, install, `dvc add` and push the runs; check the pointers and the remote."""
    before = saved_runs(sdir) if (sdir / "params.yaml").exists() else []
    lock = save_runs.merged_lock(sdir / "dvc.lock", source / "dvc.lock", keys, before)  # refused before any copy
    runs, md5s = save_runs.stage(source, sdir, keys, RUN_FILES)  # copied and checked, then installed
    (sdir / "params.yaml").write_text(text)
    if lock is not None:
        (sdir / "dvc.lock").write_text(lock)
    files = track(root, runs, False, name=target)
    study = sorted((sdir / "runs").glob("*.dvc"))
    pushed = save_runs.push(root, target, study, dvc) if push else None
    saved = saved_runs(sdir)
    problems = save_runs.check_saved(root, sdir, dict(zip(keys, files)), md5s, saved, push, target, RUN_FILES, pushed)
    return keys, files, problems


def _report(root, sdir, name, source, keys, files, problems, push, target, total) -> None:
    saved = saved_runs(sdir)
    try:
        rebuild(sdir, saved, check=False)
        tables_line = f"tables rebuilt in {(sdir / 'results').relative_to(root)}"
    except UserError as e:  # the runs are saved and pushed all the same; `reanalyze` retries the tables
        tables_line = f"tables NOT rebuilt ({e}); `oodcorr study reanalyze {name}` once that is fixed"
    echo(
        f"saved {len(keys)} run(s) into {sdir.relative_to(root)} ({len(saved)} of {total} saved"
        f"{f', pushed to the {target} remote' if push else ''}); {tables_line}"
        + (
            f"; the study is INCOMPLETE until pushed ({len(problems)} object(s) not in the {target} remote): "
            f"`oodcorr study save {name} --from {source}` again, or `dvc --cd {STUDIES} push -R -r {target} "
            f"{name}/runs`"
            if problems
            else ""
        )
    )
    share_guard.refuse_secrets(root)  # nothing that holds a credential is ever named below
    paths = [sdir / "params.yaml", sdir / "dvc.lock", *files, sdir / "runs" / ".gitignore", sdir / "results"]
    paths += [root / ".dvc" / "config", *studies_repo.files(root)]
    inside = root / ".dvc" / REMOTE_URL
    if target == REMOTE and remote.outside(root, target) is None and inside.exists():
        paths.append(inside)
    echo(
        "commit: git add "
        + " ".join(str(p.relative_to(root)) for p in paths if p.exists())
        + f" && git commit -m 'study {name}: {', '.join(keys)}'"
    )


@click.command("reanalyze")
@click.argument("name")
@click.option(
    "--check",
    is_flag=True,
    help="Compare the rebuilt tables with the committed ones; write nothing (exit 1 when one differs).",
)
@click.option("--pull/--no-pull", default=True, show_default=True, help="`dvc pull` the saved runs first.")
@REMOTE_OPTION
def reanalyze_cmd(name, check, pull, remote_name):
    """Rebuild studies/NAME's tables from its saved predictions: `dvc pull` of its runs (from the study's remote,
    each object checked there first), then the analysis. No train or evaluate stage runs and no model is loaded."""
    root = repo_root()
    sdir = study_dir(root, name)
    if not (sdir / "params.yaml").exists():
        have = sorted(p.parent.name for p in (root / STUDIES).glob("*/params.yaml"))
        raise UserError(f"no study {name!r} in {root / STUDIES}; saved studies: {', '.join(have) or 'none'}")
    keys = saved_runs(sdir)
    if not keys:
        raise UserError(f"study {name!r} has no saved run yet (`oodcorr study save {name} --from DIR`)")
    if (sdir / "results").is_symlink():
        raise UserError(f"{sdir / 'results'} is a symbolic link; the study's tables live in a folder there")
    note = versions.check(sdir / "results" / versions.FILE)  # another major version: refused before any pull
    if note:
        echo(note)
    target = remote.choose(root, sdir, remote_name)
    if pull:  # every object checked on the remote itself (present, content == name, dvc.lock's record) first
        verify.check_study(root, sdir, keys, remote=True, workspace=False, remote_name=target, saved=RUN_FILES)
        dvc(["pull", "-r", target, *[f"{name}/runs/{k}.dvc" for k in keys]], root)
    verify.check_study(
        root, sdir, keys, remote=False, workspace=True, remote_name=target, saved=RUN_FILES, lock=not pull
    )  # the pulled copy: what the analysis reads
    same, rounded, differ, missing = rebuild(sdir, keys, check)
    where = (sdir / "results").relative_to(root)
    echo(
        f"study {name}: {len(keys)} run(s) analysed; {len(same)} table(s) identical to {where}"
        + (
            f", {len(rounded)} equal to {where}'s within the tolerances of this machine's numerical libraries "
            f"(docs/studies.md): {', '.join(rounded)}"
            if rounded
            else ""
        )
        + (f", {len(differ)} differ: {', '.join(differ)}" if differ else "")
        + (f", {len(missing)} on one side only: {', '.join(missing)}" if missing else "")
        + ("" if check else f"; {where} rewritten")
    )
    if check and (differ or missing):
        raise SystemExit(1)


COMMANDS = (save_cmd, reanalyze_cmd)
