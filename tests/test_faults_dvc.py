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
    and still trains with one, so the checkpoint matches dvc.lock on a machine with more idle cores too."""
    import json

    root = _copy(reproduced, tmp_path)
    run = next(p.name for p in (root / "runs").iterdir() if p.is_dir())
    recorded = json.loads((root / "runs" / run / "run.json").read_text())["threads"]
    assert recorded == 1
    shutil.rmtree(root / "runs" / run / "checkpoints" / "checkpoint-6")
    _edit(root, lambda t: t["study"].update(threads="auto"))
    sh(["dvc", "repro", f"train@{run}"], root, OODCORR_THREADS=None)
    assert json.loads((root / "runs" / run / "run.json").read_text())["threads"] == 1


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
