"""MLflow for a team (issue 60): one `mlflow server` on 127.0.0.1 with a SQL backend (sqlite file) and its artifacts on
the S3-compatible server (moto, authentication on; tests/remote_servers.py), proxied by the server: collaborators need
its URL only, never the S3 key. A stage logs to it, the report opens through the server's artifact API (what the
UI's artifact view fetches) with its bytes on S3, and `oodcorr sync` replays a run that lost the server mid-way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml

from remote_servers import RemoteFiles, s3_key
from study_helpers import BIN, env
from test_mlflow_server import free_port, rest
from test_studies_saved import source_project

pytestmark = pytest.mark.slow
NO_S3_KEY = {"AWS_ACCESS_KEY_ID": None, "AWS_SECRET_ACCESS_KEY": None, "AWS_SHARED_CREDENTIALS_FILE": None}
# oodcorr bounds each tracking call to 5 s (a server that is down costs seconds); an upload the server proxies to
# S3 takes longer on a loaded machine: the setting docs/scaling-out.md gives a team server's users
UPLOADS = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "120"}


class TeamServer:
    """`mlflow server` with a sqlite backend and --artifacts-destination s3://<bucket>/<prefix> on moto; stop() and
    start() again keep its store and artifacts (a new port: the outage of a restart)."""

    def __init__(self, servers, tmp: Path):
        self.servers, self.db = servers, tmp / "team.db"
        self.prefix = f"mlflow-{uuid.uuid4().hex[:8]}"
        self.proc, self.base, self.log = None, "", tmp / "team-server.log"

    def start(self, wait_s: float = 300) -> str:
        key_id, secret = s3_key(self.servers)
        port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
            + ["--backend-store-uri", f"sqlite:///{self.db}"]
            + ["--artifacts-destination", f"s3://{self.servers.env['OODCORR_S3_BUCKET']}/{self.prefix}"],
            env=env(
                MLFLOW_S3_ENDPOINT_URL=self.servers.env["OODCORR_S3_ENDPOINT"],
                AWS_ACCESS_KEY_ID=key_id,  # the server's own key; the clients below have none
                AWS_SECRET_ACCESS_KEY=secret,
                AWS_DEFAULT_REGION="us-east-1",
                AWS_EC2_METADATA_DISABLED="true",
            ),
            stdout=subprocess.DEVNULL,
            stderr=open(self.log, "a"),  # the server's own log: tail() shows it when a test fails
            start_new_session=True,
        )
        self.base = f"http://127.0.0.1:{port}"
        deadline = time.time() + wait_s
        while time.time() < deadline and self.proc.poll() is None:
            try:
                with urllib.request.urlopen(f"{self.base}/health", timeout=2) as r:
                    if r.status == 200:
                        return self.base
            except OSError:
                time.sleep(0.5)
        self.stop()
        pytest.fail(f"mlflow server did not start within {wait_s:.0f} s")

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-15:])

    def stop(self, kill: bool = False) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.fixture
def team(s3_server, tmp_path):
    server = TeamServer(s3_server, tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def oodcorr(args, cwd, uri, **extra):
    return subprocess.run(
        [str(BIN / "oodcorr"), *args],
        cwd=cwd,
        env=env(MLFLOW_TRACKING_URI=uri, AWS_EC2_METADATA_DISABLED="true", **NO_S3_KEY, **{**UPLOADS, **extra}),
        capture_output=True,
        text=True,
        timeout=900,
    )


def analysis_runs(base: str, experiment: str) -> list[dict]:
    exp = rest(base, "experiments/get-by-name", experiment_name=experiment)["experiment"]
    found = rest(base, "runs/search", {"experiment_ids": [exp["experiment_id"]], "max_results": 100})["runs"]
    return [r for r in found if {t["key"]: t["value"] for t in r["data"]["tags"]}.get("oodcorr.kind") == "analysis"]


def get_artifact(base: str, run_id: str, path: str) -> bytes:
    """An artifact as the UI's artifact view fetches it (the server reads it from S3 for the browser)."""
    query = urllib.parse.urlencode({"path": path, "run_uuid": run_id})
    with urllib.request.urlopen(f"{base}/get-artifact?{query}", timeout=60) as r:
        return r.read()


def simulated_project(tmp: Path) -> Path:
    """The simulated study of test_studies_saved.py (no model) with its two evaluated runs, its tracking on."""
    root = source_project(tmp / "study")
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["study"].pop("tracking")
    params["runs"].pop("c-s0")
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return root


def test_the_analysis_logs_to_the_team_server_and_its_report_opens_from_s3(team, tmp_path):
    root = simulated_project(tmp_path)
    res = oodcorr(["analyze"], root, team.base)
    assert res.returncode == 0 and "warning" not in res.stderr.lower(), res.stderr[-3000:] + team.tail()
    [run] = analysis_runs(team.base, "oodcorr/demo")
    rid = run["info"]["run_id"]
    names = json.dumps(rest(team.base, "artifacts/list", run_id=rid))
    assert "report.html" in names and "partial_correlations.csv" in names
    report = get_artifact(team.base, rid, "report.html")
    assert report == (root / "results" / "report.html").read_bytes()
    # the bytes live on S3 under the server's destination, not on this machine
    on_s3 = RemoteFiles(team.servers, "s3", team.prefix).list()
    assert [p for p in on_s3 if p.endswith(f"{rid}/artifacts/report.html")], on_s3[:20]
    assert not (root / "mlruns" / "mlflow.db").exists() and not list(tmp_path.rglob("mlartifacts"))


def test_sync_replays_to_the_team_server_after_an_outage(team, tmp_path):
    """The server is stopped while the analysis logs (it comes up empty-handed: one warning, local results
    kept); restarted on the same store and S3 destination, `oodcorr sync` logs the analysis with its report."""
    root = simulated_project(tmp_path)
    down = team.base
    team.stop(kill=True)  # the team server is down for this stage
    res = oodcorr(["analyze"], root, down, MLFLOW_HTTP_REQUEST_TIMEOUT="5")  # a server that is down costs seconds
    assert res.returncode == 0, res.stderr[-3000:]
    assert "warning" in res.stderr.lower() and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert (root / "results" / "report.html").is_file()

    base = team.start()
    assert base != down
    for _ in range(2):  # a second sync adds nothing
        res = oodcorr(["sync"], root, base)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    [run] = analysis_runs(base, "oodcorr/demo")
    assert run["info"]["status"] == "FINISHED"
    assert get_artifact(base, run["info"]["run_id"], "report.html") == (root / "results" / "report.html").read_bytes()
