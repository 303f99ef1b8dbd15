"""The held-out fault campaign's findings, one test per finding (bench/bad_inputs/bad_inputs.py runs ~190 such cases as
real commands): nothing a user wrote is deleted, nothing injected through a run key, one line per bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml
from click.testing import CliRunner

from oodcorr.cli import cli
from test_train_helpers import adapter, make_project


def one_error(args, cwd, monkeypatch) -> str:
    monkeypatch.chdir(cwd)
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    lines = [x for x in res.output.splitlines() if x.strip() and not x.startswith("warning: ")]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    return lines[0]


def snapshot(folder):
    return sorted((str(p.relative_to(folder)), p.read_bytes() if p.is_file() else None) for p in folder.rglob("*"))


def edit(path, fn):
    tree = yaml.safe_load(path.read_text())
    fn(tree)
    path.write_text(yaml.safe_dump(tree, sort_keys=False))


# ---------------------------------------------------------------------------------------- 1. --out


def _metrics_project(root):
    from oodcorr.core.io import write_jsonl
    from oodcorr.stats.simulate import metrics_rows

    for model, rho in {"m1": 0.7, "m2": 0.6}.items():
        write_jsonl(
            root / "runs" / f"{model}-s0" / "eval" / "metrics.jsonl",
            metrics_rows(model, 0, 12, rho, ["hans", "anli", "wnli"], run=f"{model}-s0"),
        )
    (root / "params.yaml").write_text(
        "study: {name: demo}\nanalyze: {methods: [linear], bootstrap: 0, mlflow: false}\n"
    )


def test_out_keeps_user_files_in_names_oodcorr_uses(tmp_path, monkeypatch):
    _metrics_project(tmp_path)
    paper = tmp_path / "paper"
    (paper / "figures").mkdir(parents=True)
    (paper / "figures" / "my_diagram.png").write_bytes(b"\x89PNG mine")
    (paper / "summary.json").write_text("{}\n")
    before = snapshot(paper)
    msg = one_error(["analyze", "--out", "paper", "--no-plots"], tmp_path, monkeypatch)
    assert "paper" in msg and "figures" in msg and "summary.json" in msg
    assert snapshot(paper) == before
    # the folder an analysis wrote is replaced; its manifest lists every file by content
    assert CliRunner().invoke(cli, ["analyze", "--out", "res", "--no-plots"]).exit_code == 0
    manifest = json.loads((tmp_path / "res" / ".oodcorr-outputs.json").read_text())
    assert "partial_correlations.csv" in manifest["files"] and "plots/accuracy_vs_step.csv" in manifest["files"]
    (tmp_path / "res" / ".gitignore").write_text("/partial_correlations.csv\n/plots\n")  # as DVC writes it
    assert CliRunner().invoke(cli, ["analyze", "--out", "res", "--no-plots"]).exit_code == 0
    assert (tmp_path / "res" / ".gitignore").read_text() == "/partial_correlations.csv\n/plots\n"
    # a user's edit of an output, or a file added to the folder, is never replaced
    (tmp_path / "res" / "plots" / "accuracy_vs_step.csv").write_text("my edit\n")
    (tmp_path / "res" / "notes.md").write_text("mine")
    msg = one_error(["analyze", "--out", "res", "--no-plots"], tmp_path, monkeypatch)
    assert "accuracy_vs_step.csv (changed since)" in msg and "notes.md" in msg
    assert (tmp_path / "res" / "notes.md").read_text() == "mine"


# ---------------------------------------------------------------------------------------- 3. run keys


@pytest.mark.parametrize("key", ["x;touch PWNED;echo", "../../evil", ".hidden", "-rf", "a b", "k" * 200, "$(id)"])
def test_unsafe_run_keys_are_refused_by_check_and_every_stage(tmp_path, monkeypatch, key):
    p = make_project(tmp_path, {key: {}})
    for args in (["study", "check"], ["train", "--run", key], ["evaluate", "--run", key], ["analyze"]):
        assert "run key" in one_error(args, tmp_path, monkeypatch)
    assert not (tmp_path / "runs").exists() and not (tmp_path / "PWNED").exists()
    assert "PWNED" not in os.listdir(tmp_path.parent) and p.exists()


def test_run_argument_cannot_escape_the_project(tmp_path, monkeypatch):
    make_project(tmp_path, {"a": {}})
    assert "--run" in one_error(["train", "--run", "../../evil"], tmp_path, monkeypatch)
    assert not (tmp_path / "runs").exists()


def test_study_use_refuses_unsafe_models_and_maps_hub_ids_to_safe_keys(tmp_path, monkeypatch):
    (tmp_path / "params.yaml").write_text("study: {name: x}\n")
    before = (tmp_path / "params.yaml").read_bytes()
    assert "model" in one_error(["study", "use", "paper", "--models", "a/b;touch PWN3;"], tmp_path, monkeypatch)
    assert (tmp_path / "params.yaml").read_bytes() == before and not (tmp_path / "PWN3").exists()
    res = CliRunner().invoke(
        cli, ["study", "use", "paper", "--models", "allenai/OLMo-2-1124-7B,opt-2.7b", "--seeds", "0", "--shots", "16"]
    )
    assert res.exit_code == 0, res.output
    keys = list(yaml.safe_load((tmp_path / "params.yaml").read_text())["runs"])
    assert "allenai--OLMo-2-1124-7B_mnli_16_s0" in keys and "opt-2.7b_snli_16_s0" in keys


@pytest.mark.parametrize(
    "args, what",
    [
        (["study", "use", "quickstart", "--seeds", "1"], "--seeds"),
        (["study", "use", "quickstart", "--models", "tiny-opt"], "--models"),
        (["study", "use", "paper", "--shots", "0,-4"], "--shots"),
        (["study", "use", "paper", "--seeds", "a,b"], "--seeds"),
        (["study", "use", "paper", "--seeds", "1,,2"], "--seeds"),
    ],
)
def test_study_use_options_are_applied_or_refused(tmp_path, monkeypatch, args, what):
    (tmp_path / "params.yaml").write_text("study: {name: x}\n")
    assert what in one_error(args, tmp_path, monkeypatch)
    assert (tmp_path / "params.yaml").read_text() == "study: {name: x}\n"
    assert not list(tmp_path.glob("*.bak"))


# ---------------------------------------------------------------------------------------- params values


@pytest.mark.parametrize(
    "change, where",
    [
        (lambda t: t["train"].update(lr=1e30), "lr: must be in (0, 1)"),
        (lambda t: t["train"].update(max_length=1), "max_length: must be >="),
        (lambda t: t.update(evaluate={"testsets": [], "max_length": 64}), "evaluate.testsets: empty"),
        (lambda t: t.update(evaluate={"testsets": ["synth_train"], "max_length": 0}), "evaluate.max_length"),
        (lambda t: t.update(runs={}), "runs: empty"),
        (lambda t: t["study"].update(threads="lots"), "study.threads"),
        (lambda t: t["study"].update(threads=-3), "study.threads"),
        (lambda t: t["train"]["lora"].update(dropout=1.5), "lora.dropout: must be in [0, 1)"),
        (lambda t: t["train"].update(pattern="{premise} {hypothesis}" + " word" * 20000), "pattern: 100"),
        (lambda t: t.update(analyze={"methods": ["pearson"]}), "analyze.methods: unknown method 'pearson'"),
        (lambda t: t.update(analyse={"methods": ["linear"]}), "did you mean 'analyze'"),
    ],
)
def test_bad_values_are_one_line_from_check_and_train(tmp_path, monkeypatch, change, where):
    p = make_project(tmp_path, {"a": {}})
    edit(p, change)
    assert where in one_error(["study", "check"], tmp_path, monkeypatch)
    if "analy" not in where and "runs" not in where:
        stage = "evaluate" if where.startswith("evaluate.") else "train"
        assert where.split(":")[0] in one_error([stage, "--run", "a"], tmp_path, monkeypatch)
    assert not (tmp_path / "runs").exists()


def test_empty_params_file_and_duplicate_keys(tmp_path, monkeypatch):
    p = make_project(tmp_path, {"a": {}})
    text = p.read_text()
    p.write_text(text.replace("runs:\n  a:\n", "runs:\n  a:\n    seed: 1\n  a:\n", 1))
    msg = one_error(["study", "check"], tmp_path, monkeypatch)
    line = p.read_text().splitlines().index("  a:", p.read_text().splitlines().index("  a:") + 1) + 1
    assert f"params.yaml:{line}: invalid YAML: duplicate key 'a'" in msg
    assert "params.yaml" in one_error(["train", "--run", "a"], tmp_path, monkeypatch)
    p.write_text("")
    assert "runs" in one_error(["study", "check"], tmp_path, monkeypatch)
    (tmp_path / "runs" / "other" / "eval").mkdir(parents=True)  # another study's run: never mixed in
    assert "no runs" in one_error(["analyze"], tmp_path, monkeypatch)


# ---------------------------------------------------------------------------------------- data files


def _csv_project(tmp_path, content: bytes):
    p = make_project(tmp_path, {"a": {}})
    (tmp_path / "mine.csv").write_bytes(content)
    edit(
        p,
        lambda t: t["data"].update(
            prepare=["mine"],
            testsets={
                "mine": {
                    "path": "mine.csv",
                    "premise": "p",
                    "hypothesis": "h",
                    "label": "y",
                    "label_map": {"yes": "entailment", "no": "non_entailment"},
                }
            },
        ),
    )


CSV = "p,h,y\n" + "".join(f"Ann went {i}.,Ann moved.,{'yes' if i % 2 else 'no'}\n" for i in range(10))


def test_csv_with_bom_is_read_and_non_utf8_is_named_by_line(tmp_path, monkeypatch):
    _csv_project(tmp_path, b"\xef\xbb\xbf" + CSV.encode())
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["data", "prepare", "--only", "mine"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in (tmp_path / "data" / "prepared" / "mine.jsonl").read_text().splitlines()]
    assert len(rows) == 10 and rows[0]["premise"].startswith("Ann went")
    (tmp_path / "mine.csv").write_bytes(CSV.encode().replace(b"Ann went 4", b"Ann w\xe9nt 4"))
    assert "mine.csv:6: not UTF-8" in one_error(["data", "prepare", "--only", "mine"], tmp_path, monkeypatch)


# ---------------------------------------------------------------------------------------- train


def _train(tmp_path, runs=None, **train):
    from oodcorr.settings.config import load_params
    from oodcorr.train.stage import train_run

    p = make_project(tmp_path, runs or {"a": {}}, {"max_steps": 8, **train})
    edit(p, lambda t: t["study"].update(tracking="none"))
    return p, lambda run="a": train_run(load_params(p), run)


def test_deleted_checkpoint_is_rebuilt_identically_and_files_follow_the_umask(tmp_path, monkeypatch):
    from oodcorr.core import io

    old = os.umask(0o002)
    monkeypatch.setattr(io, "_UMASK", None)  # read once per process: this test changes it
    try:
        p, train = _train(tmp_path)
        train()
        ckpts = tmp_path / "runs" / "a" / "checkpoints"
        ref = {s: adapter(tmp_path / "runs" / "a", s) for s in (0, 4, 8)}
        mode = (ckpts / "checkpoint-4" / "adapter_model.safetensors").stat().st_mode & 0o777
        assert mode == 0o664, oct(mode)  # safetensors' own 0600 is not kept
        shutil.rmtree(ckpts / "checkpoint-4")
        train()
        got = {s: adapter(tmp_path / "runs" / "a", s) for s in (0, 4, 8)}
        assert all((got[s][k] == ref[s][k]).all() for s in ref for k in ref[s])
        assert json.loads((tmp_path / "runs" / "a" / "run.json").read_text())["finished"] is True
    finally:
        os.umask(old)


def test_non_finite_loss_stops_training_naming_step_and_lr(tmp_path, monkeypatch):
    import torch
    from safetensors.torch import load_file, save_file

    from oodcorr.core.errors import UserError
    from study_helpers import env

    p, train = _train(tmp_path, checkpoints={"every": 4})
    res = subprocess.run(
        [sys.executable, "-m", "oodcorr", "train", "--run", "a"],
        cwd=tmp_path,
        env=env(OODCORR_TEST_KILL_AT_STEP="4"),
        capture_output=True,
        text=True,
    )
    assert res.returncode == 137, res.stderr[-2000:]
    f = tmp_path / "runs" / "a" / "checkpoints" / "checkpoint-4" / "adapter_model.safetensors"
    save_file({k: torch.full_like(v, float("nan")) for k, v in load_file(f).items()}, f)  # a poisoned resume point
    with pytest.raises(UserError, match=r"run a: training diverged at step 5 \(lr 0\.0025\): loss is nan"):
        train()
    assert not (tmp_path / "runs" / "a" / "checkpoints" / "checkpoint-8").exists()


# ---------------------------------------------------------------------------------------- tracking


def test_credentials_in_a_tracking_uri_are_masked_everywhere(tmp_path, monkeypatch, capfd):
    import socket

    from oodcorr.settings.config import load_params
    from oodcorr.train.stage import train_run

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = make_project(tmp_path, {"a": {}}, {"max_steps": 4})
    secret = "pa55@w0rdXYZ"  # an `@` in the password: masked whole (params refuse credentials: the environment)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://bob:{secret}@127.0.0.1:{port}/?token={secret}")
    train_run(load_params(p), "a")
    err = capfd.readouterr().err
    assert "unreachable" in err and "http://***@127.0.0.1" in err and "token=***" in err and "w0rdXYZ" not in err
    leaks = [f for f in (tmp_path / "runs").rglob("*") if f.is_file() and b"w0rdXYZ" in f.read_bytes()]
    assert not leaks


def test_sync_after_a_preset_switch_keeps_runs_in_their_own_experiment(tmp_path, monkeypatch):
    import mlflow

    from oodcorr.settings.config import load_params
    from oodcorr.train.stage import train_run

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "unset")  # mlflow.set_tracking_uri exports it: no earlier test's
    monkeypatch.delenv("MLFLOW_TRACKING_URI")  # store may leak in (restored at teardown)
    p = make_project(tmp_path, {"a": {}}, {"max_steps": 4})
    edit(p, lambda t: t["study"].update(tracking="none"))
    train_run(load_params(p), "a")  # recorded locally under study `test`
    edit(p, lambda t: (t["study"].pop("tracking"), t["study"].update(name="other")))
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        res = CliRunner().invoke(cli, ["sync"])
        assert res.exit_code == 0, res.output
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}")
    runs = {e.name: len(client.search_runs([e.experiment_id])) for e in client.search_experiments()}
    assert runs.get("oodcorr/test") == 1 and not runs.get("oodcorr/other")


# ---------------------------------------------------------------------------------------- disk / permissions


def _oodcorr_limited(args, cwd, fsize: int):
    import resource

    from study_helpers import env

    return subprocess.run(
        [sys.executable, "-m", "oodcorr", *args],
        cwd=cwd,
        env=env(),
        capture_output=True,
        text=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize)),
    )


def test_disk_full_is_one_line_and_leaves_nothing_half_written(tmp_path):
    _metrics_project(tmp_path)
    res = _oodcorr_limited(["analyze", "--no-plots"], tmp_path, 3000)  # no room for the report
    lines = [x for x in (res.stderr + res.stdout).splitlines() if x.strip()]
    assert res.returncode == 2 and len(lines) == 1 and "no space left" in lines[0], res.stderr[-2000:]
    assert not (tmp_path / "results").exists() and not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_mlflow_store_disk_full_is_one_line_and_a_rerun_logs_the_analysis(tmp_path):
    import mlflow

    _metrics_project(tmp_path)
    edit(tmp_path / "params.yaml", lambda t: t["analyze"].update(mlflow=True))
    assert _oodcorr_limited(["analyze", "--no-plots"], tmp_path, 1 << 30).returncode == 0
    limit = (tmp_path / "mlruns" / "mlflow.db").stat().st_size  # the store cannot grow; the results fit
    for _ in range(2):  # the failed write, then its unfinished rollback: one line each, never a traceback
        res = _oodcorr_limited(["analyze", "--no-plots"], tmp_path, limit)
        lines = [x for x in res.stderr.splitlines() if x.strip()]
        assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr[-3000:]
        assert (res.returncode, lines[0][:8]) in ((0, "warning:"), (2, "error: /")), res.stderr
        assert "unreachable" in lines[0] or "free disk space" in lines[0], lines[0]
    res = _oodcorr_limited(["analyze", "--no-plots"], tmp_path, 1 << 30)  # space again: logged, nothing RUNNING
    assert res.returncode == 0, res.stderr[-3000:]
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("oodcorr/demo")
    assert [r.info.status for r in client.search_runs([exp.experiment_id])] == ["FINISHED"]


def test_read_only_runs_folder_is_one_line(tmp_path):
    make_project(tmp_path, {"a": {}})
    (tmp_path / "runs").mkdir()
    args = [sys.executable, "-m", "oodcorr", "train", "--run", "a"]
    from study_helpers import env

    if os.geteuid() == 0:  # root ignores permission bits: a read-only bind mount in a private namespace
        runs = str(tmp_path / "runs")
        args = [
            "unshare",
            "-m",
            "sh",
            "-c",
            f'mount --bind "{runs}" "{runs}" && mount -o remount,bind,ro "{runs}" "{runs}" && exec "$@"',
            "sh",
            *args,
        ]
        if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
            pytest.skip("cannot make a read-only folder here (root without mount namespaces)")
    else:
        (tmp_path / "runs").chmod(0o555)
    try:
        res = subprocess.run(args, cwd=tmp_path, env=env(), capture_output=True, text=True)
    finally:
        (tmp_path / "runs").chmod(0o755)
    lines = [x for x in (res.stderr + res.stdout).splitlines() if x.strip()]
    assert res.returncode == 2 and len(lines) == 1 and "cannot write here" in lines[0] and "runs" in lines[0], lines
    assert list((tmp_path / "runs").iterdir()) == []
