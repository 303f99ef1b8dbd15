"""Saved studies on a remote other than the in-repository folder (docs/studies.md, "Sharing a study"): a folder
outside the project (named and refused without --allow-outside) and a real S3-compatible server (moto's server
mode on 127.0.0.1, DVC's own dvc-s3 plugin). Every object is asked of the remote itself: an altered or deleted
object names its run and file, a server that is down is said as such with the library's reason, a credential in
the committed .dvc/config is refused before anything is written, and a failed save leaves nothing staged."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from study_helpers import BIN, new_repo, sh
from test_studies_integrity import clone, commit, one_error, oodcorr
from test_studies_saved import lock_entries, source_project

pytestmark = pytest.mark.slow
S3_ENV = {"AWS_EC2_METADATA_DISABLED": "true"}


def staged(repo: Path) -> str:
    return sh(["git", "diff", "--cached", "--name-only"], repo).stdout.strip()


def objects(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def pointer(repo: Path, study: str, key: str) -> dict:
    return yaml.safe_load((repo / "studies" / study / "runs" / f"{key}.dvc").read_text())["outs"][0]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    return source_project(tmp_path_factory.mktemp("ran") / "ran")


def test_a_folder_remote_outside_the_project_is_named_before_anything_is_written(source, tmp_path):
    repo = new_repo(tmp_path / "repo")
    drop = tmp_path / "x" / "drop"
    sh(["dvc", "remote", "add", "shared", "../x/drop"], repo)  # stored as ../../x/drop (relative to .dvc/)
    commit(repo, "shared remote")
    line = one_error(oodcorr(["study", "save", "demo", "--from", source, "--remote", "shared"], repo))
    assert str(drop) in line and "outside this project" in line and "--allow-outside" in line, line
    assert not drop.exists() and not (repo / "studies").exists() and staged(repo) == ""

    res = sh(
        [BIN / "oodcorr", "study", "save", "demo", "--from", source, "--remote", "shared", "--allow-outside"], repo
    )
    assert f"pushing to {drop}" in res.stderr and "pushed to the shared remote" in res.stdout, res.stdout + res.stderr
    assert pointer(repo, "demo", "a-s0")["remote"] == "shared"
    assert "studies-remote" not in res.stdout and not (repo / ".dvc" / "studies-remote").exists()
    assert (repo / "studies" / "demo" / "runs" / ".gitignore").read_text().splitlines()[-1] == "/*/"
    commit(repo, "study demo")
    fresh = clone(repo, tmp_path / "fresh")
    assert "demo: complete: 2 run(s)" in sh([BIN / "oodcorr", "study", "verify", "demo"], fresh).stdout
    res = sh([BIN / "oodcorr", "study", "reanalyze", "demo", "--check"], fresh)
    assert "identical" in res.stdout and " differ" not in res.stdout, res.stdout

    # an object altered, then one deleted, on the remote itself: named by run and file
    listing = {e["relpath"]: e["md5"] for e in json.loads(dir_object(drop, pointer(fresh, "demo", "b-s0")))}
    rel = "eval/metrics.jsonl"
    obj = drop / "files" / "md5" / listing[rel][:2] / listing[rel][2:]
    obj.chmod(0o644)
    obj.write_text(obj.read_text() + "\n")
    line = one_error(oodcorr(["study", "verify", "demo"], fresh))
    assert f"run b-s0: {rel}" in line and "does not match its name" in line, line
    obj.unlink()
    line = one_error(oodcorr(["study", "verify", "demo"], fresh))
    assert f"run b-s0: {rel}" in line and "is not in the shared remote" in line, line


def dir_object(remote: Path, out: dict) -> str:
    return (remote / "files" / "md5" / out["md5"][:2] / out["md5"][2:]).read_text()


def test_a_missing_plugin_and_a_committed_secret_are_one_line_and_nothing_is_staged(source, tmp_path):
    repo = new_repo(tmp_path / "repo")
    sh(["dvc", "remote", "add", "far", "hdfs://127.0.0.1:1/x"], repo)
    line = one_error(oodcorr(["study", "save", "demo", "--from", source, "--remote", "far"], repo))
    assert "pip install dvc-hdfs" in line and "requires 'dvc-hdfs'" in line and "not in the" not in line, line
    assert staged(repo) == "" and not (repo / "studies" / "demo").exists()

    sh(["dvc", "remote", "add", "s3", "s3://bucket/x"], repo)
    sh(["dvc", "remote", "modify", "s3", "secret_access_key", "s3cr3t-value"], repo)  # committed config
    res = oodcorr(["study", "save", "demo", "--from", source, "--remote", "s3"], repo)
    line = one_error(res)
    assert "'s3'" in line and "secret_access_key" in line and "dvc remote modify --local s3" in line, line
    assert "s3cr3t-value" not in res.stdout + res.stderr and "git add" not in res.stdout
    assert staged(repo) == "" and not (repo / "studies" / "demo").exists()


def test_bad_predictions_are_refused_before_anything_is_saved(source, tmp_path):
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    ran, repo = tmp_path / "ran", new_repo(tmp_path / "repo")
    shutil.copytree(source, ran)
    path = sorted((ran / "runs" / "b-s0" / "eval" / "predictions").glob("step-*/*.parquet"))[3]
    t = pq.read_table(path)
    lp = np.asarray(t.column("logp_entailment").to_numpy(), dtype="float64")
    lp[5] = np.nan
    pq.write_table(t.set_column(t.column_names.index("logp_entailment"), "logp_entailment", pa.array(lp)), path)
    lock = yaml.safe_load((ran / "dvc.lock").read_text())
    lock["stages"].update(lock_entries(ran, "b-s0"))  # recorded, as a buggy scorer's stage would leave it
    (ran / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=False))
    line = one_error(oodcorr(["study", "save", "demo", "--from", ran], repo))
    assert "run 'b-s0'" in line and str(path) in line and "not finite" in line, line
    assert not (repo / "studies").exists() and not (repo / ".dvc" / "studies-remote").exists() and staged(repo) == ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def s3(tmp_path):
    """A moto S3 server on 127.0.0.1 with bucket `studies`; (endpoint, the server process)."""
    pytest.importorskip("dvc_s3")
    pytest.importorskip("moto")
    port = free_port()
    proc = subprocess.Popen(
        [BIN / "moto_server", "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    import boto3

    client = boto3.client(
        "s3", endpoint_url=url, aws_access_key_id="k", aws_secret_access_key="s", region_name="us-east-1"
    )
    for _ in range(100):
        try:
            client.create_bucket(Bucket="studies")
            break
        except Exception:  # noqa: BLE001 - not listening yet
            time.sleep(0.2)
    yield url, proc
    proc.kill()
    proc.wait()


def s3_remote(repo: Path, endpoint: str) -> None:
    sh(["dvc", "remote", "add", "team", "s3://studies/oodcorr"], repo)
    sh(["dvc", "remote", "modify", "team", "endpointurl", endpoint], repo)
    sh(["dvc", "remote", "modify", "--local", "team", "access_key_id", "k"], repo)
    sh(["dvc", "remote", "modify", "--local", "team", "secret_access_key", "s"], repo)


def test_a_study_on_an_s3_server_saves_verifies_and_reanalyses_and_a_stopped_server_is_said(source, s3, tmp_path):
    endpoint, server = s3
    repo = new_repo(tmp_path / "repo")
    s3_remote(repo, endpoint)
    res = sh([BIN / "oodcorr", "study", "save", "demo", "--from", source, "--remote", "team"], repo, **S3_ENV)
    assert "pushed to the team remote" in res.stdout and "INCOMPLETE" not in res.stdout, res.stdout
    assert "config.local" not in res.stdout and ".dvc/config" in res.stdout
    commit(repo, "study demo")
    fresh = clone(repo, tmp_path / "fresh")
    shutil.copy(repo / ".dvc" / "config.local", fresh / ".dvc" / "config.local")  # the collaborator's own keys
    res = sh([BIN / "oodcorr", "study", "verify", "demo"], fresh, **S3_ENV)
    assert "complete: 2 run(s)" in res.stdout and "team remote" in res.stdout, res.stdout
    res = sh([BIN / "oodcorr", "study", "reanalyze", "demo", "--check"], fresh, **S3_ENV)
    assert "identical" in res.stdout and " differ" not in res.stdout, res.stdout

    import boto3

    client = boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id="k", aws_secret_access_key="s", region_name="us-east-1"
    )
    md5 = pointer(fresh, "demo", "a-s0")["md5"]
    listing = json.loads(client.get_object(Bucket="studies", Key=key_of(md5))["Body"].read())
    victim = next(e for e in listing if e["relpath"].endswith(".parquet"))
    client.put_object(Bucket="studies", Key=key_of(victim["md5"]), Body=b"not the predictions")
    line = one_error(sh_s3(["study", "verify", "demo"], fresh))
    assert f"run a-s0: {victim['relpath']}" in line and "does not match its name" in line, line
    client.delete_object(Bucket="studies", Key=key_of(victim["md5"]))
    line = one_error(sh_s3(["study", "reanalyze", "demo", "--check"], fresh))
    assert f"run a-s0: {victim['relpath']}" in line and "is not in the team remote" in line, line

    server.kill()
    server.wait()
    line = one_error(sh_s3(["study", "verify", "demo"], fresh))
    assert "cannot reach the team remote s3://studies/oodcorr" in line and "not in the" not in line, line
    assert "Connect call failed" in line or "Could not connect" in line, line
    other = new_repo(tmp_path / "other")
    s3_remote(other, endpoint)
    res = sh_s3(["study", "save", "demo", "--from", source, "--remote", "team"], other)
    line = one_error(res)
    assert "cannot reach the team remote" in line and "Having any troubles" not in line, line
    assert staged(other) == "" and not (other / "studies").exists() and "git add" not in res.stdout


def key_of(md5: str) -> str:
    return f"oodcorr/files/md5/{md5[:2]}/{md5[2:]}"


def sh_s3(args, cwd: Path):
    return sh([BIN / "oodcorr", *map(str, args)], cwd, check=False, **S3_ENV)


def test_credentials_the_server_refuses_are_said_before_anything_is_written(source, tmp_path):
    """moto with authentication on: an unknown access key is one line saying the remote refused it."""
    pytest.importorskip("dvc_s3")
    pytest.importorskip("moto")
    port = free_port()
    proc = subprocess.Popen(
        [BIN / "moto_server", "-H", "127.0.0.1", "-p", str(port)],
        env=env_with(INITIAL_NO_AUTH_ACTION_COUNT="0"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        repo = new_repo(tmp_path / "repo")
        s3_remote(repo, f"http://127.0.0.1:{port}")
        res = sh_s3(["study", "save", "demo", "--from", source, "--remote", "team"], repo)
        line = one_error(res)
        assert "the team remote s3://studies/oodcorr refused the credentials" in line, line
        assert "InvalidAccessKeyId" in line, line
        assert staged(repo) == "" and not (repo / "studies").exists() and "git add" not in res.stdout
    finally:
        proc.kill()
        proc.wait()


def env_with(**extra) -> dict:
    from study_helpers import env

    return env(**extra)
