"""Saved studies under hostile changes (docs/studies.md, "Integrity"): a save copies exactly what the project's
dvc.lock recorded and never follows a link; a reanalysis checks every object against its name, every run
against its .dvc file and the study's dvc.lock before analysing, and on a mismatch names the run and the file,
exits 2 and writes no table; a study whose objects are not all in its remote is reported INCOMPLETE. Each case
runs the real `oodcorr` command on a real DVC repository holding a saved study (one save, shared)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from study_helpers import BIN, sh
from test_studies_saved import lock_entries, source_project

pytestmark = pytest.mark.slow
SECRET = b"s3cr3t-do-not-share"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """(the source project, a git + DVC repository with study `demo` saved from it and committed)."""
    tmp = tmp_path_factory.mktemp("integrity")
    src = source_project(tmp / "ran")
    repo = tmp / "repo"
    repo.mkdir()
    sh(["git", "init", "-q"], repo)
    sh(["dvc", "init", "-q"], repo)
    sh(["git", "commit", "-qm", "init"], repo)
    sh([BIN / "oodcorr", "study", "save", "demo", "--from", src], repo)
    sh(["git", "add", "-A"], repo)
    sh(["git", "commit", "-qm", "study demo"], repo)
    return src, repo


def clone(repo: Path, to: Path) -> Path:
    sh(["git", "clone", "-q", repo, to], to.parent)
    return to


def oodcorr(args, cwd: Path):
    return sh([BIN / "oodcorr", *map(str, args)], cwd, check=False)


def one_error(res) -> str:
    """The command failed with exactly one `error:` line and no traceback; that line."""
    out = res.stdout + res.stderr
    assert res.returncode == 2 and "Traceback" not in out, out
    errors = [x for x in out.splitlines() if x.startswith("error: ")]
    assert len(errors) == 1, out
    return errors[0]


def listing(repo: Path, key: str) -> dict[str, str]:
    """{relpath: md5} of a saved run, from its .dvc file and the committed remote."""
    import yaml

    md5 = yaml.safe_load((repo / "studies" / "demo" / "runs" / f"{key}.dvc").read_text())["outs"][0]["md5"]
    return {e["relpath"]: e["md5"] for e in json.loads(remote_object(repo, md5).read_text())}


def remote_object(repo: Path, md5: str) -> Path:
    return repo / ".dvc" / "studies-remote" / "files" / "md5" / md5[:2] / md5[2:]


def shifted(path: Path, out: Path) -> None:
    """A valid predictions file with every log-prob moved (what a tampered object holds)."""
    t = pq.read_table(path)
    lp = pa.array(np.asarray(t.column("logp_entailment").to_numpy(), dtype="float32") + np.float32(0.5))
    pq.write_table(t.set_column(t.column_names.index("logp_entailment"), "logp_entailment", lp), out)


def commit(repo: Path, msg: str) -> None:
    sh(["git", "add", "-A"], repo)
    sh(["git", "commit", "-qm", msg], repo)


def tables_untouched(repo: Path) -> None:
    assert sh(["git", "status", "--porcelain", "studies/demo/results"], repo).stdout == ""


# ------------------------------------------------------------------------------------------------ save


def test_save_refuses_a_prediction_changed_after_dvc_lock_recorded_it(saved, tmp_path):
    src, repo = saved
    work, ran = clone(repo, tmp_path / "work"), tmp_path / "ran"
    shutil.copytree(src, ran)
    f = ran / "runs" / "a-s0" / "eval" / "summary.json"
    f.write_text('{"step": 80}')
    line = one_error(oodcorr(["study", "save", "other", "--from", ran], work))
    assert "run a-s0: eval/summary.json" in line and "dvc.lock" in line and "dvc repro evaluate@a-s0" in line, line
    assert not (work / "studies" / "other").exists()  # nothing half-written
    shutil.copy(src / "runs" / "a-s0" / "eval" / "summary.json", f)
    shifted(
        src / "runs" / "b-s0" / "eval" / "predictions" / "step-0" / "hans.parquet",
        ran / "runs" / "b-s0" / "eval" / "predictions" / "step-0" / "hans.parquet",
    )
    line = one_error(oodcorr(["study", "save", "other", "--from", ran], work))
    assert "run b-s0: eval/predictions" in line and "is not what" in line, line
    assert not (work / "studies" / "other").exists() and not any((work / ".dvc" / "studies-remote").glob("x*"))


def test_save_refuses_a_symlink_and_a_fifo_anywhere_in_a_run(saved, tmp_path):
    import os

    src, repo = saved
    work, ran = clone(repo, tmp_path / "work"), tmp_path / "ran"
    shutil.copytree(src, ran)
    secret = tmp_path / "secret.parquet"
    secret.write_bytes(SECRET)
    target = ran / "runs" / "a-s0" / "eval" / "predictions" / "step-0" / "hans.parquet"
    target.unlink()
    target.symlink_to(secret)
    res = oodcorr(["study", "save", "other", "--from", ran], work)
    line = one_error(res)
    assert "symbolic link" in line and "step-0/hans.parquet" in line, line
    assert "git add" not in res.stdout
    stored = [p for p in work.rglob("*") if p.is_file() and not p.is_symlink() and SECRET in p.read_bytes()]
    assert stored == [] and not (work / "studies" / "other").exists()

    target.unlink()
    shutil.copy(src / "runs" / "a-s0" / "eval" / "predictions" / "step-0" / "hans.parquet", target)
    os.mkfifo(ran / "runs" / "a-s0" / "checkpoints" / "pipe")
    assert "not a regular file" in one_error(oodcorr(["study", "save", "other", "--from", ran], work))


# ------------------------------------------------------------------------------------------------ reanalyze


def test_a_tampered_object_in_the_remote_is_named_and_no_table_is_written(saved, tmp_path):
    _, repo = saved
    work = clone(repo, tmp_path / "work")
    rel = "eval/predictions/step-10/hans.parquet"
    obj = remote_object(work, listing(work, "a-s0")[rel])
    obj.chmod(0o644)
    shifted(obj, tmp_path / "t.parquet")
    obj.write_bytes((tmp_path / "t.parquet").read_bytes())
    commit(work, "tampered")
    fresh = clone(work, tmp_path / "fresh")
    for args in (["--check"], []):
        line = one_error(oodcorr(["study", "reanalyze", "demo", *args], fresh))
        assert f"run a-s0: {rel}" in line and "altered" in line and "no table was written" in line, line
        tables_untouched(fresh)
    assert "INCOMPLETE or altered" in one_error(oodcorr(["study", "verify", "demo"], fresh))


def test_a_pointer_to_another_runs_object_is_named(saved, tmp_path):
    _, repo = saved
    work = clone(repo, tmp_path / "work")
    runs = work / "studies" / "demo" / "runs"
    (runs / "a-s0.dvc").write_text((runs / "b-s0.dvc").read_text().replace("path: b-s0", "path: a-s0"))
    commit(work, "wrong pointer")
    fresh = clone(work, tmp_path / "fresh")
    line = one_error(oodcorr(["study", "reanalyze", "demo", "--check"], fresh))
    assert "run a-s0: eval/metrics.jsonl is not what studies/demo/dvc.lock recorded for evaluate@a-s0" in line, line
    tables_untouched(fresh)


def test_a_copy_changed_after_the_pull_is_named(saved, tmp_path):
    _, repo = saved
    work = clone(repo, tmp_path / "work")
    sh([BIN / "oodcorr", "study", "reanalyze", "demo", "--check"], work)
    f = work / "studies" / "demo" / "runs" / "b-s0" / "eval" / "predictions" / "step-0" / "anli.parquet"
    f.chmod(0o644)
    shifted(f, f)
    line = one_error(oodcorr(["study", "reanalyze", "demo", "--check", "--no-pull"], work))
    assert "run b-s0: eval/predictions/step-0/anli.parquet: content md5" in line, line


def test_a_missing_object_says_which_run_and_file_and_what_to_do(saved, tmp_path):
    _, repo = saved
    work = clone(repo, tmp_path / "work")
    rel = "eval/metrics.jsonl"
    remote_object(work, listing(work, "b-s0")[rel]).unlink()
    commit(work, "object lost")
    fresh = clone(work, tmp_path / "fresh")
    line = one_error(oodcorr(["study", "reanalyze", "demo", "--check"], fresh))
    assert f"run b-s0: {rel}" in line and "not in the studies remote" in line and "push -r studies" in line, line
    assert "failed" not in line


def test_an_interrupted_push_leaves_a_study_reported_incomplete(saved, tmp_path):
    """A save killed as `dvc push` started, then committed (as `--no-push`, then commit): `study save` says
    INCOMPLETE, `study verify` and a fresh clone's reanalysis name what is missing; no 'No remote provided'."""
    import yaml

    src, repo = saved
    work, ran = clone(repo, tmp_path / "work"), tmp_path / "ran"
    shutil.copytree(src, ran)  # runs of their own (objects the remote does not hold yet), recorded in dvc.lock
    lock = yaml.safe_load((ran / "dvc.lock").read_text())
    for key in ("a-s0", "b-s0"):
        (ran / "runs" / key / "eval" / "summary.json").write_text('{"step": 90, "late": true}')
        lock["stages"].update(lock_entries(ran, key))
    (ran / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=False))
    res = sh([BIN / "oodcorr", "study", "save", "late", "--from", ran, "--no-push"], work)
    assert "INCOMPLETE until pushed" in res.stdout, res.stdout
    dvc_file = work / "studies" / "late" / "runs" / "a-s0.dvc"
    doc = yaml.safe_load(dvc_file.read_text())
    del doc["outs"][0]["remote"]  # killed before the .dvc file named its remote, too
    dvc_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    commit(work, "late, never pushed")
    fresh = clone(work, tmp_path / "fresh")
    line = one_error(oodcorr(["study", "verify", "late"], fresh))
    assert "INCOMPLETE" in line and "run a-s0" in line and "not in the studies remote" in line, line
    line = one_error(oodcorr(["study", "reanalyze", "late", "--check"], fresh))
    assert "No remote provided" not in line and "not in the studies remote" in line and "push -r" in line, line
    assert "complete: 2 run(s)" in sh([BIN / "oodcorr", "study", "verify", "demo"], fresh).stdout

    # pushed at last (the next save pushes what the interrupted one left out): complete, and the link-less
    # .dvc file pulls from the studies remote all the same
    sh([BIN / "dvc", "push", "-q", "-r", "studies", "late/runs/a-s0.dvc", "late/runs/b-s0.dvc"], work / "studies")
    commit(work, "pushed")
    fresh2 = clone(work, tmp_path / "fresh2")
    assert "late: complete" in sh([BIN / "oodcorr", "study", "verify", "late"], fresh2).stdout
    res = sh([BIN / "oodcorr", "study", "reanalyze", "late", "--check"], fresh2)
    assert "identical" in res.stdout and " differ" not in res.stdout


def test_a_results_symlink_is_one_line(saved, tmp_path):
    _, repo = saved
    work = clone(repo, tmp_path / "work")
    results = work / "studies" / "demo" / "results"
    before = sorted(p.name for p in results.iterdir())
    shutil.move(results, tmp_path / "elsewhere")
    results.symlink_to(tmp_path / "elsewhere")
    line = one_error(oodcorr(["study", "reanalyze", "demo"], work))
    assert "results is a symbolic link" in line, line
    assert sorted(p.name for p in (tmp_path / "elsewhere").iterdir()) == before  # nothing removed through it
