"""A saved study in the MLflow UI (docs/mlflow.md): `oodcorr ui --study NAME` serves its runs, their checkpoint
metrics and its analysis run from a store of its own under mlruns/studies/NAME, and no command writes into the
study's DVC-tracked run folders (`oodcorr sync --params studies/NAME/params.yaml` refuses in one line, `dvc
status` stays clean). The analysis run's link opens the report in MLflow's artifact view (an HTML page), not
its download endpoint, which always sends a file to save."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import urllib.request

import numpy as np
import pytest
import yaml

from oodcorr.core.io import write_json, write_jsonl
from oodcorr.records.simulated_runs import write_predictions
from oodcorr.stats.simulate import irt_metrics_rows, irt_study
from study_helpers import BIN, env, sh
from test_mlflow_server import free_port, rest

pytestmark = pytest.mark.slow

OOD = ["hans", "anli", "wnli"]
SIGMA = np.array([[1, 0.5, 0.0], [0.5, 1, 0.0], [0.0, 0.0, 1]])
RUNS = {"smollm2-135m_mnli_real_16_s0": "smollm2-135m", "gemma3-270m_mnli_real_16_s0": "gemma3-270m"}


def saved_study(repo):
    """A git + DVC repository holding studies/demo: params (tracking: none) and two run folders `dvc add`ed in the
    studies subrepo."""
    sh(["git", "init", "-q"], repo)
    sh(["dvc", "init", "-q"], repo)
    (repo / ".gitignore").write_text("/mlruns/\n")
    sdir = repo / "studies" / "demo"
    runs = {}
    for i, (key, model) in enumerate(RUNS.items()):
        cfg = {
            "model": model,
            "train_set": "mnli_real_train",
            "id_testset": "mnli_real",
            "shots": 16,
            "data_seed": 0,
            "seed": 0,
        }
        runs[key] = cfg
        rdir = sdir / "runs" / key
        write_json(
            rdir / "run.json",
            {
                "run": key,
                "config": cfg,
                "tracking_identity": f"id{i}",
                "finished": True,
                "total_steps": 90,
                "model_info": {"revision": "r"},
            },
        )
        st = irt_study(10, [40, 40, 40], SIGMA, tau=0.04, n_id_items=80, rng=np.random.default_rng(i))
        steps = list(range(0, 100, 10))
        write_predictions(rdir / "eval", st, steps, "mnli", OOD)
        write_jsonl(rdir / "eval" / "metrics.jsonl", irt_metrics_rows(st, key, model, 0, steps, "mnli", OOD))
    params = {
        "study": {"name": "demo", "tracking": "none"},
        "runs": runs,
        "analyze": {"out": "results", "methods": ["linear"], "bootstrap": 20, "seed": 0},
    }
    (sdir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    sh(["dvc", "init", "-q", "--subdir"], repo / "studies")  # studies/: a DVC subrepo, as in this repository
    sh(["dvc", "add", "-q", *[f"demo/runs/{k}" for k in RUNS]], repo / "studies")
    sh(["git", "add", "-A"], repo)
    sh(["git", "commit", "-qm", "study demo"], repo)
    return sdir


def untouched(repo) -> None:
    assert "up to date" in sh(["dvc", "--cd", "studies", "status", *[f"demo/runs/{k}.dvc" for k in RUNS]], repo).stdout
    assert sh(["git", "status", "--porcelain"], repo).stdout == ""
    assert not list((repo / "studies").rglob("tracking")) and not (repo / "studies" / "demo" / "mlruns").exists()


def test_a_saved_study_is_shown_from_its_own_store_and_never_written(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    saved_study(repo)
    params = "studies/demo/params.yaml"

    res = sh([BIN / "oodcorr", "sync", "--params", params], repo, check=False)
    assert res.returncode != 0 and res.stderr.count("error:") == 1, res.stderr
    assert "study.tracking is none" in res.stderr and "oodcorr ui --study demo" in res.stderr, res.stderr
    assert "unreachable" not in res.stderr and "Traceback" not in res.stderr
    untouched(repo)

    port = free_port()
    proc = subprocess.Popen(
        [str(BIN / "oodcorr"), "ui", "--params", params, "--port", str(port)],
        cwd=repo,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []  # the links on stdout, progress on stderr: both, in order of arrival
    for stream in (proc.stdout, proc.stderr):
        threading.Thread(target=lambda f=stream: [lines.append(x.rstrip()) for x in f], daemon=True).start()
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 600
        while not any(" report: http" in x for x in lines) and proc.poll() is None and time.time() < deadline:
            time.sleep(0.5)
        assert any(" report: http" in x for x in lines), lines
        assert "a saved study" in lines[0], lines
        exp = rest(base, "experiments/get-by-name", experiment_name="oodcorr/demo")["experiment"]
        runs = rest(base, "runs/search", {"experiment_ids": [exp["experiment_id"]], "max_results": 50})["runs"]
        tags = {r["info"]["run_name"]: {t["key"]: t["value"] for t in r["data"].get("tags", [])} for r in runs}
        assert sorted(tags) == ["analysis demo", "gemma3-270m s0", "smollm2-135m s0"], sorted(tags)
        # the two families in two distinct colours
        assert tags["gemma3-270m s0"]["mlflow.runColor"] != tags["smollm2-135m s0"]["mlflow.runColor"]
        # each run shows when it was saved (its .dvc file's commit; the outputs keep no training times), not when
        # this view was built
        for r in runs:
            if r["info"]["run_name"] == "analysis demo":
                continue
            key = r["data"]["tags"] and {t["key"]: t["value"] for t in r["data"]["tags"]}["oodcorr.run_key"]
            saved = 1000 * int(
                sh(["git", "log", "-1", "--format=%ct", "--", f"studies/demo/runs/{key}.dvc"], repo).stdout
            )
            info = r["info"]
            assert int(info["end_time"]) == saved and saved - 600_000 < int(info["start_time"]) < saved, info
        train = next(r for r in runs if r["info"]["run_name"] == "smollm2-135m s0")
        hist = rest(base, "metrics/get-history", run_id=train["info"]["run_id"], metric_key="acc/hans")["metrics"]
        assert sorted(m["step"] for m in hist) == list(range(0, 100, 10))  # every checkpoint's metric
        analysis = next(r for r in runs if r["info"]["run_name"] == "analysis demo")
        rid = analysis["info"]["run_id"]
        link = f"#/experiments/{exp['experiment_id']}/runs/{rid}/artifacts/report.html"
        assert f"]({link})" in tags["analysis demo"]["mlflow.note.content"]  # the artifact view, not a download
        assert any(x.endswith(f"report: {base}/{link}") for x in lines), lines
        with urllib.request.urlopen(f"{base}/get-artifact?path=report.html&run_uuid={rid}", timeout=30) as r:
            assert r.headers.get_content_type() == "text/html" and b"<table" in r.read()  # what the view shows
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    assert (repo / "mlruns" / "studies" / "demo" / "mlflow.db").is_file()
    untouched(repo)


def test_sync_never_writes_into_a_dvc_tracked_run_folder(tmp_path):
    """A saved study whose params track MLflow: its run folders are still DVC-tracked outputs, never written."""
    repo = tmp_path / "repo"
    repo.mkdir()
    sdir = saved_study(repo)
    doc = yaml.safe_load((sdir / "params.yaml").read_text())
    doc["study"].pop("tracking")
    (sdir / "params.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    sh(["git", "commit", "-qam", "tracking on"], repo)
    res = sh([BIN / "oodcorr", "sync", "--params", "studies/demo/params.yaml"], repo, check=False)
    assert res.returncode != 0 and res.stderr.count("error:") == 1, res.stderr
    assert "a DVC-tracked output" in res.stderr and "oodcorr ui --study demo" in res.stderr, res.stderr
    untouched(repo)
    assert json.loads((sdir / "runs" / next(iter(RUNS)) / "run.json").read_text())["finished"] is True
