"""A local MLflow store is moved aside only when it is provably empty and half-created; a store that is locked
by another process or damaged (truncated, zeroed, a corrupted page) is one error line naming the file and
what to do, and its bytes are left exactly as they were."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys

import pytest

from oodcorr.core.errors import UserError
from oodcorr.tracking import store as tracking


@pytest.fixture(scope="module")
def store_with_runs(tmp_path_factory):
    """A real MLflow sqlite store holding 6 runs (built once, copied per test)."""
    import mlflow

    db = tmp_path_factory.mktemp("store") / "mlflow.db"
    uri = f"sqlite:///{db}"
    tracking.ensure_store(uri)
    client = mlflow.MlflowClient(uri)
    exp = client.create_experiment("oodcorr/x")
    for i in range(6):
        rid = client.create_run(exp).info.run_id
        client.log_batch(rid, metrics=[mlflow.entities.Metric("loss", float(j), 0, j) for j in range(200)])
    mlflow.MlflowClient(uri)._tracking_client.store.engine.dispose()
    return db


def _copy(src, tmp_path):
    db = tmp_path / "mlruns" / "mlflow.db"
    db.parent.mkdir()
    shutil.copyfile(src, db)
    return db


def _ensure(db):
    tracking._READY.discard(str(db))
    tracking.ensure_store(f"sqlite:///{db}")


def test_store_locked_by_another_process_is_an_error_not_rebuilt(store_with_runs, tmp_path, monkeypatch):
    db = _copy(store_with_runs, tmp_path)
    before = db.read_bytes()
    monkeypatch.setattr(tracking, "BUSY_TIMEOUT_S", 0.5)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"""
import sqlite3, sys, time
con = sqlite3.connect({str(db)!r}, isolation_level=None)
con.execute("begin exclusive")
print("locked", flush=True)
time.sleep(60)
""",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(UserError) as e:
            _ensure(db)
    finally:
        holder.kill()
        holder.wait()
    msg = str(e.value)
    assert str(db) in msg and "locked by another process" in msg and "\n" not in msg
    assert db.read_bytes() == before and not list(db.parent.glob("mlflow.db.broken-*"))
    _ensure(db)  # the lock gone: the same store, with its 6 runs, is used as it is
    with sqlite3.connect(db) as con:
        assert con.execute("select count(*) from runs").fetchone()[0] == 6


def _truncate(db):
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3])


def _zero(db):
    db.write_bytes(b"\0" * db.stat().st_size)


def _corrupt_page(db):
    """Garbage over the middle of a b-tree page that holds metric rows (page size 4096)."""
    data = bytearray(db.read_bytes())
    with sqlite3.connect(db) as con:
        page = con.execute("select rootpage from sqlite_master where name = 'metrics'").fetchone()[0]
    start = (page - 1) * 4096
    data[start : start + 64] = b"\xa5" * 64
    db.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [_truncate, _zero, _corrupt_page], ids=["truncated", "zeroed", "page"])
def test_damaged_store_is_an_error_naming_the_file_and_is_never_moved(store_with_runs, tmp_path, damage):
    db = _copy(store_with_runs, tmp_path)
    damage(db)
    before = db.read_bytes()
    with pytest.raises(UserError) as e:
        _ensure(db)
    msg = str(e.value)
    assert str(db) in msg and ("damaged" in msg or "cannot be read" in msg) and "mv " in msg, msg
    assert db.read_bytes() == before and sorted(p.name for p in db.parent.iterdir()) == [".mlflow.db.lock", "mlflow.db"]


def test_only_a_provably_empty_half_created_store_is_moved_aside(tmp_path):
    half = tmp_path / "a" / "mlflow.db"
    half.parent.mkdir()
    with sqlite3.connect(half) as con:  # an older version killed mid-migration: no runs, no experiments
        con.execute("create table alembic_version (version_num varchar(32))")
        con.execute("insert into alembic_version values ('0584bdc529eb')")
        con.execute("create table _alembic_tmp_params (key varchar(250))")
        con.execute("create table runs (run_uuid varchar(32))")
    with pytest.warns(UserWarning, match="half-created"):
        _ensure(half)
    assert list(half.parent.glob("mlflow.db.broken-*")) and tracking.store_state(half) == "ready"

    keep = tmp_path / "b" / "mlflow.db"  # the same incomplete schema, but holding a run: an error, kept
    keep.parent.mkdir()
    with sqlite3.connect(keep) as con:
        con.execute("create table _alembic_tmp_params (key varchar(250))")
        con.execute("create table runs (run_uuid varchar(32))")
        con.execute("insert into runs values ('abc')")
    before = keep.read_bytes()
    with pytest.raises(UserError, match="holds 1 run"):
        _ensure(keep)
    assert keep.read_bytes() == before and not list(keep.parent.glob("mlflow.db.broken-*"))


def test_a_damaged_store_stops_a_stage_before_it_writes(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from oodcorr.cli import cli
    from test_train_helpers import make_project

    make_project(tmp_path, {"a": {}})
    db = tmp_path / "mlruns" / "mlflow.db"
    db.parent.mkdir()
    db.write_bytes(b"SQLite format 3\0" + b"\x07" * 5000)
    monkeypatch.chdir(tmp_path)
    tracking._READY.clear()
    res = CliRunner().invoke(cli, ["train", "--run", "a"])
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert res.exit_code == 2 and len(lines) == 1 and str(db) in lines[0] and "damaged" in lines[0], res.output
    assert not (tmp_path / "runs").exists() and db.read_bytes()[:16] == b"SQLite format 3\0"


def _index_damage(db) -> None:
    """50 bytes written over a table page near the end of the store where sqlite's page check (quick_check) finds
    nothing and its full check (integrity_check) finds rows missing from an index: damage a stage's quick look
    would miss."""
    good = db.read_bytes()
    for offset in range(len(good) - 50, max(0, len(good) - 16 * 4096), -50):
        data = bytearray(good)
        data[offset : offset + 50] = b"\xa5" * 50
        db.write_bytes(bytes(data))
        with sqlite3.connect(db) as con:
            try:
                checks = [con.execute(f"pragma {p}(1)").fetchone()[0] for p in ("quick_check", "integrity_check")]
            except sqlite3.DatabaseError:
                continue
        if checks[0] == "ok" and checks[1] != "ok":
            return
    pytest.fail("no index-only damage found in the store's last pages")


def test_damage_only_the_full_check_finds_stops_a_stage_and_sync(tmp_path, store_with_runs, monkeypatch):
    """A small store gets sqlite's full integrity check when a stage opens it; a large one the page check at
    open, and the full one at every `oodcorr sync`. Both name the file and what to do; nothing is written."""
    from click.testing import CliRunner

    from oodcorr.cli import cli
    from test_train_helpers import make_project

    make_project(tmp_path, {"a": {}})
    db = _copy(store_with_runs, tmp_path)
    _index_damage(db)
    before = db.read_bytes()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "unset")  # restored at teardown; the project's own store is used
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    monkeypatch.chdir(tmp_path)

    def one_error(args):
        tracking._READY.clear()
        res = CliRunner().invoke(cli, args)
        lines = [x for x in res.output.splitlines() if x.strip()]
        assert res.exit_code == 2 and len(lines) == 1 and str(db) in lines[0], res.output
        assert "damaged" in lines[0] and "missing from index" in lines[0] and "oodcorr sync" in lines[0], lines[0]

    one_error(["train", "--run", "a"])
    assert not (tmp_path / "runs").exists()
    monkeypatch.setattr(tracking, "FULL_CHECK_MAX_BYTES", 0)  # a store over the limit: the page check at open
    tracking._READY.clear()
    tracking.check_store({"_root": str(tmp_path), "study": {"name": "test"}})
    one_error(["sync"])
    assert db.read_bytes() == before


def test_copied_or_moved_project_logs_artifacts_inside_itself(tmp_path, monkeypatch, capsys):
    """MLflow fixes an experiment's artifact location when it is created (an absolute path): a project copied
    with its mlruns/ must not write into the original's mlruns/artifacts, and a moved one not into a folder
    that is gone. A `dvc exp run --temp` workspace still logs into the real project's store."""
    import mlflow

    orig = tmp_path / "orig"
    orig.mkdir()

    def params(root):
        return {"_root": str(root), "study": {"name": "copy"}}

    def log_file(root, name, run_id=None):
        monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # mlflow.set_tracking_uri exports it
        exp = tracking.setup(params(root))
        client = mlflow.MlflowClient(tracking.tracking_uri(params(root)))
        rid = run_id or client.create_run(exp).info.run_id
        (tmp_path / name).write_text(name)
        client.log_artifact(rid, str(tmp_path / name))
        return client, rid

    _, first = log_file(orig, "first.txt")
    elsewhere = mlflow.MlflowClient(tracking.tracking_uri(params(orig))).create_experiment(
        "mine", artifact_location=(tmp_path / "bucket").as_uri()
    )  # a user's own location: never rewritten
    shutil.copytree(orig, tmp_path / "copy")
    shutil.copytree(orig, tmp_path / "moved")
    shutil.rmtree(orig / "mlruns" / "artifacts" / first)  # as if moved: the old place is gone for "moved"
    original_store = (orig / "mlruns" / "mlflow.db").read_bytes()

    tracking._READY.clear()
    for name in ("copy", "moved"):
        root = tmp_path / name
        client, second = log_file(root, f"{name}.txt")
        assert "was created in" in capsys.readouterr().err
        assert (root / "mlruns" / "artifacts" / second / "artifacts" / f"{name}.txt").is_file()
        assert not list(orig.rglob(f"{name}.txt"))
        # the runs it was copied with read their artifacts from the copy's own files
        assert client.get_run(first).info.artifact_uri.startswith((root / "mlruns" / "artifacts").as_uri() + "/")
        assert [f.path for f in client.list_artifacts(first)] == ["first.txt"]
        assert client.get_experiment(elsewhere).artifact_location == (tmp_path / "bucket").as_uri()
        client._tracking_client.store.engine.dispose()
    assert (orig / "mlruns" / "mlflow.db").read_bytes() == original_store

    # the original project (and a dvc temp workspace inside it) keeps writing into its own store, silently
    tracking._READY.clear()
    temp = orig / ".dvc" / "tmp" / "exps" / "tmpab12"
    temp.mkdir(parents=True)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking.tracking_uri(params(temp)) == tracking.tracking_uri(params(orig))
    client, third = log_file(temp, "third.txt")
    assert (orig / "mlruns" / "artifacts" / third / "artifacts" / "third.txt").is_file()
    assert "was created in" not in capsys.readouterr().err
