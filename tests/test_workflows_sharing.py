"""README "Share results" (through a DVC remote), followed literally with two clones and a local remote: the owner adds
data (`dvc add data/raw`), sets a default remote and pushes; a collaborator's `make setup` pulls it. When the
data was never pushed, `make setup` says so in one line (which data, which remote, what to do)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from study_helpers import BIN, REPO, as_this_repo, make_project, sh, tiny_params


def readme_sharing() -> str:
    return (REPO / "README.md").read_text().split("## Share results\n", 1)[1].split("\n## ")[0]


def readme_commands(text: str) -> list[str]:
    """The shell lines of the section's ```bash blocks, comments cut."""
    import re

    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        lines += [ln.split("  #")[0].strip() for ln in block.splitlines() if ln.strip()]
    return lines


def owner_project(tmp: Path) -> Path:
    """A study laid out like this repository, with its Makefile and the demo remote."""
    root = make_project(tmp / "owner", tiny_params(None))
    shutil.copy(REPO / "Makefile", root / "Makefile")
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    shutil.copytree(REPO / ".dvc" / "demo-remote", root / ".dvc" / "demo-remote")
    sh(["dvc", "remote", "add", "demo", "demo-remote"], root)
    return as_this_repo(root)


def make_setup(clone: Path, tmp: Path, check=True):
    """`make setup` with this environment's venv standing in (the install step is a no-op)."""
    stamp = tmp / "installed"
    stamp.touch()
    return sh(["make", "-s", "setup", f"VENV={BIN.parent}", f"STAMP={stamp}"], clone, check=check)


@pytest.mark.slow
def test_sharing_section_two_clones_and_a_local_remote(tmp_path):
    text = readme_sharing()
    for step in (
        "dvc remote add -d storage",
        "dvc push",
        "git add .dvc/config data.dvc dvc.lock",
        "make setup && source .venv/bin/activate",
        "dvc pull",
    ):
        assert step in text, step
    owner = owner_project(tmp_path)
    (owner / "data" / "raw" / "new_set.csv").write_text("sentence1,sentence2,gold\nA runs.,A runs.,yes\n")
    sh(["dvc", "add", "-q", "data/raw"], owner)
    sh(["git", "add", "-A"], owner)
    sh(["git", "commit", "-qm", "new data"], owner)

    # forgot to push: the collaborator's `make setup` explains in one line
    early = tmp_path / "early"
    sh(["git", "clone", "-q", str(owner), str(early)], tmp_path)
    res = make_setup(early, tmp_path, check=False)
    assert res.returncode != 0
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, res.stderr
    assert "data/raw" in errors[0] and "'demo'" in errors[0] and "dvc push" in errors[0], errors[0]
    assert not (early / "data" / "raw" / "new_set.csv").exists()

    # the README's steps: a default remote, dvc push, commit; the collaborator: clone, make setup, dvc pull
    remote = tmp_path / "storage"
    sh(["dvc", "remote", "add", "-d", "storage", str(remote)], owner)
    sh(["dvc", "push", "-q"], owner)
    sh(["git", "add", "data.dvc", ".dvc/config"], owner)  # (+ dvc.lock and metrics once `dvc repro` ran: below)
    sh(["git", "commit", "-qm", "study results"], owner)
    clone = tmp_path / "collaborator"
    sh(["git", "clone", "-q", str(owner), str(clone)], tmp_path)
    make_setup(clone, tmp_path)
    assert (clone / "data" / "raw" / "new_set.csv").read_text() == (owner / "data" / "raw" / "new_set.csv").read_text()
    assert make_setup(clone, tmp_path).stdout == ""  # idempotent
    # (`dvc pull` of pipeline outputs and a no-op `dvc repro` after a pushed study: test_study_e2e.py)
    assert "data.dvc" not in sh(["dvc", "status", "data.dvc"], clone).stdout


@pytest.mark.slow
def test_shared_study_is_up_to_date_and_mlflow_complete_in_a_second_clone(tmp_path):
    """The README's sharing steps after `dvc repro`, literally: the owner pushes and commits the files the
    README lists; the collaborator clones, `make setup`, `dvc pull`: `dvc status` is clean (nothing to
    recompute), and `oodcorr sync` gives complete MLflow runs (params, train/loss, eval metrics)."""
    from study_helpers import mlflow_runs

    text = readme_sharing()
    cmds = readme_commands(text)
    owner = owner_project(tmp_path)
    sh(["dvc", "repro"], owner)
    remote = tmp_path / "storage"
    for cmd in cmds[: cmds.index("git clone <repo> oodcorr && cd oodcorr")]:
        cmd = cmd.replace("/mnt/shared/oodcorr-dvc", str(remote))
        if cmd.startswith("git commit"):
            cmd = cmd.replace(" && git push", "")
        sh(["bash", "-c", cmd], owner)
    assert sh(["git", "status", "--porcelain"], owner).stdout.strip() == "", "README's git add leaves files out"
    clone = tmp_path / "collaborator"
    sh(["git", "clone", "-q", str(owner), str(clone)], tmp_path)
    make_setup(clone, tmp_path)
    sh(["dvc", "pull", "-q"], clone)
    assert "Data and pipelines are up to date" in sh(["dvc", "status"], clone).stdout
    synced = sh(["oodcorr", "sync"], clone).stdout
    assert "rebuilt the tracking records of 2 run(s)" in synced, synced
    client, found = mlflow_runs(clone)
    train = {r.data.tags.get("oodcorr.run_key"): r for r in found if r.data.tags.get("oodcorr.kind") == "train"}
    assert set(train) == set(tiny_params(None)["runs"])
    owner_client, owner_runs = mlflow_runs(owner)
    for key, run in train.items():
        mine = next(r for r in owner_runs if r.data.tags.get("oodcorr.run_key") == key)
        assert run.info.status == "FINISHED" and run.data.params == mine.data.params
        loss = client.get_metric_history(run.info.run_id, "train/loss")
        assert [m.step for m in loss] == [
            m.step for m in owner_client.get_metric_history(mine.info.run_id, "train/loss")
        ]
        assert [m.value for m in loss] == pytest.approx(
            [m.value for m in owner_client.get_metric_history(mine.info.run_id, "train/loss")]
        )
        acc = client.get_metric_history(run.info.run_id, "acc/synth_overlap")
        assert len({m.timestamp for m in acc}) == len(acc) > 1  # one time per checkpoint: no vertical line
    assert "Running stage" not in sh(["dvc", "repro"], clone).stdout  # nothing recomputed
    assert sh(["oodcorr", "sync"], clone).stdout.count("rebuilt") == 0  # idempotent
