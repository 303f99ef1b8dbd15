"""A real `mlflow server` on 127.0.0.1 (free port): a tiny study logs to it over HTTP and the runs,
per-checkpoint curves and analysis artifacts are read back over the REST API."""

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest
import yaml

from study_helpers import BIN, REPO, env, sh, tiny_params

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rest(base, path, body=None, **query):
    url = f"{base}/api/2.0/mlflow/{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def start_server(tmp_path, wait_s: float = 300):
    """A real `mlflow server` on a free loopback port -> (process, base URL); generous start-up wait
    (shared CPUs)."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            f"sqlite:///{tmp_path / 'server.db'}",
            "--artifacts-destination",
            str(tmp_path / "artifacts"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # its own process group: a test can kill the server with its workers
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + wait_s
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=2) as r:
                if r.status == 200:
                    return proc, base
        except OSError:
            time.sleep(0.5)
    stop_server(proc)
    pytest.fail(f"mlflow server did not start within {wait_s:.0f} s")


def stop_server(proc) -> None:
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture
def server(tmp_path):
    proc, base = start_server(tmp_path)
    try:
        yield base
    finally:
        stop_server(proc)


def test_tiny_study_logs_to_a_live_server(server, tmp_path):
    params = tiny_params(None)
    params["runs"] = {k: v for k, v in params["runs"].items() if k.startswith("tiny-olmo2")}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    shutil.copytree(REPO / "data" / "raw", tmp_path / "data" / "raw")
    run_key = next(iter(params["runs"]))
    oodcorr = BIN / "oodcorr"
    for args in (
        ["data", "prepare"],
        ["train", "--run", run_key, "--quiet"],
        ["evaluate", "--run", run_key, "--quiet"],
        ["analyze"],
    ):
        sh([oodcorr, *args], tmp_path, MLFLOW_TRACKING_URI=server)
    exp = rest(server, "experiments/get-by-name", experiment_name="oodcorr/tiny")["experiment"]
    runs = rest(server, "runs/search", {"experiment_ids": [exp["experiment_id"]], "max_results": 100})["runs"]
    tags = [{t["key"]: t["value"] for t in r["data"].get("tags", [])} for r in runs]
    kinds = sorted(t.get("oodcorr.kind") for t in tags)
    assert kinds == ["analysis", "train"]
    train = runs[[t.get("oodcorr.kind") for t in tags].index("train")]
    # named model and seed first (the UI's run column is narrow), the key in its tag
    spec = params["runs"][run_key]
    ts, shots, seed = spec["train_set"].removesuffix("_train"), spec["shots"], spec["seed"]
    model = run_key.removesuffix(f"_{ts}_{shots}_s{seed}")
    assert model != run_key and train["info"]["run_name"] == f"{model} s{seed}"  # one training set and shots
    # the chart view's link filters to the training runs: its filter is valid MLflow search and selects them
    from oodcorr.tracking.ui_links import FILTERS

    found = rest(
        server,
        "runs/search",
        {"experiment_ids": [exp["experiment_id"]], "max_results": 100, "filter": FILTERS["chart view"]},
    )["runs"]
    assert [r["info"]["run_id"] for r in found] == [train["info"]["run_id"]]
    assert {t["key"]: t["value"] for t in train["data"]["tags"]}["oodcorr.run_key"] == run_key
    hist = rest(server, "metrics/get-history", run_id=train["info"]["run_id"], metric_key="acc/synth_vocab")
    steps = [m["step"] for m in hist["metrics"]]
    ckpts = json.loads((tmp_path / "runs" / run_key / "run.json").read_text())["checkpoint_steps"]
    assert sorted(steps) == sorted(ckpts)
    analysis = runs[[t.get("oodcorr.kind") for t in tags].index("analysis")]
    files = rest(server, "artifacts/list", run_id=analysis["info"]["run_id"]).get("files", [])
    names = json.dumps(files)
    assert "report.html" in names


def test_oodcorr_ui_prints_its_links_once_the_server_answers(tmp_path):
    """`oodcorr ui` starts the MLflow UI on 127.0.0.1 for the project's sqlite store, shows that it is starting,
    prints the study's links only when the server answers them, and stops the server when it is stopped."""
    import os
    import signal
    import threading

    import mlflow

    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"study": {"name": "ui"}}))
    db = tmp_path / "mlruns" / "mlflow.db"
    db.parent.mkdir()
    client = mlflow.MlflowClient(f"sqlite:///{db}")
    client.create_experiment("oodcorr/ui")
    port = free_port()
    proc = subprocess.Popen(
        [str(BIN / "oodcorr"), "ui", "--port", str(port)],
        cwd=tmp_path,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    seen, answered_at_link, progress = [], [], []

    def read():  # each line of stdout (the links) as it comes; at the first link, does the server answer now?
        for line in proc.stdout:
            seen.append(line.rstrip())
            if "runs table: http" in line and not answered_at_link:
                try:
                    with urllib.request.urlopen(line.split(": ", 1)[1].split("#")[0] + "health", timeout=5) as r:
                        answered_at_link.append(r.status)
                except OSError as e:
                    answered_at_link.append(repr(e))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    threading.Thread(target=lambda: progress.extend(x.rstrip() for x in proc.stderr), daemon=True).start()
    try:
        deadline = time.time() + 300
        while not answered_at_link and proc.poll() is None and time.time() < deadline:
            time.sleep(0.5)
        assert answered_at_link == [200], seen  # the link answered the moment it was printed
        assert progress[0].startswith("starting the MLflow UI"), progress  # progress on stderr, links on stdout
        assert seen[0].startswith("MLflow UI ready after"), (seen, progress)
        assert not any(": http" in x for x in progress), progress  # no link among the progress lines
        exp = rest(base, "experiments/get-by-name", experiment_name="oodcorr/ui")["experiment"]
        assert exp["name"] == "oodcorr/ui" and f"/#/experiments/{exp['experiment_id']}/runs" in "\n".join(seen)
        # bound to loopback only
        out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True).stdout
        if out.strip():
            assert all("127.0.0.1:" in line for line in out.strip().splitlines()), out
    finally:
        proc.send_signal(signal.SIGTERM)  # oodcorr only (as a service manager would): it stops the server
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode is not None
    with pytest.raises(OSError):  # the server (its own process group) is gone with it
        urllib.request.urlopen(f"{base}/health", timeout=5)


def test_oodcorr_ui_says_in_one_error_line_when_the_server_exits_before_answering(tmp_path):
    """A store `mlflow server` cannot open (here: postgresql without its driver) ends `oodcorr ui` with one
    `error:` line carrying the server's last line, after the start-up lines, no traceback."""
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"study": {"name": "ui"}}))
    res = subprocess.run(
        [str(BIN / "oodcorr"), "ui", "--port", str(free_port())],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=env(MLFLOW_TRACKING_URI="postgresql://127.0.0.1:1/x"),
    )
    errors = [x for x in res.stderr.splitlines() if x.startswith("error: ")]
    assert res.returncode == 2 and len(errors) == 1 and "exited" in errors[0], res.stderr
    assert "Traceback" not in res.stderr and res.stderr.startswith("starting the MLflow UI"), res.stderr
