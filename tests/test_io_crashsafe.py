"""oodcorr.core.io: outputs honour the umask, temporaries of dead processes are cleaned at the next start (live
ones are kept), appends survive a partial last line; oodcorr.modeling.threads: the CPU thread policy."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from oodcorr.core import io
from oodcorr.core.errors import UserError
from oodcorr.modeling import threads


def test_outputs_honour_the_umask(tmp_path):
    old = os.umask(0o022)
    io._UMASK = None
    try:
        io.write_json(tmp_path / "a.json", {"x": 1})
        with io.atomic_dir(tmp_path / "d") as tmp:
            (tmp / "f").write_text("x")
        assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o644
        assert (tmp_path / "d").stat().st_mode & 0o777 == 0o755
    finally:
        os.umask(old)
        io._UMASK = None


def test_stale_temps_of_dead_processes_are_removed(tmp_path):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    (tmp_path / f".predictions.{dead}.abcd1234.tmp").mkdir()
    (tmp_path / f".results.{dead}.abcd1234.parquet.tmp").write_text("x")
    live = tmp_path / f".metrics.jsonl.{os.getpid()}.abcd1234.tmp"
    live.write_text("x")
    legacy = tmp_path / ".run.json.k2j3h4g5.tmp"
    legacy.write_text("x")
    mine = tmp_path / "keep.tmp"  # not ours (no leading dot): never touched
    mine.write_text("x")
    removed = {p.name for p in io.clean_stale_temps(tmp_path, legacy_age=3600)}
    assert removed == {f".predictions.{dead}.abcd1234.tmp", f".results.{dead}.abcd1234.parquet.tmp"}
    assert live.exists() and legacy.exists() and mine.exists()
    io.clean_stale_temps(tmp_path)  # legacy_age=0: pid-less temporaries of older versions go too
    assert not legacy.exists() and live.exists()


def test_atomic_dir_removes_a_killed_attempts_folder_and_nothing_else(tmp_path):
    # the kill campaign's leftover: analyze killed mid-write left `.results.<pid>.<rand>.tmp` in the project root
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    stale = tmp_path / f".results.{dead}.inu9xxo7.tmp"
    stale.mkdir()
    (stale / "partial_correlations.csv").write_text("half")
    users = tmp_path / ".notes.tmp"  # pid-less: a user's file, not ours
    users.write_text("x")
    with io.atomic_dir(tmp_path / "results") as d:
        (d / "a.csv").write_text("a")
    assert not stale.exists() and users.exists()
    assert (tmp_path / "results" / "a.csv").read_text() == "a"


def test_append_drops_a_killed_writers_partial_line(tmp_path):
    f = tmp_path / "t.jsonl"
    io.append_lines(f, ['{"a": 1}'])
    with open(f, "a") as h:
        h.write('{"a": 2, "b"')  # killed mid-line
    assert io.read_jsonl_tolerant(f) == [{"a": 1}]
    io.append_lines(f, ['{"a": 3}'])
    assert io.read_jsonl_tolerant(f) == [{"a": 1}, {"a": 3}]


def test_thread_policy(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    assert threads.auto_threads(busy=0.1) == 2
    assert threads.auto_threads(busy=1.0) == 1  # one core kept busy elsewhere -> one thread
    assert threads.auto_threads(busy=2.0) == 1
    monkeypatch.setenv(threads.ENV, "3")
    assert threads.resolve({"study": {"threads": 1}}) == (3, threads.ENV)
    monkeypatch.delenv(threads.ENV)
    assert threads.resolve({"study": {"threads": 1}}) == (1, "study.threads")
    for bad in ("0", "x", "1.5"):
        monkeypatch.setenv(threads.ENV, bad)
        with pytest.raises(UserError, match="OODCORR_THREADS: expected a positive integer or 'auto'"):
            threads.resolve(None)


def test_auto_keeps_the_thread_count_a_run_was_trained_with(monkeypatch):
    """Sums over another thread count differ in the last bits: a resumed or rebuilt run under `auto` uses the count
    recorded in its run.json, so the rebuilt checkpoint matches dvc.lock; a pinned count still wins."""
    monkeypatch.delenv(threads.ENV, raising=False)
    monkeypatch.setattr(threads, "auto_threads", lambda busy=None: 2)
    assert threads.resolve({"study": {}})[0] == 2
    assert threads.resolve({"study": {}}, kept=1) == (1, "auto: the count this run was trained with")
    assert threads.resolve({"study": {"threads": "auto"}}, kept=1)[0] == 1
    assert threads.resolve({"study": {"threads": 2}}, kept=1) == (2, "study.threads")
    monkeypatch.setenv(threads.ENV, "3")
    assert threads.resolve({"study": {}}, kept=1) == (3, threads.ENV)
