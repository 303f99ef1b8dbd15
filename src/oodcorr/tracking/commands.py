"""`oodcorr ui` (the project's MLflow store in the MLflow UI on 127.0.0.1) and `oodcorr sync` (local
tracking records replayed into MLflow): the user-facing side of oodcorr.tracking.store and oodcorr.tracking.mirror."""

from __future__ import annotations

import os
import sys

import click

from oodcorr.core.errors import UserError
from oodcorr.settings.config import load_params


def tracking_off(params: dict) -> UserError:
    """The error for a command that needs MLflow on a study with `study.tracking: none`."""
    from pathlib import Path

    path = Path(params.get("_path") or "params.yaml")
    saved = path.parent.parent.name == "studies"
    what = (
        f"`oodcorr ui --study {path.parent.name}` shows this saved study in MLflow from a store of its own"
        if saved
        else "remove that line (or set it to mlflow) to mirror the runs into MLflow"
    )
    return UserError(f"{path}: study.tracking is none, so this study has no MLflow store; {what}")


def saved_study(params_file) -> str | None:
    """NAME when `params_file` is studies/NAME/params.yaml of a saved study (runs/<run>.dvc beside it)."""
    from pathlib import Path

    if not params_file:
        return None
    path = Path(params_file).resolve()
    saved = path.name == "params.yaml" and path.parent.parent.name == "studies"
    return path.parent.name if saved and any((path.parent / "runs").glob("*.dvc")) else None


def _ui_params(params_file, study_name) -> dict:
    """The params whose store `oodcorr ui` serves: a saved study's own view, or the project's (tracking on, a
    local store: a tracking server serves its own UI)."""
    from oodcorr.core.credentials import mask_secrets
    from oodcorr.tracking import store as tracking

    if study_name and params_file:
        raise UserError("--study and --params: give one (--study NAME shows studies/NAME)")
    saved = saved_study(params_file)
    if saved:  # a saved study's params: its runs are DVC-tracked outputs, shown from a store of their own
        click.echo(f"{params_file}: a saved study; showing it as `oodcorr ui --study {saved}` does", err=True)
        study_name = saved
    if study_name:
        from oodcorr.tracking.saved_view import build

        if os.environ.get("MLFLOW_TRACKING_URI"):
            raise UserError("--study: unset MLFLOW_TRACKING_URI; a saved study is shown from a store of its own")
        params = build(study_name)
    else:
        params = load_params(params_file)
        if not tracking.enabled(params):
            raise tracking_off(params)
    uri = tracking.tracking_uri(params, create=False)
    if tracking.is_server(uri):
        shown = mask_secrets(uri).replace("***@", "").split("?")[0]
        raise UserError(
            f"{tracking.uri_source(params)}: {shown} is an MLflow tracking server, which serves its own "
            "UI: open that address in a browser (`oodcorr ui` serves a local store)"
        )
    return params


def _free_port(port: int) -> None:
    """Fail with one line now (nothing written), not after mlflow has started and died, where 127.0.0.1:port is
    taken: naming the process that holds it."""
    import socket

    from oodcorr.core import holders

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            raise UserError(
                f"--port {port}: cannot listen on 127.0.0.1:{port} ({e.strerror or e})"
                f"{holders.describe(holders.port_holders(port))}; pick another port"
            ) from None


@click.command("ui")
@click.option("--port", default=5000, show_default=True, type=int, help="Port on 127.0.0.1.")
@click.option(
    "--params",
    "params_file",
    default=None,
    type=click.Path(dir_okay=False),
    help="params.yaml (default: the project's).",
)
@click.option(
    "--study",
    "study_name",
    default=None,
    metavar="NAME",
    help="A saved study (studies/NAME): its runs, checkpoint metrics and analysis, in a store of its own "
    "under mlruns/studies/NAME (nothing in studies/ is written).",
)
def ui_cmd(port, params_file, study_name):
    """Serve the project's MLflow store in the MLflow UI on 127.0.0.1 only, and print direct links to the
    study's runs table and chart view once the server answers."""
    from oodcorr.core.credentials import mask_secrets
    from oodcorr.tracking import store as tracking
    from oodcorr.tracking.ui_server import serve, server_env

    if not 1 <= port <= 65535:
        raise UserError(f"--port {port}: must be in 1..65535")
    params = _ui_params(params_file, study_name)
    _free_port(port)
    uri = tracking.tracking_uri(params)  # mlruns/ made here, once the port is known to be free
    # one worker: a local viewer, starts faster
    cmd = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", uri, "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--workers", "1"]
    if uri.startswith("sqlite:"):
        cmd += ["--default-artifact-root", tracking.artifact_root(params)]
    db = tracking.sqlite_file(uri)
    if db is not None and not db.exists():
        tracking.ensure_store(uri)  # built crash-safely here, not half-migrated by a killed UI
    base = f"http://127.0.0.1:{port}"
    click.echo(mask_secrets(f"starting the MLflow UI for {uri} on {base}; the links follow once it answers"), err=True)
    from oodcorr.tracking.ui_links import experiment_id, links, report_url, save_table_view

    name = tracking.experiment_name(params)
    exp = experiment_id(uri, name)
    report = report_url(base, uri, exp) if exp else None
    table_view = save_table_view(uri, exp) if exp else None

    def ready(seconds: float) -> None:  # the links on stdout: what a user copies (progress stays on stderr)
        click.echo(f"MLflow UI ready after {seconds:.0f} s on {base} (Ctrl-C to stop)")
        if exp is None:
            click.echo(f"  no experiment {name} in the store yet: run `dvc repro` (or `oodcorr sync` after `dvc pull`)")
        for view, url in (links(base, exp, table_view) if exp else {}).items():
            click.echo(f"  {name} {view}: {url}")
        if report:
            click.echo(f"  {name} report: {report}")

    serve(cmd, base, server_env(), ready)


@click.command("sync")
@click.option("--run", "runs", multiple=True, help="Run key(s) to replay (default: every run with records).")
@click.option(
    "--params",
    "params_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="params.yaml (default: the project's).",
)
def sync_cmd(runs, params_file):
    """Replay the local tracking records (runs/<run>/tracking) into MLflow: no duplicate runs or steps. A run
    without records (a clone after `dvc pull`) gets them rebuilt from its outputs first, and the analysis run
    from the results folder. A local store gets sqlite's full integrity check first."""
    from oodcorr.core.credentials import mask_secrets
    from oodcorr.tracking.mirror import TRACK_DIR, record_dir, sync
    from oodcorr.tracking.store import check_store, enabled, tracking_uri

    params = load_params(params_file)
    if not enabled(params):  # nothing to send, and nothing to write into the run folders
        raise tracking_off(params)
    check_store(params, full=True)  # a damaged or read-only store: one line naming it before anything is written
    from oodcorr.tracking.run_records import rebuild

    rebuilt = [r for r in (runs or params.get("runs") or {}) if rebuild(params, r)]  # e.g. after `dvc pull`
    if rebuilt:
        click.echo(f"rebuilt the tracking records of {len(rebuilt)} run(s) from their outputs: {', '.join(rebuilt)}")
    if runs:
        missing = [r for r in runs if not record_dir(params, r).is_dir()]
        if missing:
            raise UserError(f"--run {', '.join(missing)}: no tracking records under runs/<run>/{TRACK_DIR}")
    res = sync(params, list(runs) or None)
    failed = [r for r, rid in res.items() if rid is None]
    for run, rid in res.items():
        if rid:
            click.echo(f"{run}: mlflow run {rid}")
    if failed:
        from oodcorr.tracking.mirror import down_reason

        why = down_reason(tracking_uri(params))
        click.echo(
            mask_secrets(
                f"error: {len(failed)} run(s) not synced ({tracking_uri(params)} unreachable"
                + (f": {why[:160]}" if why else "")
                + ")"
            ),
            err=True,
        )
        sys.exit(1)
    analysis = None
    if not runs:  # the whole study: its analysis run too (a clone after `dvc pull` has
        from oodcorr.tracking.analysis_run import sync_analysis  # results/ but not the run)

        try:
            analysis = sync_analysis(params)
        except Exception as e:  # noqa: BLE001 - e.g. a server that times out mid-upload: one line, sync again later
            why = (str(e).strip().splitlines() or [type(e).__name__])[0][:240]
            click.echo(
                mask_secrets(
                    f"error: the analysis run was not synced ({tracking_uri(params)}: {why}); rerun `oodcorr sync`"
                ),
                err=True,
            )
            sys.exit(1)
        if analysis:
            click.echo(f"analysis: mlflow run {analysis}")
    if not res and not analysis:
        click.echo("nothing to sync (no runs/<run>/tracking records, no results/summary.json)")
