"""Saved studies under the faults a team meets (docs/studies.md, "Share a study through a remote"): a save
SIGKILLed mid-push then run again finishes the save (a cut-short object on the remote is found by its md5 and
written again); a disk that fills during the push leaves nothing staged and no study folder; two collaborators
saving the same study merge with conflicts only in the tables, a save refuses the conflict markers, and
`study reanalyze` after the merge rebuilds the tables from both sides' runs; `study verify --all` tells a
damaged study from an intact one."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from study_helpers import BIN, env, sh
from test_studies_integrity import clone, commit, one_error, oodcorr
from test_studies_remotes import new_repo, staged
from test_studies_saved import source_project

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    return source_project(tmp_path_factory.mktemp("ran") / "ran")


def remote_objects(repo: Path) -> list[Path]:
    folder = repo / ".dvc" / "studies-remote"
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def test_a_save_killed_mid_push_then_run_again_finishes_the_save(source, tmp_path):
    repo = new_repo(tmp_path / "repo")
    proc = subprocess.Popen(
        [BIN / "oodcorr", "study", "save", "demo", "--from", source],
        cwd=repo,
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + 600
    while len(remote_objects(repo)) < 10 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)  # oodcorr and its `dvc push`, as a closed terminal would
    proc.wait()
    written = remote_objects(repo)
    assert written, "the push had not started"
    victim = written[len(written) // 2]  # a write cut short: half its bytes
    victim.chmod(0o644)
    victim.write_bytes(victim.read_bytes()[: max(1, victim.stat().st_size // 2)])

    res = sh([BIN / "oodcorr", "study", "save", "demo", "--from", source], repo)
    assert "saved 2 run(s)" in res.stdout and "INCOMPLETE" not in res.stdout, res.stdout
    assert sh(["md5sum", victim], repo).stdout.split()[0] == victim.parent.name + victim.name.removesuffix(".dir")
    commit(repo, "study demo")
    fresh = clone(repo, tmp_path / "fresh")
    assert "demo: complete: 2 run(s)" in sh([BIN / "oodcorr", "study", "verify", "demo"], fresh).stdout
    res = sh([BIN / "oodcorr", "study", "reanalyze", "demo", "--check"], fresh)
    assert "identical" in res.stdout and " differ" not in res.stdout, res.stdout


def test_a_disk_that_fills_during_the_push_leaves_nothing_half_committed(source, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    repo = new_repo(tmp_path / "repo")
    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", small], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        sh(["dvc", "remote", "add", "small", str(small / "remote")], repo)
        commit(repo, "a small remote")
        res = oodcorr(["study", "save", "demo", "--from", source, "--remote", "small", "--allow-outside"], repo)
        line = one_error(res)
        assert "No space left on device" in line and "ERROR" in line and "Having any troubles" not in line, line
        assert staged(repo) == "" and not (repo / "studies").exists(), staged(repo)
        assert "git add" not in res.stdout
    finally:
        subprocess.run(["umount", small], check=False)


def test_two_collaborators_saving_one_study_merge_and_the_tables_rebuild(source, tmp_path):
    origin = new_repo(tmp_path / "origin")
    alice, bob = clone(origin, tmp_path / "alice"), clone(origin, tmp_path / "bob")
    for who, key in ((alice, "a-s0"), (bob, "b-s0")):
        sh([BIN / "oodcorr", "study", "save", "shared", "--from", source, "--run", key], who)
        commit(who, f"shared: {key}")
    sh(["git", "pull", "-q", "--no-rebase", str(alice), "HEAD"], bob, check=False)  # the merge conflicts
    conflicted = sh(["git", "diff", "--name-only", "--diff-filter=U"], bob).stdout.split()
    assert conflicted and all(p.startswith("studies/shared/results/") for p in conflicted), conflicted
    line = one_error(oodcorr(["study", "save", "shared", "--from", source], bob))
    assert "conflict markers" in line and "oodcorr study reanalyze shared" in line, line

    sh(["git", "checkout", "--theirs", "studies/shared/results"], bob)
    res = sh([BIN / "oodcorr", "study", "reanalyze", "shared"], bob)
    assert "2 run(s) analysed" in res.stdout, res.stdout
    commit(bob, "merged: both runs")
    fresh = clone(bob, tmp_path / "fresh")
    assert "shared: complete: 2 run(s)" in sh([BIN / "oodcorr", "study", "verify", "shared"], fresh).stdout
    res = sh([BIN / "oodcorr", "study", "reanalyze", "shared", "--check"], fresh)
    assert "identical" in res.stdout and " differ" not in res.stdout, res.stdout
    assert (fresh / "studies" / "shared" / "runs" / ".gitignore").read_text().splitlines()[-1] == "/*/"


def test_verify_all_tells_a_damaged_study_from_an_intact_one(source, tmp_path):
    repo = new_repo(tmp_path / "repo")
    for name in ("alpha", "beta"):
        sh([BIN / "oodcorr", "study", "save", name, "--from", source, "--run", "a-s0"], repo)
    commit(repo, "two studies")
    shutil.copytree(source, tmp_path / "ran2")
    ran2 = tmp_path / "ran2"
    (ran2 / "runs" / "b-s0" / "eval" / "summary.json").write_text('{"step": 90, "beta": true}')
    from test_studies_saved import lock_entries

    lock = yaml.safe_load((ran2 / "dvc.lock").read_text())
    lock["stages"].update(lock_entries(ran2, "b-s0"))
    (ran2 / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=False))
    params = yaml.safe_load((ran2 / "params.yaml").read_text())
    params["study"]["name"] = "gamma"
    (ran2 / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    sh([BIN / "oodcorr", "study", "save", "gamma", "--from", ran2, "--run", "b-s0"], repo)
    commit(repo, "gamma")
    md5 = yaml.safe_load((repo / "studies" / "gamma" / "runs" / "b-s0.dvc").read_text())["outs"][0]["md5"]
    import json

    listing = json.loads((repo / ".dvc" / "studies-remote" / "files" / "md5" / md5[:2] / md5[2:]).read_text())
    summary = next(e["md5"] for e in listing if e["relpath"] == "eval/summary.json")
    (repo / ".dvc" / "studies-remote" / "files" / "md5" / summary[:2] / summary[2:]).unlink()  # only gamma's
    res = oodcorr(["study", "verify", "--all"], repo)
    out = res.stdout + res.stderr
    assert res.returncode == 2 and "Traceback" not in out, out
    assert "study alpha: complete" in out and "study beta: complete" in out, out
    assert "study gamma: DAMAGED (run(s) b-s0)" in out and "eval/summary.json" in out, out
    assert "1 of 3 studies damaged: gamma" in out, out
