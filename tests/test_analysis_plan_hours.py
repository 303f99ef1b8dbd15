"""`oodcorr plan`'s hours: at the throughput measured for the study's model, or said to be unknown; never a small
model's CPU throughput standing in for another model (a 7B grid is not SmolLM2)."""

from __future__ import annotations

import json

import yaml
from click.testing import CliRunner

from oodcorr.cli import cli

ARGS = ["plan", "--accuracy", "0.6", "--residual-sd", "0.02", "--seeds", "3", "--runs", "120", "--testsets", "8"]


def project(tmp_path, monkeypatch, models):
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "eval_throughput.json").write_text(json.dumps(
        {"model": "smollm2-135m", "device": "cpu", "dtype": "bfloat16", "fast": {"examples_per_s": 20.0}}))
    runs = {f"{m}_mnli_real_64_s0": {"model": m, "train_set": "mnli_real_train", "id_testset": "mnli_real",
                                     "shots": 64} for m in models}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"study": {"name": "p"}, "runs": runs}))
    monkeypatch.chdir(tmp_path)


def test_hours_at_the_measured_throughput_only_for_the_measured_model(tmp_path, monkeypatch):
    project(tmp_path, monkeypatch, ["smollm2-135m"])
    res = CliRunner().invoke(cli, ARGS)
    assert res.exit_code == 0, res.output
    assert "h at 20 examples/s (measured:" in res.output and "smollm2-135m on cpu" in res.output
    for extra, unknown in ((["--model", "olmo2-7b"], "olmo2-7b"), ([], None)):
        if not extra:  # a study with a second family: its throughput is not known
            project(tmp_path / "two", monkeypatch, ["smollm2-135m", "gemma3-270m"])
            unknown = "gemma3-270m"
        res = CliRunner().invoke(cli, ARGS + extra)
        assert res.exit_code == 0, res.output
        time = next(line for line in res.output.splitlines() if "time" in line)
        assert f"unknown for {unknown}" in time and "pass --examples-per-s" in time and " h at " not in time
    out = json.loads(CliRunner().invoke(cli, ARGS + ["--model", "olmo2-7b", "--json"]).output)
    assert out["hours_total"] is None and "olmo2-7b" in out["hours_note"]
    res = CliRunner().invoke(cli, ARGS + ["--model", "olmo2-7b", "--examples-per-s", "400"])
    assert "h at 400 examples/s" in res.output  # a throughput the user measured for the model
