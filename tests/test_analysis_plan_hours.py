"""`oodcorr plan`'s hours: at this machine's rate for the study's model (the project's .oodcorr/rates.json, which
`oodcorr plan --budget` measures and keeps), or said to be unknown; never one model's, dtype's or machine's rate
standing in for another (a 7B grid is not SmolLM2)."""

from __future__ import annotations

import json

import yaml
from click.testing import CliRunner

from oodcorr.cli import cli

ARGS = ["plan", "--accuracy", "0.6", "--residual-sd", "0.02", "--seeds", "3", "--runs", "120", "--testsets", "8"]


def project(tmp_path, monkeypatch, models, machine=None):
    from oodcorr.planner.rates import PROJECT_RATES, device_and_machine

    device, here = device_and_machine()
    (tmp_path / ".oodcorr").mkdir(parents=True)
    (tmp_path / PROJECT_RATES).write_text(
        json.dumps(
            {
                "scoring": [
                    {
                        "model": "smollm2-135m",
                        "device": device,
                        "machine": machine or here,
                        "dtype": "float32",
                        "examples_per_s": 20.0,
                        "source": "measured here",
                    }
                ]
            }
        )
    )
    runs = {
        f"{m}_mnli_real_64_s0": {"model": m, "train_set": "mnli_real_train", "id_testset": "mnli_real", "shots": 64}
        for m in models
    }
    (tmp_path / "params.yaml").write_text(
        yaml.safe_dump({"study": {"name": "p"}, "runs": runs, "evaluate": {"dtype": "float32"}})
    )
    monkeypatch.chdir(tmp_path)


def test_hours_at_the_measured_throughput_only_for_the_measured_model(tmp_path, monkeypatch):
    project(tmp_path, monkeypatch, ["smollm2-135m"])
    res = CliRunner().invoke(cli, ARGS)
    assert res.exit_code == 0, res.output
    assert "h at 20 examples/s (measured:" in res.output and "smollm2-135m: .oodcorr/rates.json" in res.output
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


def test_a_rate_from_another_dtype_or_machine_never_stands_in(tmp_path, monkeypatch):
    project(tmp_path, monkeypatch, ["smollm2-135m"])
    res = CliRunner().invoke(cli, ARGS + ["--dtype", "bfloat16"])  # measured at float32 only
    time = next(line for line in res.output.splitlines() if "time" in line)
    assert res.exit_code == 0 and "unknown for smollm2-135m" in time and "at bfloat16" in time
    project(tmp_path / "elsewhere", monkeypatch, ["smollm2-135m"], machine="another CPU, 64 cores")
    time = next(line for line in CliRunner().invoke(cli, ARGS).output.splitlines() if "time" in line)
    assert "unknown for smollm2-135m" in time and " h at " not in time
