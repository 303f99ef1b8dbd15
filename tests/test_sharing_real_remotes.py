"""A saved study shared through real remotes, as a team would (issue 60): an OpenSSH server (key login, its storage
visible only inside sshd's own mount namespace) and moto's S3 server with authentication on, both on 127.0.0.1
(.ci/servers-up.sh; tests/remote_servers.py), through DVC's own dvc-ssh and dvc-s3 plugins.

The owner saves the simulated study of test_studies_saved.py with `oodcorr study save NAME --from DIR --remote team`;
a collaborator's fresh clone (its own credentials, `dvc remote modify --local`) runs `study verify` and `study
reanalyze --check`. Damage is done through the server (sftp, boto3): an altered object and a deleted one are named
by run and file; a server that is down and refused credentials are each one line with DVC's/the library's reason;
a save killed mid-push, run again, finishes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from remote_servers import RemoteFiles, add_remote, credentials, object_rel
from study_helpers import BIN, env, new_repo, sh
from test_studies_saved import source_project

KINDS = ["ssh", "s3"]
STUDY = "tiny"


@pytest.fixture(params=KINDS)
def servers(request):
    """The server of this kind (skipped with its reason when it could not start)."""
    return request.getfixturevalue(f"{request.param}_server"), request.param


def oodcorr(args: list, cwd: Path, check: bool = False) -> subprocess.CompletedProcess:
    return sh([BIN / "oodcorr", *args], cwd, check=check, AWS_EC2_METADATA_DISABLED="true")


def one_error(res: subprocess.CompletedProcess) -> str:
    """The one error line of a refused command (exit 2)."""
    assert res.returncode == 2, (res.returncode, res.stdout[-2000:], res.stderr[-2000:])
    lines = [ln for ln in res.stderr.splitlines() if ln.strip() and not ln.startswith("warning: ")]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr[-3000:]
    return lines[0]


def clone(repo: Path, to: Path, servers, kind: str) -> Path:
    """A collaborator's fresh clone with their own credentials (.dvc/config.local is never committed)."""
    sh(["git", "clone", "-q", repo, to], to.parent)
    credentials(to, servers, kind)
    return to


def file_objects(repo: Path, run: str) -> dict[str, str]:
    """{file inside the run: md5} of a saved run, from its folder listing in the owner's studies subrepo cache."""
    import yaml

    pointer = yaml.safe_load((repo / "studies" / STUDY / "runs" / f"{run}.dvc").read_text())
    dir_md5 = pointer["outs"][0]["md5"]
    listing = json.loads((repo / "studies" / ".dvc" / "cache" / object_rel(dir_md5)).read_text())  # the subrepo's
    return {e["relpath"]: e["md5"] for e in listing}


@pytest.fixture(scope="module", params=KINDS)
def saved(request, remote_servers, tmp_path_factory):
    """The owner's repository with the study saved on the `kind` server: one save per kind for this module's
    tests (each test undoes the damage it does on the server)."""
    kind = request.param
    if why := remote_servers.reason(kind):
        pytest.skip(why)
    tmp = tmp_path_factory.mktemp(f"owner-{kind}")
    src = source_project(tmp / "ran")
    repo = new_repo(tmp / "repo")
    prefix = f"studies-{uuid.uuid4().hex[:8]}"
    add_remote(repo, remote_servers, kind, prefix)
    res = oodcorr(["study", "save", STUDY, "--from", src, "--remote", "team"], repo)
    assert res.returncode == 0, res.stderr[-3000:]
    sh(["git", "add", "-A"], repo)
    sh(["git", "commit", "-qm", f"study {STUDY}"], repo)
    assert "secret_access_key" not in sh(["git", "show", "HEAD:.dvc/config"], repo).stdout
    return remote_servers, kind, repo, RemoteFiles(remote_servers, kind, prefix)


def test_the_ssh_remote_is_not_a_local_path(ssh_server, tmp_path):
    """What the test relies on: the folder the SSH url names is empty here, full on the server."""
    repo = new_repo(tmp_path / "repo")
    (repo / "a.txt").write_text("hello\n")
    sh(["dvc", "add", "-q", "a.txt"], repo)
    prefix = f"probe-{uuid.uuid4().hex[:8]}"
    url = add_remote(repo, ssh_server, "ssh", prefix)
    sh(["dvc", "push", "-q", "-r", "team"], repo)
    on_server = RemoteFiles(ssh_server, "ssh", prefix).list()
    assert on_server == [object_rel("b1946ac92492d2347c6235b4d2611184")]  # md5 of "hello\n"
    from fsspec.utils import infer_storage_options

    local = Path(infer_storage_options(url)["path"]).parent  # the url's path, on this machine
    assert local.is_dir() and not any(local.iterdir()), "the SSH remote's storage is readable as a local path"


def test_dvc_push_and_pull_through_each_server(servers, tmp_path):
    """DVC's own plugins against the servers: push, a fresh clone pulls the same bytes; refused credentials and a
    server that is down fail with DVC's reason."""
    servers, kind = servers
    repo = new_repo(tmp_path / "repo")
    (repo / "a.txt").write_text("hello\n")
    sh(["dvc", "add", "-q", "a.txt"], repo)
    add_remote(repo, servers, kind, f"probe-{uuid.uuid4().hex[:8]}", default=True)
    sh(["dvc", "push", "-q"], repo)
    sh(["git", "add", "-A"], repo)
    sh(["git", "commit", "-qm", "a"], repo)
    other = clone(repo, tmp_path / "clone", servers, kind)
    sh(["dvc", "pull", "-q"], other)
    assert (other / "a.txt").read_text() == "hello\n"

    credentials(other, servers, kind, wrong=True)
    (other / "a.txt").unlink()
    sh(["rm", "-rf", ".dvc/cache"], other)
    res = sh(["dvc", "pull"], other, check=False)
    assert res.returncode != 0 and not (other / "a.txt").exists()
    assert ("Permission denied" if kind == "ssh" else "403") in res.stderr, res.stderr[-2000:]


@pytest.mark.slow  # a saved study (an analysis) per kind
def test_a_fresh_clone_verifies_and_rebuilds_the_study(saved, tmp_path):
    servers, kind, repo, remote = saved
    assert any(p.startswith("files/md5/") for p in remote.list())
    other = clone(repo, tmp_path / "collaborator", servers, kind)
    res = oodcorr(["study", "verify", STUDY], other)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    res = oodcorr(["study", "reanalyze", STUDY, "--check"], other)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "2 run(s) analysed" in res.stdout and " differ" not in res.stdout, res.stdout


@pytest.mark.slow  # a saved study (an analysis) per kind
@pytest.mark.parametrize("damage", ["altered", "deleted"])
def test_a_damaged_object_on_the_server_is_named_by_run_and_file(saved, tmp_path, damage):
    servers, kind, repo, remote = saved
    rel, md5 = sorted(file_objects(repo, "b-s0").items())[0]
    obj = object_rel(md5)
    original = remote.read(obj)
    if damage == "altered":
        remote.flip(obj)
    else:
        remote.delete(obj)
    try:
        other = clone(repo, tmp_path / "collaborator", servers, kind)
        for args in (["study", "verify", STUDY], ["study", "reanalyze", STUDY, "--check"]):
            line = one_error(oodcorr(args, other))
            assert "b-s0" in line and rel in line, line
            assert ("altered" in line) if damage == "altered" else ("not in the team remote" in line), line
            assert "a-s0" not in line, line  # the intact run is not blamed
    finally:
        remote.write(obj, original)  # the module's other tests share the save


@pytest.mark.slow  # a saved study (an analysis) per kind
def test_a_server_that_is_down_is_said_in_one_line(saved, tmp_path):
    servers, kind, repo, remote = saved
    other = clone(repo, tmp_path / "collaborator", servers, kind)
    if kind == "ssh":
        servers.script("--ssh-stop")  # sshd stopped; its storage kept for the restart
        reason = "Connect call failed"
    else:  # moto keeps its objects in memory: the endpoint of a server that stopped is a closed port
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        sh(["dvc", "remote", "modify", "--local", "team", "endpointurl", f"http://127.0.0.1:{port}"], other)
        reason = "Could not connect to the endpoint URL"
    try:
        for args in (["study", "verify", STUDY], ["study", "reanalyze", STUDY, "--check"]):
            line = one_error(oodcorr(args, other))
            assert "cannot reach" in line and "team" in line and reason in line, line
            assert "not in the" not in line, line  # not the wrong diagnosis of issue 60
    finally:
        if kind == "ssh":
            servers.script()
    assert oodcorr(["study", "verify", STUDY], clone(repo, tmp_path / "later", servers, kind)).returncode == 0


@pytest.mark.slow  # a saved study (an analysis) per kind
def test_refused_credentials_are_said_in_one_line(saved, tmp_path):
    servers, kind, repo, remote = saved
    other = clone(repo, tmp_path / "collaborator", servers, kind)
    credentials(other, servers, kind, wrong=True)
    line = one_error(oodcorr(["study", "verify", STUDY], other))
    assert "the team remote" in line and "refused the credentials" in line and "not in the" not in line, line
    said = ("Permission denied",) if kind == "ssh" else ("SignatureDoesNotMatch", "InvalidAccessKeyId", "Forbidden")
    assert any(w in line for w in said), line  # the server's own refusal, not "missing"
    assert servers.env.get("OODCORR_S3_CREDENTIALS", "") not in line


@pytest.mark.slow  # a saved study (an analysis) per kind
def test_a_save_killed_mid_push_then_run_again_finishes(servers, tmp_path):
    servers, kind = servers
    src = source_project(tmp_path / "ran")
    repo = new_repo(tmp_path / "repo")
    prefix = f"killed-{uuid.uuid4().hex[:8]}"
    add_remote(repo, servers, kind, prefix)
    remote = RemoteFiles(servers, kind, prefix)
    cmd = [BIN / "oodcorr", "study", "save", STUDY, "--from", src, "--remote", "team"]
    proc = subprocess.Popen(
        [str(c) for c in cmd],
        cwd=repo,
        env=env(AWS_EC2_METADATA_DISABLED="true"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: the kill reaches `dvc push` too
    )
    seen = []
    deadline = time.monotonic() + 600
    while proc.poll() is None and not seen and time.monotonic() < deadline:
        seen = remote.list()
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert seen, "the save ended before any object reached the server"
    partial = len(remote.list())

    res = oodcorr(cmd[1:], repo)
    assert res.returncode == 0, res.stderr[-3000:]
    full = remote.list()
    assert len(full) > partial, (partial, len(full))
    sh(["git", "add", "-A"], repo)
    sh(["git", "commit", "-qm", "saved"], repo)
    other = clone(repo, tmp_path / "collaborator", servers, kind)
    res = oodcorr(["study", "verify", STUDY], other)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]


@pytest.mark.parametrize(
    "url,secret",
    [
        ("ssh://alice@storage.example.org/srv/studies", False),  # DVC's documented SSH form: a user name
        ("ssh://alice@127.0.0.1:2222/srv/studies", False),
        ("s3://bucket/studies", False),
        ("ssh://alice:hunter2@storage.example.org/srv/studies", True),
        ("https://u:p@dav.example.org/studies", True),
    ],
)
def test_a_user_name_in_a_remote_url_is_not_a_secret_a_password_is(tmp_path, url, secret):
    from oodcorr.launch.share_guard import committed_secrets

    config = tmp_path / "config"
    config.write_text(f"[core]\n    remote = team\n['remote \"team\"']\n    url = {url}\n")
    assert committed_secrets(config) == ([("team", "url (user:password@)")] if secret else [])
