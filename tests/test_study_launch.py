"""`oodcorr study launch|status|collect` without a cluster: settings, bad input, job states, the job wrapper,
and (slow) a local launch where one run fails and another is killed mid-training, then resumed by relaunching:
the failed run is reported with its run key and log path, the others are committed to dvc.lock, and MLflow
keeps one run per training run."""

import json
import os
import shutil
import sys

import pytest
import yaml

from oodcorr.core.errors import UserError
from oodcorr.launch import core
from oodcorr.launch.job import RunJob, StageFailed
from oodcorr.settings.config import validate
from study_helpers import BIN, REPO, make_project, mlflow_runs, sh, tiny_params

GOOD = "tiny-opt_synth_16_s0"
BAD = "broken_synth_16_s0"


def small_params(**runs) -> dict:
    params = tiny_params(None)
    params["train"].update({"max_steps": 8, "checkpoints": {"every": 2}})
    params["evaluate"]["testsets"] = ["synth_id", "synth_overlap", "synth_negation"]
    if runs:
        params["runs"] = runs
    return params


def test_params_accept_launch_settings_and_name_a_bad_key():
    params = small_params()
    params["study"]["launch"] = {
        "executor": "slurm",
        "partition": "gpu",
        "gpus_per_run": 1,
        "time": "2:00:00",
        "max_parallel": 8,
        "mem_gb": 64,
        "sbatch": {"exclude": "node12"},
        "setup": ["module load cuda/12.4"],
        "folder": "/shared/oodcorr-launch",
    }
    validate(params)
    params["study"]["launch"]["gpus"] = 1
    with pytest.raises(UserError, match=r"study\.launch\.gpus'.*did you mean"):
        validate(params)


def test_settings_command_line_over_params_over_defaults():
    params = {"study": {"launch": {"executor": "slurm", "partition": "gpu", "time": "1-00:00:00"}}}
    cfg = core.settings(params, partition="debug", max_parallel=None)
    assert (cfg["executor"], cfg["partition"], cfg["time_min"], cfg["max_parallel"]) == ("slurm", "debug", 1440, None)
    assert core.settings({})["executor"] == "local"
    with pytest.raises(UserError, match="executor"):
        core.settings({"study": {"launch": {"executor": "pbs"}}})


@pytest.mark.parametrize(
    "value,minutes",
    [
        (90, 90),
        ("90", 90),
        ("30:00", 30),
        ("30:01", 31),
        ("2:00:00", 120),
        ("1-0", 1440),
        ("1-2:30", 1590),
        ("1-00:00:01", 1441),
    ],
)
def test_time_in_sbatch_formats(value, minutes):
    assert core.parse_time(value) == minutes


def test_time_rejects_garbage():
    with pytest.raises(UserError, match="study.launch.time"):
        core.parse_time("two hours")


def test_stale_runs_follow_dvc_status():
    runs = {"a": {}, "b": {}, "c": {}}
    status = {"train@a": [], "evaluate@a": [], "evaluate@b": [], "analyze": []}
    assert core.stale_runs(status, runs) == {"a": ["train@a", "evaluate@a"], "b": ["evaluate@b"]}
    # a stale train stage reruns its evaluation even when dvc status does not list it yet
    assert core.stale_runs({"train@c": []}, runs) == {"c": ["train@c", "evaluate@c"]}


def _record(tmp_path, executor, **runs):
    return {
        "executor": executor,
        "folder": str(tmp_path),
        "runs": {
            k: {"job_id": j, "result": str(tmp_path / f"{k}.result.json"), "stderr": "log"} for k, j in runs.items()
        },
    }


def test_states_come_from_the_queue_first_then_the_json_result(tmp_path):
    (tmp_path / "ok.result.json").write_text(json.dumps({"outcome": "success", "key": "ok"}))
    (tmp_path / "failed.result.json").write_text(
        json.dumps({"outcome": "error", "message": "x: train@x exited 2: error: boom"})
    )
    (tmp_path / "requeued.result.json").write_text(json.dumps({"outcome": "error", "message": "interrupted"}))
    rec = _record(tmp_path, "slurm", ok="1_0", failed="1_1", lost="1_2", requeued="1_3", queued="1_4")
    states = core.run_states(rec, queue={"1_3": "PENDING", "1_4": "RUNNING"})
    assert {k: v["state"] for k, v in states.items()} == {
        "ok": "DONE",
        "failed": "FAILED",
        "lost": "LOST",
        "requeued": "PENDING",
        "queued": "RUNNING",
    }
    assert states["failed"]["detail"] == "x: train@x exited 2: error: boom"
    rec["runs"]["ok"]["state"] = "committed"
    assert core.run_states(rec, queue={})["ok"]["state"] == "COMMITTED"


def test_runs_waiting_in_a_live_local_launch_are_pending_not_lost(tmp_path):
    """`study collect` beside a local launch still working through its queue: the runs it has not started
    yet wait (PENDING, active) rather than read as "never submitted"; once the launcher is gone, or its pid
    belongs to another process, they are lost. A job the launcher starts keeps what collect wrote meanwhile."""
    import subprocess

    from oodcorr.launch import local

    launcher = subprocess.Popen(["sleep", "30"])
    try:
        rec = _record(tmp_path, "local", done="1")
        rec["runs"]["waiting"] = {"result": str(tmp_path / "waiting.result.json")}
        rec["launcher"] = {"pid": str(launcher.pid), "started": local._started(str(launcher.pid))}
        states = core.run_states(rec, queue={})
        assert states["waiting"]["state"] == "PENDING" and f"process {launcher.pid}" in states["waiting"]["detail"]
        rec["launcher"]["started"] = "1"  # the same pid, another process
        assert core.run_states(rec, queue={})["waiting"]["state"] == "LOST"
        rec["launcher"]["started"] = local._started(str(launcher.pid))
        # collect commits run "done" while the launcher starts "waiting": both survive on disk
        path = tmp_path / "launch.json"
        path.write_text(
            json.dumps({**rec, "runs": {**rec["runs"], "done": {**rec["runs"]["done"], "state": "committed"}}})
        )
        local._record_job(path, rec, "waiting", {"job_id": "2", "stdout": "o", "stderr": "e"})
        on_disk = json.loads(path.read_text())["runs"]
        assert on_disk["done"]["state"] == "committed" and on_disk["waiting"]["job_id"] == "2"
    finally:
        launcher.kill()
        launcher.wait()
    rec["runs"]["waiting"].pop("job_id", None)
    states = core.run_states(rec, queue={})
    assert states["waiting"] == {"state": "LOST", "detail": "never submitted (the launch was interrupted)"}


def test_a_planted_pickle_is_never_loaded_and_the_launch_folder_is_private(tmp_path):
    import pickle

    from oodcorr.launch import records

    class Boom:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'PWNED'}",))

    (tmp_path / "1_0_result.pkl").write_bytes(pickle.dumps(Boom()))
    rec = {"executor": "slurm", "runs": {"k": {"job_id": "1_0", "result": str(tmp_path / "1_0_result.pkl")}}}
    states = core.run_states(rec, queue={})
    assert states["k"]["state"] == "FAILED" and "not read" in states["k"]["detail"]
    assert not (tmp_path / "PWNED").exists()
    # a launch folder others can write is refused before any record in it is read; a new one is 0700
    shared = tmp_path / "shared"
    (shared / "20260101").mkdir(parents=True)
    (shared / "20260101" / "launch.json").write_text(json.dumps(rec))
    shared.chmod(0o775)
    with pytest.raises(UserError, match="writable by others"):
        records.records(tmp_path, {"folder": str(shared)})
    new = records.private_folder(tmp_path / "mine" / "launch", create=True)
    assert new.stat().st_mode & 0o777 == 0o700
    # a record naming a hostile run key or foreign stages is refused
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"executor": "local", "runs": {"x;touch PWNED": {"stages": []}}}))
    with pytest.raises(UserError, match="run key"):
        records.read_record(bad)
    bad.write_text(json.dumps({"executor": "local", "runs": {"k": {"stages": ["analyze"]}}}))
    with pytest.raises(UserError, match="stages other than"):
        records.read_record(bad)


STAGE_SCRIPT = """import os, pathlib, sys
out = pathlib.Path(sys.argv[1])
out.write_text(os.environ.get("X_LAUNCH", "") + " ".join(sys.argv[2:]))
sys.stderr.write(sys.argv[-1] + chr(10))
sys.exit(3 if sys.argv[-1].startswith("error") else 0)
"""


def test_job_runs_stage_commands_without_a_shell_and_reports_the_failing_one(tmp_path):
    from oodcorr.launch.job import command_argv

    (tmp_path / "s.py").write_text(STAGE_SCRIPT)
    py = sys.executable
    spec = {
        "key": "k",
        "root": str(tmp_path),
        "env": {"X_LAUNCH": "1"},
        "result": str(tmp_path / "k.json"),
        "stages": [
            {"name": "train@k", "cmd": f"{py} s.py a.txt 'two words'"},
            {"name": "evaluate@k", "cmd": f"{py} s.py b.txt ok"},
        ],
    }
    out = RunJob()(spec)
    assert [s["name"] for s in out["stages"]] == ["train@k", "evaluate@k"]
    assert (tmp_path / "a.txt").read_text() == "1two words" and (tmp_path / "b.txt").read_text() == "1ok"
    assert json.loads((tmp_path / "k.json").read_text())["outcome"] == "success"
    spec["stages"] = [
        {"name": "train@k", "cmd": f"{py} s.py c.txt 'error: no such model'"},
        {"name": "evaluate@k", "cmd": f"{py} s.py never.txt ok"},
    ]
    with pytest.raises(StageFailed, match=r"k: train@k exited 3: error: no such model"):
        RunJob()(spec)
    assert not (tmp_path / "never.txt").exists()
    assert json.loads((tmp_path / "k.json").read_text()) == {
        "outcome": "error",
        "message": "k: train@k exited 3: error: no such model",
    }
    # text that only a shell would interpret never reaches one: the command is refused before it runs
    for cmd in ("oodcorr train --run x;touch PWNED;echo", "oodcorr train --run $(id)", "a | b", "a > f", "a && b"):
        with pytest.raises(StageFailed, match="needs a shell"):
            command_argv(cmd)
    spec["stages"] = [{"name": "train@k", "cmd": "oodcorr train --run x;touch PWNED;echo", "remove": ["a.txt"]}]
    with pytest.raises(StageFailed, match="needs a shell"):
        RunJob()(spec)
    assert not (tmp_path / "PWNED").exists() and (tmp_path / "a.txt").exists()
    assert command_argv("oodcorr train --run tiny-opt_synth_16_s0") == [
        "oodcorr",
        "train",
        "--run",
        "tiny-opt_synth_16_s0",
    ]


def _cli_project(tmp_path):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(small_params()))
    (tmp_path / "dvc.yaml").write_text((REPO / "dvc.yaml").read_text())
    return tmp_path


def test_no_slurm_reachable_is_one_line(tmp_path):
    root = _cli_project(tmp_path)
    cmd = [sys.executable, "-m", "oodcorr", "study", "launch", "--executor", "slurm"]
    res = sh(cmd, root, check=False, PATH=str(BIN))  # no sbatch on PATH
    assert res.returncode == 2
    assert res.stderr.strip() == (
        "error: no SLURM cluster reachable: `sbatch` not found on PATH (run on the "
        "cluster's login node, set SLURM_CONF, or use --executor local)"
    )
    if shutil.which("sbatch"):
        res = sh(cmd, root, check=False, SLURM_CONF=str(tmp_path / "nowhere.conf"))
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
        assert "no SLURM cluster reachable: SLURM_CONF=" in res.stderr


def test_status_and_collect_without_a_launch(tmp_path):
    root = _cli_project(tmp_path)
    res = sh([sys.executable, "-m", "oodcorr", "study", "status"], root, check=False)
    assert res.returncode == 2 and "no launch recorded under" in res.stderr
    res = sh([sys.executable, "-m", "oodcorr", "study", "collect"], root)
    assert "nothing to collect" in res.stdout


@pytest.mark.slow
def test_local_launch_reports_a_failed_run_commits_the_others_and_resumes_a_killed_one(tmp_path):
    good = small_params()["runs"][GOOD]
    bad = dict(good, model="nobody/no-such-model")  # a hub id: fails in seconds offline
    root = make_project(tmp_path / "study", small_params(**{GOOD: good, BAD: bad}))
    dry = sh(["oodcorr", "study", "launch", "--dry-run"], root)
    assert f"{GOOD}: train@{GOOD} -> evaluate@{GOOD}" in dry.stdout and "2 of 2 runs" in dry.stdout

    # 1) the good run is killed after step 4 (a hard exit, like a preemption), the bad one fails
    res = sh(
        ["oodcorr", "study", "launch", "--executor", "local", "--max-parallel", "2"],
        root,
        check=False,
        OODCORR_TEST_KILL_AT_STEP=4,
    )
    assert res.returncode == 1, res.stdout + res.stderr
    record = json.loads(sorted((root / ".oodcorr" / "launch").glob("*/launch.json"))[-1].read_text())
    for key in (GOOD, BAD):
        log = record["runs"][key]["stderr"]
        assert f"FAILED {key} (job " in res.stderr and f"log: {log}" in res.stderr
        assert os.path.exists(log)
    assert f"{BAD}: train@{BAD} exited" in res.stderr
    ckpts = root / "runs" / GOOD / "checkpoints"
    assert (ckpts / "checkpoint-4").exists() and not (ckpts / "checkpoint-8").exists()
    early = (ckpts / "checkpoint-2" / "adapter_model.safetensors").stat()
    status = sh(["oodcorr", "study", "status"], root).stdout
    assert GOOD in status and "FAILED" in status and "log:" in status

    # 2) relaunch: the good run resumes from checkpoint-4 and is committed; the bad one fails again alone
    res = sh(["oodcorr", "study", "launch", "--executor", "local", "--max-parallel", "2"], root, check=False)
    assert res.returncode == 1
    assert f"FAILED {BAD}" in res.stderr and f"FAILED {GOOD}" not in res.stderr
    assert "1 run(s) committed to dvc.lock; 1 failed (broken_synth_16_s0)" in res.stdout
    assert (ckpts / "checkpoint-8").exists()
    again = (ckpts / "checkpoint-2" / "adapter_model.safetensors").stat()
    assert (again.st_ino, again.st_mtime_ns) == (early.st_ino, early.st_mtime_ns)  # resumed, not retrained
    status = sh(["dvc", "status"], root).stdout
    changed = {line.rstrip(":") for line in status.splitlines() if line and not line.startswith(("\t", " "))}
    assert changed == {f"train@{BAD}", f"evaluate@{BAD}", "analyze"}, status
    client, runs = mlflow_runs(root)
    train = [
        r for r in runs if r.data.tags.get("oodcorr.kind") == "train" and r.data.tags.get("oodcorr.run_key") == GOOD
    ]
    assert len(train) == 1
    steps = [m.step for m in client.get_metric_history(train[0].info.run_id, "train/loss")]
    assert steps == list(range(1, 9))
    status = sh(["oodcorr", "study", "status", "--all"], root).stdout
    assert "COMMITTED" in status and "SUPERSEDED" in status


FAKE_DVC_YAML = """
stages:
  prepare:
    cmd: python fake_stage.py prepare
    outs: [prepared]
  train:
    foreach: ${runs}
    do:
      cmd: python fake_stage.py train ${key}
      deps: [prepared, src/code.txt]
      params:
        - train
        - runs.${key}
      outs:
        - out/${key}/ckpt.txt:
            persist: true
  evaluate:
    foreach: ${runs}
    do:
      cmd: python fake_stage.py evaluate ${key}
      deps:
        - out/${key}/ckpt.txt
      params: [evaluate]
      outs:
        - out/${key}/metrics.txt
"""
FAKE_STAGE = """import pathlib, sys
kind, key = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None
if kind == "prepare":
    pathlib.Path("prepared").mkdir(exist_ok=True)
    pathlib.Path("prepared/data.txt").write_text("data" + chr(10))
elif kind == "train":
    out = pathlib.Path("out", key)
    out.mkdir(parents=True, exist_ok=True)
    (out / "ckpt.txt").write_text(pathlib.Path("prepared/data.txt").read_text() \
+ pathlib.Path("src/code.txt").read_text())
else:
    ckpt = pathlib.Path("out", key, "ckpt.txt")
    pathlib.Path("out", key, "metrics.txt").write_text(f"{len(ckpt.read_bytes())} {ckpt}" + chr(10))
"""


def _fake_project(tmp_path):
    """A git + DVC project whose stages are one-line Python commands: the launch machinery in seconds."""
    root = tmp_path / "fake"
    (root / "src").mkdir(parents=True)
    (root / "src" / "code.txt").write_text("v1\n")
    params = small_params()
    params["runs"]["tiny-opt_synth_16_s0"]["seed"] = 1
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    (root / "dvc.yaml").write_text(FAKE_DVC_YAML)
    (root / "fake_stage.py").write_text(FAKE_STAGE)
    sh(["git", "init", "-q"], root)
    sh(["dvc", "init", "-q"], root)
    sh(["dvc", "config", "core.autostage", "true"], root)
    sh(["git", "add", "-A"], root)
    sh(["git", "commit", "-qm", "fake"], root)
    return root, params


@pytest.mark.slow  # no model, but a dozen DVC and Python start-ups (about 60 s on 2 cores)
def test_local_launch_commits_runs_and_refuses_runs_whose_inputs_changed(tmp_path):
    root, _ = _fake_project(tmp_path)
    oodcorr = [sys.executable, "-m", "oodcorr", "study"]
    res = sh(oodcorr + ["launch", "--executor", "local", "--max-parallel", "2"], root)
    assert "prepare is out of date" in res.stderr
    assert "2 run(s) committed to dvc.lock" in res.stdout
    assert "Data and pipelines are up to date" in sh(["dvc", "status"], root).stdout
    assert "nothing to launch" in sh(oodcorr + ["launch", "--executor", "local"], root).stdout

    # one run's params change: only it is relaunched; its code changes while it "runs": not committed
    from oodcorr.settings.config import load_params

    text = (root / "params.yaml").read_text()
    (root / "params.yaml").write_text(text.replace("seed: 1", "seed: 2"))
    params = load_params(root / "params.yaml")
    cfg = core.settings(params)
    stale, _ = core.plan(params, cfg, None)
    assert stale == {"tiny-opt_synth_16_s0": ["train@tiny-opt_synth_16_s0", "evaluate@tiny-opt_synth_16_s0"]}
    path = core.submit(params, cfg, stale)
    (root / "src" / "code.txt").write_text("v2\n")
    outcome = core.collect(params, cfg, [path])
    assert outcome["stale"] == ["tiny-opt_synth_16_s0"] and not outcome["committed"]
    status = sh(oodcorr + ["status"], root).stdout
    assert "STALE" in status and "changed since launch: src/code.txt" in status
    # relaunch: every train stage now depends on the new code; both are committed, the stale attempt stays listed
    res = sh(oodcorr + ["launch", "--executor", "local"], root)
    assert "2 run(s) committed to dvc.lock" in res.stdout
    assert "Data and pipelines are up to date" in sh(["dvc", "status"], root).stdout
    history = sh(oodcorr + ["status", "--all"], root).stdout
    assert history.count("launch ") == 3 and "STALE" in history
    assert (root / "out" / "tiny-opt_synth_16_s0" / "ckpt.txt").read_text() == "data\nv2\n"
    staged = sh(["git", "status", "--porcelain"], root).stdout.splitlines()
    assert "A  dvc.lock" in staged and "A  out/tiny-opt_synth_16_s0/.gitignore" in staged, staged  # autostage


def test_collect_leaves_out_failed_runs_since_removed_from_params_and_says_so_once(tmp_path, capsys):
    """A study shrunk after a failed launch: its dropped runs are not failures to resume; they are named once,
    marked DROPPED in the launch record, and later collects neither report them nor exit non-zero for them."""
    for key in ("gone", "kept"):
        (tmp_path / f"{key}.result.json").write_text(json.dumps({"outcome": "error", "message": f"{key}: boom"}))
    path = tmp_path / "launch.json"
    path.write_text(json.dumps(_record(tmp_path, "local", gone="999999991", kept="999999992")))
    params = {"_root": str(tmp_path), "runs": {"kept": {}}}
    first = core.collect(params, {}, [path])
    assert first["dropped"] == ["gone"] and first["failed"] == ["kept"]
    out = capsys.readouterr()
    assert "FAILED kept" in out.err and "FAILED gone" not in out.err
    assert "1 failed earlier and no longer in params.yaml runs, left out (gone)" in out.out
    assert core.run_states(json.loads(path.read_text()), queue={})["gone"]["state"] == "DROPPED"
    params["runs"] = {}  # "kept" dropped too: nothing left to fail, and the record is settled
    assert core.collect(params, {}, [path])["dropped"] == ["kept"]
    again = core.collect(params, {}, [path], quiet=True)
    assert not again["failed"] and not again["dropped"]
    assert all(r["state"] == "dropped" for r in json.loads(path.read_text())["runs"].values())
