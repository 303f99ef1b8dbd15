"""`oodcorr ui` (the project's MLflow store in the MLflow UI on 127.0.0.1) and `oodcorr sync` (local
tracking records replayed into MLflow): the user-facing side of oodcorr.tracking.store and oodcorr.tracking.mirror."""

from __future__ import annotations

import sys

import click

from oodcorr.errors import UserError
from oodcorr.settings.config import load_params


@click.command("ui")
@click.option("--port", default=5000, show_default=True, type=int, help="Port on 127.0.0.1.")
@click.option("--params", "params_file", default=None, type=click.Path(dir_okay=False),
              help="params.yaml (default: the project's).")
def ui_cmd(port, params_file):
    """Serve the project's MLflow store in the MLflow UI on 127.0.0.1 only, and print direct links to the
    study's runs table and chart view once the server answers."""
    from oodcorr.credentials import mask_secrets
    from oodcorr.tracking import store as tracking
    from oodcorr.tracking.ui_server import serve, server_env

    params = load_params(params_file)
    if not 1 <= port <= 65535:
        raise UserError(f"--port {port}: must be in 1..65535")
    uri = tracking.tracking_uri(params)
    if tracking.is_server(uri):
        shown = mask_secrets(uri).replace("***@", "").split("?")[0]
        raise UserError(f"{tracking.uri_source(params)}: {shown} is an MLflow tracking server, which serves its own "
                        "UI: open that address in a browser (`oodcorr ui` serves a local store)")
    cmd = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", uri, "--host", "127.0.0.1",
           "--port", str(port), "--workers", "1"]  # one worker: a local viewer, starts faster
    if uri.startswith("sqlite:"):
        cmd += ["--default-artifact-root", tracking.artifact_root(params)]
    import socket

    with socket.socket() as s:  # fail with one line now, not after mlflow has started and died
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            raise UserError(f"--port {port}: cannot listen on 127.0.0.1:{port} ({e.strerror or e}); "
                            "pick another port") from None
    db = tracking.sqlite_file(uri)
    if db is not None and not db.exists():
        tracking.ensure_store(uri)  # built crash-safely here, not half-migrated by a killed UI
    base = f"http://127.0.0.1:{port}"
    click.echo(mask_secrets(f"starting the MLflow UI for {uri} on {base}; the links follow once it answers"),
               err=True)
    from oodcorr.tracking.ui_links import experiment_id, links

    name = tracking.experiment_name(params)
    exp = experiment_id(uri, name)

    def ready(seconds: float) -> None:
        click.echo(f"MLflow UI ready after {seconds:.0f} s on {base} (Ctrl-C to stop)", err=True)
        if exp is None:
            click.echo(f"  no experiment {name} in the store yet: run `dvc repro` (or `oodcorr sync` after "
                       "`dvc pull`)", err=True)
        for view, url in (links(base, exp) if exp else {}).items():
            click.echo(f"  {name} {view}: {url}", err=True)

    serve(cmd, base, server_env(), ready)


@click.command("sync")
@click.option("--run", "runs", multiple=True, help="Run key(s) to replay (default: every run with records).")
@click.option("--params", "params_file", type=click.Path(dir_okay=False), default=None,
              help="params.yaml (default: the project's).")
def sync_cmd(runs, params_file):
    """Replay the local tracking records (runs/<run>/tracking) into MLflow: no duplicate runs or steps. A run
    without records (a clone after `dvc pull`) gets them rebuilt from its outputs first, and the analysis run
    from the results folder. A local store gets sqlite's full integrity check first."""
    from oodcorr.credentials import mask_secrets
    from oodcorr.tracking.mirror import TRACK_DIR, record_dir, sync
    from oodcorr.tracking.store import check_store, enabled, tracking_uri

    params = load_params(params_file)
    check_store(params, full=True)  # a damaged store: one line naming it before anything is written
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
        click.echo(mask_secrets(f"error: {len(failed)} run(s) not synced ({tracking_uri(params)} unreachable)"),
                   err=True)
        sys.exit(1)
    analysis = None
    if not runs and enabled(params):  # the whole study: its analysis run too (a clone after `dvc pull` has
        from oodcorr.tracking.analysis_run import sync_analysis  # results/ but not the run)

        analysis = sync_analysis(params)
        if analysis:
            click.echo(f"analysis: mlflow run {analysis}")
    if not res and not analysis:
        click.echo("nothing to sync (no runs/<run>/tracking records, no results/summary.json)")
