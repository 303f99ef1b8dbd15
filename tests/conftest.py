"""Shared test set-up: offline hub, no DVC analytics, a private model cache per session is NOT used
(the converted SmolLM2 / tiny models are cached once in ~/.cache/oodcorr like on a user's machine)."""

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.pop("MLFLOW_TRACKING_URI", None)

import oodcorr  # noqa: E402,F401  (its __init__ pins MKL's strict mode before any test module imports torch)

REPO = Path(__file__).resolve().parents[1]
SHARED_NLI = REPO.parent / "shared" / "data" / "nli"


@pytest.fixture
def shared_nli() -> Path:
    """The real NLI files (read-only); tests that need them skip cleanly when absent."""
    if not SHARED_NLI.is_dir():
        pytest.skip(f"real NLI data not found at {SHARED_NLI}")
    return SHARED_NLI


@pytest.fixture
def mlflow_uri(tmp_path, monkeypatch) -> str:
    """A private sqlite MLflow store for one test."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri


# params.yaml at the top of this repository is the user's: they add testsets, switch presets, tune runs. No test
# may read it (tests build their own params: study_helpers.tiny_params, quickstart_text, load_preset), so a
# user's edits can never fail the suite. Every open() in the test process is audited; a test that opens that
# file fails, naming it.
USER_FILES = frozenset({str(REPO / "params.yaml")})
USER_FILES_OPENED: list[str] = []


def _audit_open(event: str, args: tuple) -> None:
    if event != "open" or not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    try:
        path = os.path.abspath(os.fsdecode(args[0]))
    except (TypeError, ValueError, OSError):
        return
    if path in USER_FILES:
        USER_FILES_OPENED.append(path)


sys.addaudithook(_audit_open)


@pytest.fixture(autouse=True)
def _tests_never_read_the_users_params():
    del USER_FILES_OPENED[:]
    yield
    if USER_FILES_OPENED:
        opened = sorted(set(USER_FILES_OPENED))
        del USER_FILES_OPENED[:]
        pytest.fail(
            f"the test opened {', '.join(opened)}, the user's params.yaml: build the test's own params "
            f"(tests/study_helpers.py: tiny_params, quickstart_text; oodcorr.study.load_preset)",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def remote_servers():
    """The sharing tests' SSH and S3 servers (tests/remote_servers.py): CI's, else started here for the session
    and stopped at its end."""
    from remote_servers import Servers, from_env, run_script

    servers = from_env()
    if servers is not None:
        yield servers
        return
    import shutil
    import tempfile

    # not under pytest's own tmp folder (mode 700): sshd's login user must reach its key list and its storage
    where = Path(tempfile.mkdtemp(prefix="oodcorr-servers-"))
    where.chmod(0o755)
    servers = Servers(run_script(where))
    try:
        yield servers
    finally:
        run_script(where, "--down")
        shutil.rmtree(where, ignore_errors=True)


@pytest.fixture
def ssh_server(remote_servers):
    if reason := remote_servers.reason("ssh"):
        pytest.skip(reason)
    return remote_servers


@pytest.fixture
def s3_server(remote_servers):
    if reason := remote_servers.reason("s3"):
        pytest.skip(reason)
    return remote_servers
