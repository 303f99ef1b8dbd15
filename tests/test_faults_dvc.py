"""Under `dvc repro` in a real DVC project: dvc.yaml's `check` stage runs first, so a rejected params file stops
the pipeline before DVC removes any stage's outputs, a hostile run key never reaches a shell, and a deleted
checkpoint is rebuilt (bit-identical on CPU) instead of being dropped from dvc.lock."""

from __future__ import annotations

import shutil

import pytest
import yaml

from study_helpers import make_project, sh, tiny_params

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory):
    params = tiny_params(None)
    params["runs"] = {k: v for k, v in params["runs"].items() if k.startswith("tiny-olmo2")}
    params["train"].update({"max_steps": 8, "checkpoints": {"every": 2}})
    params["evaluate"]["testsets"] = params["evaluate"]["testsets"][:3]
    params["analyze"].update({"methods": ["linear"], "bootstrap": 0})
    params["study"]["tracking"] = "none"
    root = make_project(tmp_path_factory.mktemp("dvc") / "study", params)
    sh(["dvc", "repro"], root)  # one thread (study_helpers.env)
    sh(["git", "add", "-A"], root)
    sh(["git", "commit", "-qm", "reproduced"], root)
    return root


def _copy(reproduced, tmp_path):
    root = tmp_path / "study"
    shutil.copytree(reproduced, root, symlinks=True)
    return root


def _outputs(root):
    """Every output file a stage wrote (results/, runs/*/eval, runs/*/checkpoints, data/prepared) + dvc.lock."""
    out = {}
    for pattern in (
        "results/**/*",
        "runs/*/eval/**/*",
        "runs/*/checkpoints/**/*",
        "runs/*/run.json",
        "data/prepared/*",
        "dvc.lock",
    ):
        for p in root.glob(pattern):
            if p.is_file():
                out[str(p.relative_to(root))] = p.read_bytes()
    return out


def _edit(root, fn):
    path = root / "params.yaml"
    tree = yaml.safe_load(path.read_text())
    fn(tree)
    path.write_text(yaml.safe_dump(tree, sort_keys=False))


def _oodcorr_errors(res):
    return [x for x in (res.stdout + res.stderr).splitlines() if x.startswith("error: ")]


@pytest.mark.parametrize(
    "bad, what",
    [
        (lambda t: t["analyze"].update(methods=["pearson"]), "analyze.methods: unknown method 'pearson'"),
        (lambda t: t["evaluate"].update(max_length=0), "evaluate.max_length"),
        (lambda t: t["train"].update(lr=1e30), "lr: must be in (0, 1)"),
        (lambda t: t.update(analyse={"methods": ["linear"]}), "did you mean 'analyze'"),
        # credentials in params would be recorded in dvc.lock and the run cache: refused before DVC records anything
        (
            lambda t: t["study"].update(tracking_uri="http://bob:s3cr3t@PW@127.0.0.1:1/"),
            "study.tracking_uri: http://***@",
        ),
    ],
)
def test_rejected_params_leave_every_output_as_it_was(reproduced, tmp_path, bad, what):
    root = _copy(reproduced, tmp_path)
    before = _outputs(root)
    assert before["results/summary.json"] and any(k.endswith("eval/accuracy.csv") for k in before)
    _edit(root, bad)
    res = sh(["dvc", "repro"], root, check=False)
    errors = _oodcorr_errors(res)
    assert res.returncode != 0 and len(errors) == 1 and what in errors[0], res.stdout[-1500:] + res.stderr[-1500:]
    assert "Traceback" not in res.stdout + res.stderr and "s3cr3t" not in res.stdout + res.stderr
    assert _outputs(root) == before
    assert not [p for p in (root / ".dvc").rglob("*") if p.is_file() and b"s3cr3t" in p.read_bytes()]  # run cache


def test_a_hostile_run_key_never_reaches_a_shell(reproduced, tmp_path):
    root = _copy(reproduced, tmp_path)
    before = _outputs(root)
    _edit(root, lambda t: t["runs"].update({"x;touch PWNED;echo": dict(next(iter(t["runs"].values())))}))
    res = sh(["dvc", "repro"], root, check=False)
    assert res.returncode != 0 and any("run key" in e for e in _oodcorr_errors(res)), res.stderr[-1500:]
    assert not list(root.rglob("PWNED")) and not (root.parent / "PWNED").exists()
    assert _outputs(root) == before


def test_a_deleted_checkpoint_is_rebuilt_by_dvc_repro(reproduced, tmp_path):
    root = _copy(reproduced, tmp_path)
    before = _outputs(root)
    run = next(p.name for p in (root / "runs").iterdir() if p.is_dir())
    shutil.rmtree(root / "runs" / run / "checkpoints" / "checkpoint-4")
    res = sh(["dvc", "repro"], root)
    assert "checkpoint-4 missing or incomplete" in res.stderr + res.stdout
    assert _outputs(root) == before  # every checkpoint back, bit for bit: nothing downstream changed
    assert "Data and pipelines are up to date" in sh(["dvc", "status"], root).stdout


def test_a_rebuild_under_auto_threads_uses_the_count_the_run_was_trained_with(reproduced, tmp_path):
    """The run was trained with one thread (pinned); the rebuild runs under `auto` on whatever cores are idle now
    and still trains with one, so the checkpoint matches dvc.lock on a machine with more idle cores too. The count
    is kept machine-local (runs/<run>/resume/threads.json), never in run.json, a DVC output that must not depend
    on it."""
    import json

    root = _copy(reproduced, tmp_path)
    run = next(p.name for p in (root / "runs").iterdir() if p.is_dir())
    kept = root / "runs" / run / "resume" / "threads.json"
    assert json.loads(kept.read_text())["threads"] == 1
    assert "threads" not in json.loads((root / "runs" / run / "run.json").read_text())
    shutil.rmtree(root / "runs" / run / "checkpoints" / "checkpoint-6")
    _edit(root, lambda t: t["study"].update(threads="auto"))
    sh(["dvc", "repro", f"train@{run}"], root, OODCORR_THREADS=None)
    assert json.loads(kept.read_text())["threads"] == 1
    assert "Data and pipelines are up to date" in sh(["dvc", "status", "dvc.yaml"], root).stdout


def test_study_launch_vets_params_before_planning_any_job(reproduced, tmp_path):
    import sys

    root = _copy(reproduced, tmp_path)
    before = _outputs(root)
    _edit(root, lambda t: t["analyze"].update(methods=["pearson"]))
    res = sh([sys.executable, "-m", "oodcorr", "study", "launch", "--executor", "local"], root, check=False)
    lines = [x for x in (res.stdout + res.stderr).splitlines() if x.strip()]
    assert res.returncode == 2 and len(lines) == 1, lines
    assert lines[0].startswith("error: analyze.methods: unknown method 'pearson'"), lines
    assert _outputs(root) == before and not (root / ".oodcorr" / "launch").exists()


def test_a_run_folder_restored_with_other_timestamps_is_not_rebuilt(reproduced, tmp_path):
    """A backup restores every file of the study's run folders with its bytes but a new inode and an old
    modification time (`cp` without -p, an archive without times): `dvc status` reads up to date, `dvc repro`
    runs nothing, and the evaluation cache is kept (the stage would score nothing: its keys are content hashes)."""
    import os

    root = _copy(reproduced, tmp_path)
    before = _outputs(root)
    cache = sorted(p.relative_to(root) for p in root.glob("runs/*/eval/cache/*"))
    assert cache
    for p in sorted((root / "runs").rglob("*")) + sorted((root / "data" / "prepared").rglob("*")):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            p.unlink()
            p.write_bytes(data)
            os.utime(p, (1_000_000_000, 1_000_000_000))  # 2001: older than every dvc.lock entry
    assert "Data and pipelines are up to date" in sh(["dvc", "status"], root).stdout
    res = sh(["dvc", "repro"], root)
    assert "Running stage" not in res.stdout, res.stdout
    assert _outputs(root) == before
    assert sorted(p.relative_to(root) for p in root.glob("runs/*/eval/cache/*")) == cache
    # and the stage itself, run by hand, scores nothing: every (checkpoint, testset) pair is found in the cache
    run = next(p.name for p in (root / "runs").iterdir() if p.is_dir())
    out = sh(["oodcorr", "evaluate", "--run", run], root)
    assert ": scored 0 pair(s)" in out.stdout, out.stdout + out.stderr
    assert _outputs(root) == before


def test_two_threads_reproduce_the_one_thread_outputs_bit_for_bit(reproduced, tmp_path):
    """The study was reproduced with one thread; a clone that runs every stage again with two (what `auto`
    picks on an idle 2-core machine) writes the same outputs, so dvc.lock and `git status` stay clean: the thread
    count is kept out of run.json, every aggregate is computed from the stored per-item predictions, and MKL's
    matrix products run in its strict reproducible mode (core/numerics.py; without it, checkpoints 2-8 of this
    run differed under two threads and 57 outputs moved)."""
    root = _copy(reproduced, tmp_path)
    before = _outputs(root)
    for d in ("runs", "results"):
        shutil.rmtree(root / d)
    shutil.rmtree(root / ".dvc" / "cache")
    sh(["git", "checkout", "--", "."], root)  # the committed metrics files and .gitignore files
    sh(["dvc", "repro", "--force"], root, OODCORR_THREADS="2", OMP_NUM_THREADS=None)
    after = _outputs(root)
    moved = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    first = sorted(moved, key=lambda k: (not k.startswith("runs/"), k))  # the runs' own outputs first: the source
    assert not moved, f"{len(moved)} outputs depend on the thread count: {first[:12]}"
    assert not sh(["git", "status", "--porcelain"], root).stdout
