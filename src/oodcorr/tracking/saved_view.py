"""A saved study (studies/<name>: its params, DVC-tracked run folders, committed tables) in the MLflow UI, built
without writing into the study: `oodcorr ui --study NAME`.

The study's runs are pulled from the studies remote when their folders are missing (`dvc pull`, as `oodcorr
study reanalyze` does). A view folder, mlruns/studies/<name>/ (git-ignored, outside every DVC output), holds a
store of its own (mlflow.db and artifacts/) and a project that points at the saved runs:

    mlruns/studies/<name>/project/runs/<run>/run.json -> studies/<name>/runs/<run>/run.json   (links)
    mlruns/studies/<name>/project/runs/<run>/eval     -> studies/<name>/runs/<run>/eval
    mlruns/studies/<name>/project/runs/<run>/tracking/   the run's records, rebuilt from those outputs
    mlruns/studies/<name>/project/results/               the analysis of the saved runs (report included)

so each run gets its params and checkpoint metrics (the saved runs keep no checkpoints: no train/loss), and
the analysis run its report. Building it again reuses what is there (the analysis is rerun only when the runs
or params changed); deleting mlruns/studies/<name> loses nothing."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import click

from oodcorr.core.errors import UserError
from oodcorr.records import studies_repo

STUDIES = studies_repo.STUDIES
VIEWS = Path("mlruns") / "studies"  # under the project's mlruns/: ignored by git, tracked by nothing
LINKED = ("run.json", "eval")  # what the records and the analysis read from a saved run
# the analysis runs single-threaded, so its numbers do not depend on the machine's load or core count
ONE_THREAD = {k: "1" for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OODCORR_THREADS")}


def repo_root(start: Path | None = None) -> Path:
    here = Path(start or os.getcwd()).resolve()
    for d in (here, *here.parents):
        if (d / ".dvc").is_dir() and (d / STUDIES).is_dir():
            return d
    raise UserError(f"{here}: no oodcorr clone above it (a folder with .dvc/ and studies/); run this in the clone")


def saved_runs(sdir: Path, params: dict) -> list[str]:
    have = {p.name[: -len(".dvc")] for p in (sdir / "runs").glob("*.dvc")}
    order = list(params.get("runs") or {})
    return [k for k in order if k in have] + sorted(have - set(order))


def _complete(run: Path) -> bool:
    return (run / "run.json").is_file() and (run / "eval" / "metrics.jsonl").is_file()


def pull(root: Path, name: str, keys: list[str]) -> None:
    """`dvc pull` the saved runs whose folders are missing or incomplete, from the studies remote."""
    sdir = root / STUDIES / name
    missing = [k for k in keys if not _complete(sdir / "runs" / k)]
    if not missing:
        return
    click.echo(f"pulling {len(missing)} saved run(s) of study {name} from the studies remote", err=True)
    exe = shutil.which("dvc") or str(Path(sys.executable).with_name("dvc"))
    targets = [f"{name}/runs/{k}.dvc" for k in missing]  # in the studies subrepo (records/studies_repo.py)
    for remote in _pointer_remotes([sdir / "runs" / f"{k}.dvc" for k in missing]):
        studies_repo.sync(root, remote)  # a remote the project configures, usable there
    res = subprocess.run(
        [exe, "pull", "-q", *targets],
        cwd=studies_repo.path(root),
        capture_output=True,
        text=True,
        env=dict(os.environ, DVC_NO_ANALYTICS="1"),
    )
    still = [k for k in missing if not _complete(sdir / "runs" / k)]
    if res.returncode != 0 or still:
        last = (res.stderr.strip() or res.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise UserError(
            f"study {name}: {len(still) or len(missing)} saved run(s) could not be pulled "
            f"(`dvc --cd {STUDIES} pull {' '.join(targets[:2])}{' ...' if len(targets) > 2 else ''}`: {last[0]})"
        )


def _pointer_remotes(dvc_files: list[Path]) -> set[str]:
    """The remotes the `remote:` fields of these .dvc files name."""
    from oodcorr.settings.yaml_dialect import read_yaml

    names = set()
    for f in dvc_files:
        try:
            outs = (read_yaml(f.read_text()) or {}).get("outs") or []
        except Exception:  # noqa: BLE001 - a damaged pointer: `dvc pull` names it
            continue
        names |= {str(o["remote"]) for o in outs if isinstance(o, dict) and o.get("remote")}
    return names


def _link_runs(sdir: Path, project: Path, keys: list[str]) -> None:
    for key in keys:
        run = project / "runs" / key
        run.mkdir(parents=True, exist_ok=True)
        for rel in LINKED:
            link, target = run / rel, (sdir / "runs" / key / rel).resolve()
            if link.is_symlink() and link.resolve() == target:
                continue
            if link.is_symlink() or link.is_file():
                link.unlink()
            elif link.exists():
                shutil.rmtree(link)
            link.symlink_to(target, target_is_directory=target.is_dir())


def _inputs(sdir: Path, keys: list[str]) -> str:
    h = hashlib.sha256((sdir / "params.yaml").read_bytes())
    for key in keys:
        h.update(key.encode() + (sdir / "runs" / key / "eval" / "metrics.jsonl").read_bytes())
    return h.hexdigest()[:16]


def analyse(sdir: Path, project: Path, keys: list[str]) -> bool:
    """The saved runs' analysis into the view (report included; `oodcorr analyze --no-mlflow`, one thread, as
    `oodcorr study reanalyze` runs it); reused while the runs and params are unchanged. True when it ran."""
    out, stamp = project / "results", project / ".results-inputs"
    key = _inputs(sdir, keys)
    if (out / "report.html").is_file() and stamp.is_file() and stamp.read_text() == key:
        return False
    click.echo(f"analysing the {len(keys)} saved run(s) for the view (about a minute)", err=True)
    analyse_saved(sdir, out, [project / "runs" / k / "eval" / "metrics.jsonl" for k in keys], project)
    stamp.write_text(key)
    return True


def build(name: str, root: Path | None = None) -> dict:
    """Build (or bring up to date) the MLflow view of studies/<name>; returns the params of the view's project
    (its store: mlruns/studies/<name>/mlflow.db), for `oodcorr ui` to serve."""
    from oodcorr.settings.config import load_params
    from oodcorr.tracking import mirror
    from oodcorr.tracking.analysis_run import sync_analysis
    from oodcorr.tracking.run_records import rebuild

    root = root or repo_root()
    sdir = root / STUDIES / name
    if not (sdir / "params.yaml").is_file():
        have = sorted(p.parent.name for p in (root / STUDIES).glob("*/params.yaml"))
        raise UserError(
            f"--study {name}: no study {name!r} in {root / STUDIES}; saved studies: {', '.join(have) or 'none'}"
        )
    params = load_params(sdir / "params.yaml")
    keys = saved_runs(sdir, params)
    if not keys:
        raise UserError(f"--study {name}: studies/{name} has no saved run (no runs/<run>.dvc)")
    pull(root, name, keys)
    view = root / VIEWS / name
    project = view / "project"
    _link_runs(sdir, project, keys)
    fresh = analyse(sdir, project, keys)
    study = dict(params.get("study") or {}, tracking="mlflow", tracking_uri=f"sqlite:///{view / 'mlflow.db'}")
    params = {
        **params,
        "study": study,
        "_root": str(project),
        "runs": {k: params["runs"][k] for k in keys if k in (params.get("runs") or {})},
    }
    params["analyze"] = {**(params.get("analyze") or {}), "out": "results"}
    rebuilt = [k for k in keys if rebuild(params, k, saved_at(root, sdir / "runs" / f"{k}.dvc"))]
    if rebuilt:
        click.echo(f"rebuilt the MLflow records of {len(rebuilt)} saved run(s) in {view.relative_to(root)}", err=True)
    failed = [k for k, rid in mirror.sync(params, keys).items() if rid is None]
    if failed:
        raise UserError(
            f"{view / 'mlflow.db'}: {len(failed)} run(s) could not be written "
            f"({mirror.down_reason(mirror.tracking.tracking_uri(params)) or 'unknown error'})"
        )
    if fresh:  # a new analysis (new code or inputs) replaces the view's older one
        _drop_analyses(params)
    sync_analysis(params)
    return params


def saved_at(root: Path, dvc_file: Path) -> int | None:
    """When a saved run was saved (ms): its .dvc file's last commit, the time its MLflow run shows (the saved
    outputs keep no training times); None outside git."""
    try:
        res = subprocess.run(
            ["git", "log", "-1", "--format=%ct", "--", str(dvc_file.relative_to(root))],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=30,
        )
        return int(res.stdout.strip()) * 1000 if res.returncode == 0 and res.stdout.strip() else None
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def _drop_analyses(params: dict) -> None:
    from mlflow.tracking import MlflowClient

    from oodcorr.tracking import store

    client = MlflowClient(store.tracking_uri(params))
    exp = client.get_experiment_by_name(store.experiment_name(params))
    if exp is not None:
        for run in client.search_runs([exp.experiment_id], f"tags.`{store.KIND_TAG}` = '{store.ANALYSIS_KIND}'"):
            client.delete_run(run.info.run_id)


def analyse_saved(sdir: Path, out: Path, metrics_files, cwd: Path) -> None:
    """`oodcorr analyze` of a saved study (studies/NAME: its params.yaml, its runs' metrics files) into `out`, one
    thread, no MLflow run: what `study reanalyze` and `ui --study` both build; a failure is one UserError line."""
    cmd = [sys.executable, "-m", "oodcorr", "analyze", "--params", str(sdir / "params.yaml"), "--out", str(out)]
    cmd += ["--no-mlflow"] + [a for f in metrics_files for a in ("--metrics", str(f))]
    res = subprocess.run(cmd, cwd=cwd, env=dict(os.environ, **ONE_THREAD), capture_output=True, text=True)
    if res.returncode != 0:
        last = (res.stderr.strip() or res.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise UserError(f"the analysis of {sdir} failed: {last[0]}")
