"""Bad-input cases: the MLflow tracking store (locked, damaged, damage only sqlite's full check finds, copied
from another project, read-only, sync after a preset switch, the analysis run rebuilt by sync, sync and ui with
study.tracking: none) and tracking URIs with credentials (refused in params.yaml, masked when given by
MLFLOW_TRACKING_URI, `oodcorr ui` pointed at a tracking server). Every planted credential holds SECRET, which
the runner looks for in the output and in every file (secret_leaked). A new case is one Case in cases()."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path

from bad_inputs_runner import BASE, CHECK, SECRET, A, Case, E, T, edit_params, env
from bad_inputs_runs import rm_checkpoint


def _sync_no_duplicates(root, res):
    import sqlite3

    with sqlite3.connect(root / "mlruns" / "mlflow.db") as con:
        rows = con.execute(
            "select e.name, count(*) from runs r join experiments e on r.experiment_id = "
            "e.experiment_id group by e.name"
        ).fetchall()
    got = dict(rows)  # the training run and the analysis run, both in the study they were recorded in
    return None if got == {"oodcorr/bench": 2} else f"runs per experiment: {got}"


def _masked(root, res):
    return None if "***" in res.stderr else "no masked warning"  # the runner checks that SECRET is nowhere


def _uri_in_params(uri: str):
    return edit_params(lambda p: (p["study"].pop("tracking"), p["study"].update(tracking_uri=uri)))


def _uri_in_env(root):
    """Tracking on (the URI comes from MLFLOW_TRACKING_URI, wrap="env:..."), a checkpoint to rebuild: the
    store is down (port 1), so train warns naming the URI."""
    edit_params(lambda p: p["study"].pop("tracking"))(root)
    rm_checkpoint(root)


MUST_VARS = r"study\.tracking_uri.*MLFLOW_TRACKING_PASSWORD.*MLFLOW_TRACKING_TOKEN"


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
            code = (
                f"import mlflow; from oodcorr.tracking import store as tracking; uri = 'sqlite:///{db}'; "
                "tracking.ensure_store(uri); "
                "c = mlflow.MlflowClient(uri); r = c.create_run(c.create_experiment('oodcorr/bench')).info.run_id; "
                "c.log_batch(r, metrics=[mlflow.entities.Metric('loss', float(j), 0, j) for j in range(300)])"
            )
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
        elif damage == "index":
            _index_damage(db)
            return
        else:
            data[8192 : 8192 + 64] = b"\xa5" * 64
        db.write_bytes(bytes(data))

    return mutate


def _index_damage(db: Path) -> None:
    """50 bytes over a page near the store's end that sqlite's page check (quick_check) passes and its full
    check (integrity_check) does not: rows missing from an index."""
    import sqlite3

    good = db.read_bytes()
    for offset in range(len(good) - 50, max(0, len(good) - 16 * 4096), -50):
        db.write_bytes(good[:offset] + b"\xa5" * 50 + good[offset + 50 :])
        with sqlite3.connect(db) as con:
            try:
                if [
                    con.execute(f"pragma {c}(1)").fetchone()[0] == "ok" for c in ("quick_check", "integrity_check")
                ] == [True, False]:
                    return
            except sqlite3.DatabaseError:
                continue
    raise RuntimeError(f"{db}: no damage found that only the full check sees")


def _analysis_logged(root, res):
    import sqlite3

    with sqlite3.connect(root / "mlruns" / "mlflow.db") as con:
        kinds = [r[0] for r in con.execute("select value from tags where key = 'oodcorr.kind'")]
    return None if kinds.count("analysis") == 1 and kinds.count("train") == 1 else f"runs by kind: {kinds}"


def _copied_store(root):
    """This project's mlruns/ copied from another project (`cp -r`): that project's store, with one run and its
    artifact, was made in <work>/orig. Tracking and the analysis' MLflow run are on."""
    orig = root.parent / "orig"
    code = (
        "import mlflow, pathlib; from oodcorr.tracking import store as tracking; "
        f"p = {{'_root': {str(orig)!r}, 'study': {{'name': 'bench'}}}}; e = tracking.setup(p); "
        "c = mlflow.MlflowClient(tracking.tracking_uri(p)); r = c.create_run(e).info.run_id; "
        f"f = pathlib.Path({str(orig)!r}) / 'note.txt'; f.write_text('x'); c.log_artifact(r, str(f))"
    )
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
        Case(
            "mlflow:store-locked",
            T,
            _lock_store,
            wrap="lock",
            must=r"mlflow\.db.*locked",
            item="healthy store moved aside while locked",
            allowed=("mlruns/**",),
        ),
        Case(
            "mlflow:busy-timeout-abc",
            T,
            _lock_store,
            wrap="env:OODCORR_STORE_BUSY_TIMEOUT_S=abc",
            must=r"OODCORR_STORE_BUSY_TIMEOUT_S: expected a number",
            allowed=("mlruns/**",),
            item="traceback: OODCORR_STORE_BUSY_TIMEOUT_S=abc (ValueError at import)",
        ),
        Case("mlflow:store-zeroed", T, _store("zero"), must=r"mlflow\.db.*damaged", allowed=("mlruns/.*",)),
        Case("mlflow:store-truncated", E, _store("truncate"), must=r"mlflow\.db", allowed=("mlruns/.*",)),
        Case("mlflow:store-page-corrupt", E, _store("page"), must=r"mlflow\.db.*damaged", allowed=("mlruns/.*",)),
        Case(
            "mlflow:store-index-damage",
            A,
            lambda r: (_store("index")(r), edit_params(lambda p: p["analyze"].update(mlflow=True))(r)),
            must=r"mlflow\.db.*damaged.*oodcorr sync",
            allowed=("mlruns/.*",),
            item="damage only integrity_check finds: analyze exits 0",
            fast=True,
        ),
        Case(
            "mlflow:store-index-damage-sync",
            ["sync"],
            _store("index"),
            must=r"mlflow\.db.*damaged",
            allowed=("mlruns/.*",),
        ),
        # credentials: never in params.yaml (dvc.lock, run cache), masked whole when MLFLOW_TRACKING_URI has them
        Case(
            "mlflow:secret-in-params",
            T,
            _uri_in_params(f"http://bob:{SECRET}@PW@127.0.0.1:1/"),
            must=MUST_VARS,
            item="a password in study.tracking_uri is stored in dvc.lock",
            fast=True,
        ),
        Case(
            "mlflow:token-user-in-params", CHECK, _uri_in_params(f"http://{SECRET}TOKEN@127.0.0.1:1/"), must=MUST_VARS
        ),
        Case(
            "mlflow:token-query-in-params",
            CHECK,
            _uri_in_params(f"https://127.0.0.1:1/?token={SECRET}"),
            must=MUST_VARS,
        ),
        Case(
            "mlflow:secret-uri-env",
            T,
            _uri_in_env,
            expect="ok",
            check=_masked,
            wrap=f"env:MLFLOW_TRACKING_URI=http://bob:{SECRET}@PW@127.0.0.1:1/?token={SECRET}",
            allowed=("runs/a/**",),
            item="a password holding @ leaks its tail",
            fast=True,
        ),
        Case(
            "mlflow:token-user-env",
            T,
            _uri_in_env,
            expect="ok",
            check=_masked,
            wrap=f"env:MLFLOW_TRACKING_URI=http://{SECRET}TOKEN@127.0.0.1:1/",
            allowed=("runs/a/**",),
            item="a token given as the user name is not masked",
        ),
        Case(
            "mlflow:ui-tracking-server",
            ["ui", "--port", "5999"],
            edit_params(lambda p: p["study"].pop("tracking")),  # a study that tracks (the base says none)
            wrap=f"env:MLFLOW_TRACKING_URI=http://{SECRET}TOKEN@127.0.0.1:1/",
            must=r"MLFLOW_TRACKING_URI.*tracking server",
            item="traceback: oodcorr ui with an http tracking URI",
            fast=True,
        ),
        Case(
            "mlflow:sync-rebuilds-analysis",
            ["sync"],
            edit_params(lambda p: p["study"].pop("tracking")),
            expect="ok",
            check=_analysis_logged,
            allowed=("mlruns/**", "runs/*/tracking/**"),
            item="sync does not rebuild the analysis run",
            fast=True,
        ),
        Case(
            "mlflow:sync-after-preset-switch",
            ["sync"],
            _preset_switch,
            expect="ok",
            check=_sync_no_duplicates,
            allowed=("mlruns/**", "runs/*/tracking/**"),
            item="sync duplicates runs after a preset switch",
        ),
        # a read-only store: named read-only with what to do, never "unreachable"; study.tracking: none: said so
        Case(
            "mlflow:store-read-only-sync",
            ["sync"],
            _lock_store,
            wrap="readonly:mlruns",
            must=r"mlflow\.db: the MLflow store is read-only",
            item="a read-only store is reported unreachable",
            fast=True,
        ),
        Case(
            "mlflow:store-read-only-analyze",
            A,
            lambda r: (_lock_store(r), edit_params(lambda p: p["analyze"].update(mlflow=True))(r)),
            wrap="readonly:mlruns",
            must=r"mlflow\.db: the MLflow store is read-only",
            item="analyze exits 0 on a read-only store",
        ),
        Case(
            "mlflow:sync-tracking-none",
            ["sync"],
            must=r"study\.tracking is none",
            item="sync with study.tracking: none reports the missing store as unreachable",
        ),
        Case(
            "mlflow:ui-tracking-none",
            ["ui", "--port", "5998"],
            must=r"study\.tracking is none",
            item="ui creates an empty store although study.tracking is none",
        ),
        Case(
            "mlflow:copied-project",
            A,
            _copied_store,
            expect="ok",
            check=_artifacts_inside,
            allowed=("mlruns/**", "results/**", "runs/*/tracking/**"),
            item="a copied project writes artifacts into the original's mlruns",
        ),
    ]
