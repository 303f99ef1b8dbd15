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
    code = f"from oodcorr import tracking; tracking.ensure_store({uri!r}); print('ok')"
    proc = subprocess.Popen([sys.executable, "-c", code], env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
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
        out = subprocess.run([sys.executable, "-c", f"""
import mlflow
from oodcorr import tracking
tracking.ensure_store('sqlite:///{store}')
c = mlflow.MlflowClient('sqlite:///{store}')
e = c.create_experiment('x')
r = c.create_run(e)
c.log_param(r.info.run_id, 'a', 1)
print('ok', len(c.search_runs([e])))
"""], env=env(), capture_output=True, text=True, timeout=300)
        assert out.returncode == 0 and "ok 1" in out.stdout, out.stderr[-2000:]
    assert list(legacy.parent.glob("mlflow.db.broken-*"))  # the empty half store is kept aside, not deleted
    assert not list(db.parent.glob(".mlflow.db.*.tmp"))  # the killed attempt's temporary is gone


def _oodcorr(args, cwd, **extra):
    t0 = time.time()
    res = subprocess.run([str(BIN / "oodcorr"), *args], cwd=cwd, env=env(**extra), capture_output=True, text=True,
                         timeout=600)
    return res, time.time() - t0


@pytest.mark.slow
def test_closed_port_then_sync_fills_a_live_server(tmp_path):
    runs = {"r": {"max_steps": 6, "checkpoints": {"every": 3}}}
    # reference timing: the same work with the local sqlite store
    ref = tmp_path / "ref"
    ref.mkdir()
    make_project(ref, runs)
    t_ref = sum(_oodcorr(a, ref)[1] for a in (["train", "--run", "r", "--quiet"], ["evaluate", "--run", "r", "--quiet"]))

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
    acc = rest(server, "metrics/get-history", run_id=rid, metric_key="accuracy/synth_train")["metrics"]
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
