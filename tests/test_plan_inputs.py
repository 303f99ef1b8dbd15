"""`oodcorr plan`: the study's own analysis settings, what a plan says first and settles, the reliability gate in its
power, a design below the power asked for never written, pilots too small to plan from, and bad inputs as one
line each (nothing written)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from study_helpers import PLAN_STATED as STATED


def _plan(tmp_path, monkeypatch, *args):
    from oodcorr.cli import cli

    monkeypatch.chdir(tmp_path)
    return CliRunner().invoke(cli, ["plan", *map(str, args)], catch_exceptions=False)


def _study(folder, **analyze):
    folder.mkdir(parents=True, exist_ok=True)
    runs = {
        "smollm2-135m_mnli_real_64_s0": {
            "model": "smollm2-135m",
            "train_set": "mnli_real_train",
            "id_testset": "mnli_real",
            "shots": 64,
        }
    }
    (folder / "params.yaml").write_text(yaml.safe_dump({"study": {"name": "p"}, "runs": runs, "analyze": analyze}))
    return folder / "params.yaml"


def test_the_studys_analyze_settings_decide_the_plan(tmp_path, monkeypatch):
    """A params.yaml with analyze.reliability_min 0.6 plans with a gate at 0.6 (and its alpha and equivalence
    margin), in every mode, from the project's params.yaml or --params."""
    from oodcorr.stats.gp_design import design_terms, gate_pass

    study = _study(tmp_path / "study", reliability_min=0.6, alpha=0.1, equivalence=0.2).parent
    got = json.loads(_plan(study, monkeypatch, "--budget", "12", *STATED, "--json").output)
    assert (got["reliability_min"], got["alpha"], got["margin"]) == (0.6, 0.1, 0.2)
    d = got["design"]
    assert d["weakest"] >= 0.6
    terms = [design_terms(d["checkpoints"], 0.25 / d["ood_items"], 0.25 / d["ood_items"], 0.25 * 0.25 / d["id_items"])]
    assert d["gate"] == pytest.approx(gate_pass(terms, 16e-4, 16e-4, 0.2, 0.5, 0.6, copies=[d["seeds"]])[0], abs=1e-9)
    assert d["gate"] < gate_pass(terms, 16e-4, 16e-4, 0.2, 0.5, 0.5, copies=[d["seeds"]])[0]  # a higher gate
    elsewhere = _study(tmp_path / "other", reliability_min=0.6)
    away = tmp_path / "away"
    away.mkdir()
    got = json.loads(_plan(away, monkeypatch, "--budget", "12", *STATED, "--params", elsewhere, "--json").output)
    assert got["reliability_min"] == 0.6 and got["study"].endswith("other/params.yaml")
    power = json.loads(_plan(study, monkeypatch, "--detect-r", "0.5", "--items", "500", "--json").output)
    assert power["reliability_min"] == 0.6
    default = json.loads(_plan(away, monkeypatch, "--budget", "12", *STATED, "--json").output)
    assert default["reliability_min"] == 0.5 and default["margin"] == 0.3  # no params.yaml: AnalyzeSettings'


def test_the_plan_first_says_what_to_run_how_long_and_what_it_settles(tmp_path, monkeypatch):
    res = _plan(tmp_path, monkeypatch, "--budget", "12", *STATED)
    lines = res.output.splitlines()
    head = "\n".join(lines[:7])
    assert "run: design: " in head and "h" in head and "it can show:" in head and "settles:" in head
    assert "length-scale" not in res.output and "--details" in res.output
    got = json.loads(_plan(tmp_path, monkeypatch, "--budget", "12", *STATED, "--json").output)
    d, st = got["design"], got["design"]["settled"]
    assert st["pairs"] == 6 and st["if_r"] == pytest.approx(6 * d["power"], rel=1e-6)  # 4 equal testsets, 1 family
    assert st["if_0"] == pytest.approx(6 * d["null_power"], rel=1e-6)
    assert st["hours_per_settled"] == pytest.approx(d["hours"] / st["if_r"])
    assert f"settles: {st['if_r']:.1f} of 6 pairs" in res.output and "CPU-h per settled pair" in res.output
    details = _plan(tmp_path, monkeypatch, "--budget", "12", *STATED, "--details").output
    assert "length-scale 0.2" in details and "ood1 x ood2: settles with" in details


def test_help_is_grouped_with_few_visible_options(tmp_path, monkeypatch):
    text = _plan(tmp_path, monkeypatch, "--help").output
    options = text.split("Options:")[1].split("Stated inputs")[0]
    visible = [ln for ln in options.splitlines() if ln.startswith("  -")]
    assert len(visible) <= 15
    assert "Stated inputs" in text and "Design space and pricing" in text and "Power mode" in text


def test_a_design_below_the_power_asked_for_is_never_written(tmp_path, monkeypatch):
    out = tmp_path / "plan.yaml"
    res = _plan(tmp_path, monkeypatch, "--budget", "1", *STATED, "--write-params", out)
    assert res.exit_code == 2 and not out.exists()
    err = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
    assert len(err) == 1 and "not written" in err[0] and "< --power 0.8" in err[0] and "needs a budget of" in err[0]
    assert "this budget buys power" in res.output  # the one line saying what the budget buys
    need = float(err[0].split("needs a budget of ")[1].split(" h")[0])
    res = _plan(tmp_path, monkeypatch, "--budget", need, *STATED, "--write-params", out)
    assert res.exit_code == 0 and out.exists(), res.output
    power = float(out.read_text().split("expected power ")[1].split()[0])
    assert power >= 0.8
    res = _plan(tmp_path, monkeypatch, "--budget", "0.01", *STATED, "--write-params", tmp_path / "none.yaml")
    assert res.exit_code == 2 and "no design fits" in res.output and not (tmp_path / "none.yaml").exists()


def test_a_pilot_too_small_to_plan_from_is_refused_with_its_numbers(tmp_path, monkeypatch):
    from test_plan_budget import _pilot

    _pilot(tmp_path, n=5)
    res = _plan(
        tmp_path, monkeypatch, "--budget", "5", "--pilot", tmp_path, "--examples-per-s", "20", "--train-hours", "0.1"
    )
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert res.exit_code == 2 and len(lines) == 1 and "has 5 checkpoints; a pilot needs >= 10" in lines[0]


def test_the_gate_counts_a_silenced_family_as_no_verdict():
    """Near the reliability gate about half the fitted reliabilities fall below it: the predicted power counts
    those families as giving no verdict, so the search buys items until families clear the gate."""
    from oodcorr.planner.budget import search
    from oodcorr.stats.gp_design import design_curve, design_terms, gate_pass

    ell, n, sa2 = 0.2, 17, 16e-4
    from oodcorr.planner.budget import kernel_share

    noise_at_floor = sa2 * kernel_share(n, ell)  # reliability exactly 0.5
    at = gate_pass([design_terms(n, noise_at_floor, noise_at_floor)], sa2, sa2, ell, 0.5, 0.5, copies=[4])[0]
    far = gate_pass([design_terms(n, noise_at_floor / 8, noise_at_floor / 8)], sa2, sa2, ell, 0.5, 0.5, copies=[4])[0]
    assert 0.1 < at < 0.45 and far > 0.95
    model = {
        "ood": {f"t{i}": {"signal_var": sa2, "item_var": 0.25, "size": 4096} for i in range(3)},
        "id": {"item_var": 0.25, "size": 4096},
        "ell": ell,
        "beta": 0.5,
    }
    res = search(model, 30.0, {"families": 1, "train_h": 0.2, "examples_per_s": 20.0}, checkpoints=(n,))
    for row in res["rows"]:
        if np.any(row["power"]):
            terms = [design_terms(n, 0.25 / row["ood_items"], 0.25 / row["ood_items"], row["leak"])]
            c = design_curve(terms, sa2, sa2, ell, 0.5, copies=np.arange(1, 65), floor=0.5)
            assert np.allclose(row["power"], c["power"] * c["gate"])
    near = [r for r in res["rows"] if np.any(r["power"]) and r["reliability"] < 0.55]
    assert near and all(r["gate"][3] < 0.8 for r in near)  # 4 seeds near the gate: often silenced
    assert res["best"]["gate"] > 0.9 and res["best"]["reliability"] > 0.55  # items bought to clear it


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--budget", "inf"], "--budget"),
        (["--budget", "nan"], "--budget"),
        (["--budget", "2", "--trained-seeds", "100"], "--trained-seeds 100: must be in 0..64"),
        (["--budget", "2", "--simulate", "1000000000"], "--simulate"),
        (["--budget", "2", "--examples-per-s", "-5"], "--examples-per-s"),
        (["--budget", "2", "--examples-per-s", "0"], "--examples-per-s"),
        (["--budget", "2", "--train-hours", "-1"], "--train-hours"),
    ],
)
def test_bad_planner_numbers_are_one_line_and_write_nothing(tmp_path, monkeypatch, args, needle):
    stated = [a for a in STATED]
    for opt in ("--examples-per-s", "--train-hours"):
        if opt in args:
            i = stated.index(opt)
            del stated[i : i + 2]
    res = _plan(tmp_path, monkeypatch, *stated, *args, "--write-params", tmp_path / "p.yaml")
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert res.exit_code == 2 and len(lines) == 1 and needle in lines[0], res.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "text,needle",
    [("[1, 2]", "expected a JSON object"), ("NAN", "examples_per_s"), ("-5", "examples_per_s"), ("{x", "not readable")],
)
def test_a_bad_rates_file_is_one_line_naming_the_file_and_field(tmp_path, monkeypatch, text, needle):
    from oodcorr.planner.rates import PROJECT_RATES, device_and_machine

    device, machine = device_and_machine()
    if text in ("NAN", "-5"):
        row = {
            "model": "tiny-opt",
            "dtype": "float32",
            "device": device,
            "machine": machine,
            "examples_per_s": math.nan if text == "NAN" else -5.0,
        }
        text = json.dumps({"scoring": [row]})
    (tmp_path / ".oodcorr").mkdir()
    (tmp_path / PROJECT_RATES).write_text(text)
    res = _plan(
        tmp_path,
        monkeypatch,
        "--budget",
        "2",
        *STATED[4:],
        "--model",
        "tiny-opt",
        "--dtype",
        "float32",
        "--train-hours",
        "0.1",
    )
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert res.exit_code == 2 and len(lines) == 1 and "rates.json" in lines[0] and needle in lines[0], res.output
