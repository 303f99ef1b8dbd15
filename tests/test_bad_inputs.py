"""Bad inputs from the fault campaign: each ends in one `error: ...` line, exit 2, nothing damaged."""

from __future__ import annotations

import json
import shutil
import socket

import pytest
import yaml
from click.testing import CliRunner

from oodcorr.cli import cli
from test_train_helpers import make_project


def run(args, cwd, monkeypatch):
    monkeypatch.chdir(cwd)
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    return lines[0]


def snapshot(folder):
    return sorted((str(p.relative_to(folder)), p.read_bytes() if p.is_file() else None) for p in folder.rglob("*"))


def test_nan_lr_is_refused_before_the_existing_run_is_touched(tmp_path, monkeypatch):
    p = make_project(tmp_path, {"a": {}})
    rdir = tmp_path / "runs" / "a"
    (rdir / "checkpoints" / "checkpoint-0").mkdir(parents=True)
    (rdir / "checkpoints" / "checkpoint-0" / "oodcorr_checkpoint.json").write_text("{}")
    (rdir / "run.json").write_text(json.dumps({"run": "a", "config": {"lr": 0.1}, "finished": True}))
    before = snapshot(rdir)
    p.write_text(p.read_text().replace("lr: 0.005", "lr: .nan"))
    assert "runs.a.lr: must be a finite number" in run(["train", "--run", "a"], tmp_path, monkeypatch)
    assert snapshot(rdir) == before


def test_non_utf8_params(tmp_path, monkeypatch):
    make_project(tmp_path, {"a": {}})
    path = tmp_path / "params.yaml"
    path.write_bytes(path.read_bytes() + b"# caf\xe9\n")
    msg = run(["study", "check"], tmp_path, monkeypatch)
    assert "params.yaml:" in msg and "not UTF-8" in msg


def test_malformed_prepared_jsonl(tmp_path, monkeypatch):
    make_project(tmp_path, {"a": {}})
    pool = tmp_path / "data" / "prepared" / "synth_train.jsonl"
    lines = pool.read_text().splitlines()
    lines[2] = lines[2][:20]
    pool.write_text("\n".join(lines) + "\n")
    msg = run(["train", "--run", "a"], tmp_path, monkeypatch)
    assert "synth_train.jsonl:3:" in msg and "invalid JSON" in msg
    pool.write_bytes(pool.read_bytes().replace(lines[3].encode()[:10], b"\xff" + lines[3].encode()[1:10], 1))
    assert "not UTF-8" in run(["train", "--run", "a"], tmp_path, monkeypatch)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("what", ["empty-folder", "file", "truncated"])
def test_not_a_model(tmp_path, monkeypatch, what):
    from oodcorr.modeling.models import model_path

    p = make_project(tmp_path, {"a": {}})
    target = tmp_path / "mymodel"
    if what == "empty-folder":
        target.mkdir()
    elif what == "file":
        target.write_text("not a model")
    else:
        shutil.copytree(model_path("tiny-opt"), target)
        w = target / "model.safetensors"
        w.write_bytes(w.read_bytes()[: w.stat().st_size // 2])
    params = yaml.safe_load(p.read_text())
    params["runs"]["a"]["model"] = str(target)
    p.write_text(yaml.safe_dump(params))
    msg = run(
        ["train", "--run", "a", "--dry-run"] if what == "file" else ["train", "--run", "a"], tmp_path, monkeypatch
    )
    assert "mymodel" in msg and ("not a model" in msg or "is a file" in msg or "truncated" in msg), msg
    assert not (tmp_path / "runs").exists()


def test_ui_bad_port_and_port_in_use(tmp_path, monkeypatch):
    (tmp_path / "params.yaml").write_text("study: {name: ui}\n")
    assert "must be in 1..65535" in run(["ui", "--port", "99999"], tmp_path, monkeypatch)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert f"cannot listen on 127.0.0.1:{port}" in run(["ui", "--port", str(port)], tmp_path, monkeypatch)
