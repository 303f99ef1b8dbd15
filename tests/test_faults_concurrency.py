"""Two processes never do the same work at once: a second `oodcorr train/evaluate --run K` or `oodcorr analyze`
started while the first runs is refused with one line naming the holder, exits non-zero and touches nothing;
the first finishes as if alone (one loss line per step, no MLflow run left RUNNING). A killed holder leaves
no stale lock: the next run goes ahead. Real processes: the first is paused (SIGSTOP) right after it took
its lock, so the overlap does not depend on timing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import yaml

from study_helpers import env
from test_faults import _metrics_project, edit, snapshot
from test_train_helpers import make_project


def start_and_pause(args, cwd, lock):
    """Start `oodcorr args` and SIGSTOP it once it holds `lock` (its pid is in the lock file)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "oodcorr", *args],
        cwd=cwd,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    path = cwd / ".oodcorr" / "locks" / f"{lock}.lock"
    deadline = time.time() + 300
    while not (path.exists() and path.read_text().strip() == str(proc.pid)):
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline, "the first process never took its lock"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGSTOP)
    return proc


def refused(args, cwd, holder, what):
    """The second process: one error line naming the holder's pid, rc 2, nothing in the project changed."""
    before = snapshot(cwd / "runs") if (cwd / "runs").exists() else None
    res = subprocess.run(
        [sys.executable, "-m", "oodcorr", *args], cwd=cwd, env=env(), capture_output=True, text=True, timeout=600
    )
    lines = [x for x in (res.stdout + res.stderr).splitlines() if x.strip()]
    assert res.returncode == 2 and len(lines) == 1, (res.returncode, res.stdout, res.stderr[-3000:])
    assert lines[0].startswith(f"error: {what}") and f"(pid {holder.pid})" in lines[0], lines[0]
    assert (snapshot(cwd / "runs") if (cwd / "runs").exists() else None) == before


def resume(proc):
    os.kill(proc.pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]


def test_second_train_of_a_run_is_refused_and_a_killed_holder_leaves_no_lock(tmp_path):
    make_project(tmp_path, {"a": {}}, {"max_steps": 8})
    first = start_and_pause(["train", "--run", "a"], tmp_path, "train-a")
    refused(["train", "--run", "a"], tmp_path, first, "run a is being trained by another process")
    resume(first)
    steps = [
        r["step"]
        for r in map(json.loads, (tmp_path / "runs" / "a" / "tracking" / "train.jsonl").open())
        if r.get("key") == "train/loss"
    ]
    assert sorted(steps) == list(range(1, 9)), steps  # one loss line per step, not two processes' worth
    # a holder killed while it holds the lock: the lock goes with it, a rerun goes ahead (nothing to do here)
    killed = start_and_pause(["train", "--run", "a"], tmp_path, "train-a")
    killed.kill()
    killed.wait()
    res = subprocess.run(
        [sys.executable, "-m", "oodcorr", "train", "--run", "a"],
        cwd=tmp_path,
        env=env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0 and "nothing to do" in res.stderr, res.stderr[-3000:]


def test_second_evaluate_of_a_run_is_refused(tmp_path):
    from test_evaluate import make_project as eval_project

    eval_project(tmp_path, steps=(0, 5))
    first = start_and_pause(["evaluate", "--run", "r1", "--quiet"], tmp_path, "evaluate-r1")
    refused(["evaluate", "--run", "r1", "--quiet"], tmp_path, first, "run r1 is being evaluated by another process")
    resume(first)
    assert (tmp_path / "runs" / "r1" / "eval" / "metrics.jsonl").is_file()


def test_second_analyze_is_refused_and_no_mlflow_run_is_left_running(tmp_path):
    import mlflow

    _metrics_project(tmp_path)
    edit(tmp_path / "params.yaml", lambda t: t["analyze"].update(mlflow=True))
    first = start_and_pause(["analyze", "--no-plots"], tmp_path, "analyze")
    refused(["analyze", "--no-plots"], tmp_path, first, f"an analysis of {tmp_path} is running in another process")
    resume(first)
    again = subprocess.run(
        [sys.executable, "-m", "oodcorr", "analyze", "--no-plots"],
        cwd=tmp_path,
        env=env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("oodcorr/demo")
    runs = client.search_runs([exp.experiment_id])
    assert [r.info.status for r in runs] == ["FINISHED"]  # the rerun replaced the first; none RUNNING
    assert yaml.safe_load((tmp_path / "params.yaml").read_text())["analyze"]["mlflow"] is True
