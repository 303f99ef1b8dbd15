"""Tracking is a best-effort mirror of the local records: a kill during store creation leaves no
half-migrated store; a tracking server that is down costs seconds and one warning (train and evaluate
finish with their local outputs); `oodcorr sync` later fills a live server with no duplicate runs or steps."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time

import pytest

from study_helpers import BIN, env
from test_mlflow_server import rest, start_server, stop_server
from test_train_helpers import make_project


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nobody listens once the socket is closed


@pytest.mark.slow
def test_kill_during_store_creation_then_rerun_works(tmp_path):
    db = tmp_path / "mlruns" / "mlflow.db"
    uri = f"sqlite:///{db}"
    code = f"from oodcorr.tracking import store as tracking; tracking.ensure_store({uri!r}); print('ok')"
    proc = subprocess.Popen([sys.executable, "-c", code], env=env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and not list(db.parent.glob(".mlflow.db.*.tmp")):
        time.sleep(0.01)
    assert list(db.parent.glob(".mlflow.db.*.tmp")), "the store is built in a temporary file"
    time.sleep(0.3)  # mid-migration
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not db.exists()  # never a half-migrated mlflow.db

    # a store half-created by an older version (the campaign's `_alembic_tmp_params already exists`)
    legacy = tmp_path / "legacy" / "mlflow.db"
    legacy.parent.mkdir()
    with sqlite3.connect(legacy) as con:
        con.execute("create table alembic_version (version_num varchar(32))")
        con.execute("insert into alembic_version values ('0584bdc529eb')")
        con.execute("create table _alembic_tmp_params (key varchar(250))")
        con.execute("create table runs (run_uuid varchar(32))")
    for store in (db, legacy):
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                f"""
import mlflow
from oodcorr.tracking import store as tracking
tracking.ensure_store('sqlite:///{store}')
c = mlflow.MlflowClient('sqlite:///{store}')
e = c.create_experiment('x')
r = c.create_run(e)
c.log_param(r.info.run_id, 'a', 1)
print('ok', len(c.search_runs([e])))
""",
            ],
            env=env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0 and "ok 1" in out.stdout, out.stderr[-2000:]
    assert list(legacy.parent.glob("mlflow.db.broken-*"))  # the empty half store is kept aside, not deleted
    assert not list(db.parent.glob(".mlflow.db.*.tmp"))  # the killed attempt's temporary is gone


def _oodcorr(args, cwd, **extra):
    t0 = time.time()
    res = subprocess.run(
        [str(BIN / "oodcorr"), *args], cwd=cwd, env=env(**extra), capture_output=True, text=True, timeout=600
    )
    return res, time.time() - t0


@pytest.mark.slow
def test_closed_port_then_sync_fills_a_live_server(tmp_path):
    runs = {"r": {"max_steps": 6, "checkpoints": {"every": 3}}}
    # reference timing: the same work with the local sqlite store
    ref = tmp_path / "ref"
    ref.mkdir()
    make_project(ref, runs)
    t_ref = sum(
        _oodcorr(a, ref)[1] for a in (["train", "--run", "r", "--quiet"], ["evaluate", "--run", "r", "--quiet"])
    )

    proj = tmp_path / "p"
    proj.mkdir()
    make_project(proj, runs)
    down = f"http://127.0.0.1:{closed_port()}"
    res_t, t_train = _oodcorr(["train", "--run", "r", "--quiet"], proj, MLFLOW_TRACKING_URI=down)
    assert res_t.returncode == 0, res_t.stderr[-3000:]
    assert res_t.stderr.count("warning: MLflow at") == 1 and "Traceback" not in res_t.stderr
    res_e, t_eval = _oodcorr(["evaluate", "--run", "r", "--quiet"], proj, MLFLOW_TRACKING_URI=down)
    assert res_e.returncode == 0, res_e.stderr[-3000:]
    assert res_e.stderr.count("warning: MLflow at") <= 1 and "Traceback" not in res_e.stderr
    extra = t_train + t_eval - t_ref
    print(f"closed port: {t_train + t_eval:.1f} s vs {t_ref:.1f} s with sqlite ({extra:+.1f} s)")
    assert extra < 30
    rdir = proj / "runs" / "r"
    assert json.loads((rdir / "run.json").read_text())["finished"]
    assert (rdir / "eval" / "metrics.jsonl").exists() and (rdir / "tracking" / "PENDING").exists()

    # the server is back: sync replays everything, twice without duplicates
    proc, server = start_server(tmp_path)
    try:
        _replay_and_check(proj, rdir, server)
    finally:
        stop_server(proc)


def _replay_and_check(proj, rdir, server):
    for _ in range(2):
        res, _ = _oodcorr(["sync"], proj, MLFLOW_TRACKING_URI=server)
        assert res.returncode == 0, res.stderr[-3000:]
    assert not (rdir / "tracking" / "PENDING").exists()
    exp = rest(server, "experiments/get-by-name", experiment_name="oodcorr/test")["experiment"]
    found = rest(server, "runs/search", {"experiment_ids": [exp["experiment_id"]], "max_results": 100})["runs"]
    assert len(found) == 1
    run = found[0]
    assert run["info"]["status"] == "FINISHED" and run["info"]["run_name"] == "r"
    params = {p["key"]: p["value"] for p in run["data"]["params"]}
    assert params["lr"] == "0.005"
    rid = run["info"]["run_id"]
    loss = rest(server, "metrics/get-history", run_id=rid, metric_key="train/loss")["metrics"]
    assert sorted(m["step"] for m in loss) == list(range(1, 7))
    acc = rest(server, "metrics/get-history", run_id=rid, metric_key="acc/synth_train")["metrics"]
    assert sorted(m["step"] for m in acc) == [0, 3, 6]
    arts = json.dumps(rest(server, f"artifacts/list?run_id={rid}&path=eval"))
    assert "predictions.tar.gz" in arts
    # a later stage syncs by itself once the store is reachable (nothing pending now: a no-op)
    res, _ = _oodcorr(["train", "--run", "r", "--quiet"], proj, MLFLOW_TRACKING_URI=server)
    assert res.returncode == 0 and "nothing to do" in res.stderr
    assert len(rest(server, "runs/search", {"experiment_ids": [exp["experiment_id"]]})["runs"]) == 1
    assert os.stat(rdir / "run.json").st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


@pytest.mark.slow
def test_server_dying_mid_run_then_sync_completes_the_same_run(tmp_path):
    """The server is killed while a run is being mirrored: training finishes with one warning and its local
    outputs; a server back on the same store (another port) gets the rest from `oodcorr sync`, into the same
    MLflow run, every step once."""
    proj = tmp_path / "p"
    proj.mkdir()
    make_project(proj, {"r": {"max_steps": 48, "checkpoints": {"every": 2}}})
    proc, server = start_server(tmp_path)
    try:
        train = subprocess.Popen(
            [str(BIN / "oodcorr"), "train", "--run", "r", "--quiet"],
            cwd=proj,
            env=env(MLFLOW_TRACKING_URI=server),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        rid, deadline = None, time.time() + 300
        while time.time() < deadline and train.poll() is None:
            found = _server_runs(server)
            if found and _steps(server, found[0]["info"]["run_id"]):
                rid = found[0]["info"]["run_id"]
                break
            time.sleep(0.05)
        assert rid, "the run never reached the server"
        os.killpg(proc.pid, signal.SIGKILL)  # the server and its worker die mid-run (no clean shutdown)
        proc.wait()
        out, err = train.communicate(timeout=600)
    finally:
        stop_server(proc)
    assert train.returncode == 0, err[-3000:]
    assert err.count("warning: MLflow at") == 1 and "Traceback" not in err, err[-3000:]
    rdir = proj / "runs" / "r"
    assert json.loads((rdir / "run.json").read_text())["finished"]
    assert (rdir / "checkpoints" / "checkpoint-48").exists() and (rdir / "tracking" / "PENDING").exists()

    proc, server = start_server(tmp_path)  # same backend store and artifacts, a new port
    try:
        seen_before = len(_steps(server, rid))
        assert 0 < seen_before < 48, seen_before  # the server really died mid-run
        res, _ = _oodcorr(["sync"], proj, MLFLOW_TRACKING_URI=server)
        assert res.returncode == 0, res.stderr[-3000:]
        found = _server_runs(server)
        assert [r["info"]["run_id"] for r in found] == [rid]  # completed in place, no second run
        assert found[0]["info"]["status"] == "FINISHED"
        assert sorted(_steps(server, rid)) == list(range(1, 49))
        assert not (rdir / "tracking" / "PENDING").exists()
    finally:
        stop_server(proc)


@pytest.mark.slow
def test_concurrent_processes_share_one_fresh_store(tmp_path):
    """Two trainings, then two evaluations, started at the same moment on a project without mlruns/: both
    create/migrate the sqlite store at once; every run is in it once, every step once, no warning."""
    proj = tmp_path / "p"
    proj.mkdir()
    make_project(proj, {"a": {"max_steps": 8}, "b": {"max_steps": 8, "seed": 1}})
    for stage in ("train", "evaluate"):
        procs = [
            subprocess.Popen(
                [str(BIN / "oodcorr"), stage, "--run", k, "--quiet"],
                cwd=proj,
                env=env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for k in ("a", "b")
        ]
        for p in procs:
            _, err = p.communicate(timeout=600)
            assert p.returncode == 0, err[-3000:]
            assert "warning" not in err.lower() and "Traceback" not in err, err[-3000:]
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{proj / 'mlruns' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("oodcorr/test")
    found = client.search_runs([exp.experiment_id])
    assert sorted(r.info.run_name for r in found) == ["a", "b"]
    for r in found:
        assert r.info.status == "FINISHED"
        assert [m.step for m in client.get_metric_history(r.info.run_id, "train/loss")] == list(range(1, 9))
        assert sorted(m.step for m in client.get_metric_history(r.info.run_id, "acc/synth_train")) == [0, 4, 8]
    assert not list((proj / "mlruns").glob(".mlflow.db.*.tmp"))


def _server_runs(server):
    try:
        exp = rest(server, "experiments/get-by-name", experiment_name="oodcorr/test")["experiment"]
    except OSError:
        return []
    return rest(server, "runs/search", {"experiment_ids": [exp["experiment_id"]], "max_results": 100}).get("runs", [])


def _steps(server, rid):
    return [
        m["step"] for m in rest(server, "metrics/get-history", run_id=rid, metric_key="train/loss").get("metrics", [])
    ]
