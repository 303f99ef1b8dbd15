"""README "Sharing through a DVC remote", followed literally with two clones and a local remote: the owner adds
data (`dvc add data/raw`), sets a default remote and pushes; a collaborator's `make setup` pulls it. When the
data was never pushed, `make setup` says so in one line (which data, which remote, what to do)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from study_helpers import BIN, REPO, make_project, sh, tiny_params


def readme_sharing() -> str:
    return (REPO / "README.md").read_text().split("## Sharing through a DVC remote\n", 1)[1].split("\n## ")[0]


def owner_project(tmp: Path) -> Path:
    """A study laid out like this repository, with its Makefile and the demo remote."""
    root = make_project(tmp / "owner", tiny_params(None))
    shutil.copy(REPO / "Makefile", root / "Makefile")
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    shutil.copytree(REPO / ".dvc" / "demo-remote", root / ".dvc" / "demo-remote")
    sh(["dvc", "remote", "add", "demo", "demo-remote"], root)
    tracked = yaml.safe_load((root / "data" / "raw.dvc").read_text())  # data.dvc at the top, as here
    tracked["outs"][0]["path"] = "data/raw"
    (root / "data.dvc").write_text(yaml.safe_dump(tracked, sort_keys=False))
    sh(["git", "rm", "-q", "data/raw.dvc"], root)
    sh(["git", "add", "-A"], root)
    sh(["git", "commit", "-qm", "layout"], root)
    return root


def make_setup(clone: Path, tmp: Path, check=True):
    """`make setup` with this environment's venv standing in (the install step is a no-op)."""
    stamp = tmp / "installed"
    stamp.touch()
    return sh(["make", "-s", "setup", f"VENV={BIN.parent}", f"STAMP={stamp}"], clone, check=check)


@pytest.mark.slow
def test_sharing_section_two_clones_and_a_local_remote(tmp_path):
    text = readme_sharing()
    for step in ("dvc remote add -d storage", "dvc push", "git add dvc.lock data.dvc .dvc/config",
                 "make setup && dvc pull"):
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
    sh(["git", "add", "data.dvc", ".dvc/config"], owner)  # (+ dvc.lock once `dvc repro` ran; not here)
    sh(["git", "commit", "-qm", "study results"], owner)
    clone = tmp_path / "collaborator"
    sh(["git", "clone", "-q", str(owner), str(clone)], tmp_path)
    make_setup(clone, tmp_path)
    assert (clone / "data" / "raw" / "new_set.csv").read_text() == (owner / "data" / "raw" / "new_set.csv").read_text()
    assert make_setup(clone, tmp_path).stdout == ""  # idempotent
    # (`dvc pull` of pipeline outputs and a no-op `dvc repro` after a pushed study: test_study_e2e.py)
    assert "data.dvc" not in sh(["dvc", "status", "data.dvc"], clone).stdout
