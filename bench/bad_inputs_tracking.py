"""Bad-input cases: the MLflow tracking store (locked, damaged, copied from another project, a URI with
credentials, sync after a preset switch). A new one is one Case in cases()."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path

from bad_inputs_runner import A, BASE, E, T, Case, edit_params, env
from bad_inputs_runs import rm_checkpoint


def _sync_no_duplicates(root, res):
    import sqlite3

    with sqlite3.connect(root / "mlruns" / "mlflow.db") as con:
        rows = con.execute("select e.name, count(*) from runs r join experiments e on r.experiment_id = "
                           "e.experiment_id group by e.name").fetchall()
    got = dict(rows)
    return None if got == {"oodcorr/bench": 1} else f"runs per experiment: {got}"


def _masked(root, res):
    secret = "s3cr3tPW"
    leaks = [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()
             and p.name != "params.yaml"]
    if secret in res.stderr + res.stdout:
        return "secret printed"
    if "***" not in res.stderr:
        return "no masked warning"
    return f"secret written to {leaks}" if leaks else None


def _secret_uri(root):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    edit_params(lambda p: (p["study"].pop("tracking"), p["study"].update(
        tracking_uri=f"http://bob:s3cr3tPW@127.0.0.1:{port}/?token=s3cr3tPW")))(root)
    rm_checkpoint(root)


def _preset_switch(root):
    edit_params(lambda p: (p["study"].pop("tracking"), p["study"].update(name="other")))(root)


STORE: list[Path] = []
_STORE_LOCK = threading.Lock()


def _template_store() -> Path:
    """One MLflow store holding a run, built once (in a subprocess: MLflow's migrations are not thread-safe)
    and copied into each case that needs one."""
    with _STORE_LOCK:
        if not STORE:
            db = BASE[0].parent / "store" / "mlflow.db"
            db.parent.mkdir(exist_ok=True)
            code = (f"import mlflow; from oodcorr.tracking import store as tracking; uri = 'sqlite:///{db}'; tracking.ensure_store(uri); "
                    "c = mlflow.MlflowClient(uri); c.create_run(c.create_experiment('oodcorr/bench'))")
            subprocess.run([sys.executable, "-c", code], env=env(), check=True, capture_output=True)
            STORE.append(db)
    return STORE[0]


def _lock_store(root):
    """A store holding a run (the template's copy); the case holds it under an exclusive lock (wrap="lock")."""
    (root / "mlruns").mkdir(exist_ok=True)
    shutil.copyfile(_template_store(), root / "mlruns" / "mlflow.db")
    edit_params(lambda p: p["study"].pop("tracking"))(root)


def _store(damage: str):
    def mutate(root):
        _lock_store(root)
        db = root / "mlruns" / "mlflow.db"
        data = bytearray(db.read_bytes())
        if damage == "zero":
            data = bytearray(len(data))
        elif damage == "truncate":
            data = data[: len(data) // 3]
        else:
            data[8192: 8192 + 64] = b"\xa5" * 64
        db.write_bytes(bytes(data))
    return mutate


def _copied_store(root):
    """This project's mlruns/ copied from another project (`cp -r`): that project's store, with one run and its
    artifact, was made in <work>/orig. Tracking and the analysis' MLflow run are on."""
    orig = root.parent / "orig"
    code = ("import mlflow, pathlib; from oodcorr.tracking import store as tracking; "
            f"p = {{'_root': {str(orig)!r}, 'study': {{'name': 'bench'}}}}; e = tracking.setup(p); "
            "c = mlflow.MlflowClient(tracking.tracking_uri(p)); r = c.create_run(e).info.run_id; "
            f"f = pathlib.Path({str(orig)!r}) / 'note.txt'; f.write_text('x'); c.log_artifact(r, str(f))")
    subprocess.run([sys.executable, "-c", code], env=env(), check=True, capture_output=True)
    shutil.copytree(orig / "mlruns", root / "mlruns")
    edit_params(lambda p: (p["study"].pop("tracking"), p["analyze"].update(mlflow=True)))(root)


def _artifacts_inside(root, res):
    theirs = [p for p in (root.parent / "orig" / "mlruns" / "artifacts").rglob("*") if p.is_file()]
    if len(theirs) != 1:
        return f"{len(theirs) - 1} file(s) written into the original project's mlruns/artifacts"
    if not list((root / "mlruns" / "artifacts").rglob("summary.json")):
        return "the analysis' artifacts are not in this project's mlruns/artifacts"
    return None


def cases() -> list[Case]:
    return [
        Case("mlflow:store-locked", T, _lock_store, wrap="lock", must=r"mlflow\.db.*locked",
             item="healthy store moved aside while locked", allowed=("mlruns/**",)),
        Case("mlflow:busy-timeout-abc", T, _lock_store, wrap="env:OODCORR_STORE_BUSY_TIMEOUT_S=abc",
             must=r"OODCORR_STORE_BUSY_TIMEOUT_S: expected a number", allowed=("mlruns/**",),
             item="traceback: OODCORR_STORE_BUSY_TIMEOUT_S=abc (ValueError at import)"),
        Case("mlflow:store-zeroed", T, _store("zero"), must=r"mlflow\.db.*damaged", allowed=("mlruns/.*",)),
        Case("mlflow:store-truncated", E, _store("truncate"), must=r"mlflow\.db", allowed=("mlruns/.*",)),
        Case("mlflow:store-page-corrupt", E, _store("page"), must=r"mlflow\.db.*damaged", allowed=("mlruns/.*",)),
        Case("mlflow:secret-uri", T, _secret_uri, expect="ok", check=_masked,
             allowed=("runs/a/checkpoints/**", "runs/a/run.json", "runs/a/tracking/**"), item="credentials leak"),
        Case("mlflow:sync-after-preset-switch", ["sync"], _preset_switch, expect="ok", check=_sync_no_duplicates,
             allowed=("mlruns/**", "runs/*/tracking/**"), item="sync duplicates runs after a preset switch"),
        Case("mlflow:copied-project", A, _copied_store, expect="ok", check=_artifacts_inside,
             allowed=("mlruns/**", "results/**", "runs/*/tracking/**"),
             item="a copied project writes artifacts into the original's mlruns"),
    ]
