"""Credentials in a tracking URI: one masking function (oodcorr.core.credentials.mask_secrets) for every message and
file, never in params.yaml (DVC records params in dvc.lock and its run cache: refused with one line naming the
MLflow variables to use), and `oodcorr ui` pointed at a tracking server is one line, not a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from oodcorr.core.credentials import has_credentials, mask_secrets
from study_helpers import env
from test_train_helpers import make_project

SECRET = "s3cr3t@PW"  # an `@` in the password: the whole user info must be masked, not the part before it
TOKEN = "tok3nXYZ"


def test_mask_secrets():
    m = mask_secrets
    assert m(f"http://bob:{SECRET}@host:5000/api?x=1") == "http://***@host:5000/api?x=1"
    assert m(f"warning: MLflow at http://{TOKEN}@h:1/ unreachable") == "warning: MLflow at http://***@h:1/ unreachable"
    assert m("https://h/p?token=abc&run=2;api_key=zz") == "https://h/p?token=***&run=2;api_key=***"
    assert (
        m("postgresql://bob:pw@db/mlflow?sslmode=require&password=pw2")
        == "postgresql://***@db/mlflow?sslmode=require&password=***"
    )
    assert m("'http://a:b@h', 'c@d'") == "'http://***@h', 'c@d'"  # stops at the quote
    assert m(f"http://bob:{SECRET}@127.0.0.1:5/?token={SECRET}") == "http://***@127.0.0.1:5/?token=***"
    assert has_credentials("http://host/p@x")  # an `@` after a host may be a password holding `/`: refused
    for clean in ("sqlite:////home/a@b/mlruns/mlflow.db", "file:///x@y", "http://127.0.0.1:5000/", "me@example.org"):
        assert m(clean) == clean and not has_credentials(clean)


def test_log_records_are_masked(caplog):
    """urllib3 logs a failed request's path and query (MLflow puts a URI's query before /api/...)."""
    import logging

    from oodcorr.core.credentials import mask_logging

    mask_logging()
    mask_logging()  # idempotent
    logging.getLogger("urllib3.connectionpool").warning("Retrying after %s: %s", "refused", f"/?token={SECRET}/api/2.0")
    assert "token=***" in caplog.text and "s3cr3t" not in caplog.text and "PW" not in caplog.text


def _oodcorr(args, cwd, **extra):
    return subprocess.run(
        [sys.executable, "-m", "oodcorr", *args],
        cwd=cwd,
        env={**env(), **extra},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _one_error(res) -> str:
    out = res.stdout + res.stderr
    lines = [x for x in out.splitlines() if x.strip()]
    assert res.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), out
    assert SECRET not in out and TOKEN not in out and "s3cr3t" not in out and "Traceback" not in out, out
    return lines[0]


@pytest.mark.parametrize(
    "uri", [f"http://bob:{SECRET}@127.0.0.1:1/", f"http://{TOKEN}@127.0.0.1:1/", f"https://127.0.0.1:1/?token={TOKEN}"]
)
def test_credentials_in_params_are_refused_before_anything_runs(tmp_path, uri):
    p = make_project(tmp_path, {"a": {}})
    params = yaml.safe_load(p.read_text())
    params["study"]["tracking_uri"] = uri
    p.write_text(yaml.safe_dump(params))
    for args in (["study", "check"], ["train", "--run", "a"]):
        line = _one_error(_oodcorr(args, tmp_path))
        assert "study.tracking_uri" in line and "MLFLOW_TRACKING_PASSWORD" in line and "MLFLOW_TRACKING_TOKEN" in line
    assert not (tmp_path / "runs").exists() and not (tmp_path / "mlruns").exists()


def test_ui_with_a_tracking_server_is_one_line(tmp_path):
    make_project(tmp_path, {"a": {}})
    line = _one_error(
        _oodcorr(["ui", "--port", "5999"], tmp_path, MLFLOW_TRACKING_URI=f"http://{TOKEN}@127.0.0.1:1/?token={TOKEN}")
    )
    assert "MLFLOW_TRACKING_URI" in line and "http://127.0.0.1:1/" in line and "tracking server" in line, line
    assert "no experiment" not in line
