"""`oodcorr plan --budget`: the design a budget buys under the interval's own model (gp_design), its hours, the
budget that reaches 80 % power, the params fragment, and the pilot path."""

import json
import math
import re

import numpy as np
import pytest
from click.testing import CliRunner

from oodcorr.planner.budget import CHECKPOINTS, kernel_share, reliability
from oodcorr.stats.defaults import RELIABILITY_MIN
from oodcorr.stats.gp_design import design_power, design_terms, gate_pass, seeds_for_power
from study_helpers import PLAN_STATED as STATED


def _plan(tmp_path, monkeypatch, *args):
    from oodcorr.cli import cli

    monkeypatch.chdir(tmp_path)  # no project here: nothing measured, nothing read from a params.yaml
    return CliRunner().invoke(cli, ["plan", *map(str, args)], catch_exceptions=False)


def _json(tmp_path, monkeypatch, *args):
    res = _plan(tmp_path, monkeypatch, *args, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_design_within_budget_is_priced_and_powered_by_the_interval_model(tmp_path, monkeypatch):
    got = _json(tmp_path, monkeypatch, "--budget", "12", *STATED)
    d = got["design"]
    assert d["hours"] <= 12 and 1 <= d["seeds"] <= 64 and d["checkpoints"] in CHECKPOINTS
    # hours = seeds x families x (train + checkpoints x (ID items + 4 OOD testsets x items) / examples_per_s)
    per_run = 0.1 + d["checkpoints"] * (d["id_items"] + 4 * d["ood_items"]) / 20 / 3600
    assert d["hours"] == pytest.approx(d["seeds"] * per_run)
    # the power is gp_design's for that design: seeds are copies of one seed's design
    terms = design_terms(d["checkpoints"], 0.25 / d["ood_items"], 0.25 / d["ood_items"], 0.25 * 0.25 / d["id_items"])
    # ... times the chance that the reliability gate lets the family give a verdict (gp_design.gate_pass)
    gate = gate_pass([terms], 16e-4, 16e-4, 0.2, 0.5, RELIABILITY_MIN, copies=[d["seeds"]])[0]
    assert d["gate"] == pytest.approx(gate, abs=1e-9)
    assert d["power"] == pytest.approx(
        design_power([terms], 16e-4, 16e-4, 0.2, 0.5, copies=d["seeds"]) * gate, abs=1e-9
    )
    res = _plan(tmp_path, monkeypatch, "--budget", "12", *STATED)
    assert "design: " in res.output and "expected power" in res.output and "consistent null at +/-0.3" in res.output


def test_a_larger_budget_buys_at_least_the_power_of_a_smaller_one(tmp_path, monkeypatch):
    powers = [_json(tmp_path, monkeypatch, "--budget", b, *STATED)["design"]["power"] for b in (2, 8, 30)]
    assert powers == sorted(powers) and powers[-1] > powers[0]


def test_an_impossible_budget_says_which_budget_reaches_80_percent(tmp_path, monkeypatch):
    res = _plan(tmp_path, monkeypatch, "--budget", "1", *STATED)
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.output.splitlines() if "80% power at |r| = 0.5 needs a budget of" in ln)
    need = float(line.split("needs a budget of ")[1].split(" h")[0])
    assert need > 1
    again = _json(tmp_path, monkeypatch, "--budget", need, *STATED)["design"]
    assert again["power"] >= 0.8 and again["hours"] <= need + 1e-9
    assert _json(tmp_path, monkeypatch, "--budget", need * 0.9, *STATED)["design"]["power"] < 0.8


def test_seeds_carry_the_information_on_smooth_curves():
    """More checkpoints of the same smooth curves buy little: on smooth curves (length-scale 0.4 in the interval's
    Matern 3/2 kernel) 9 -> 20 checkpoints saves about a quarter of the seeds, as an independent power check on
    smooth curves says (12-16 seeds at r = 0.5, 4-6 at r = 0.8); rougher curves (0.1) need fewer seeds."""

    def seeds(n, ell, rel=0.7, r=0.5):
        noise = kernel_share(n, ell) * (1 - rel) / rel
        return seeds_for_power([design_terms(n, noise, noise)], 1.0, 1.0, ell, r)

    assert 0.6 <= seeds(20, 0.4) / seeds(9, 0.4) <= 0.85
    assert 12 <= seeds(9, 0.4) <= 16 and 4 <= seeds(9, 0.4, r=0.8) <= 6
    assert seeds(20, 0.1) < seeds(20, 0.4)
    assert reliability(1.0, kernel_share(20, 0.4) * 3 / 7, 1, 20, 0.4) == pytest.approx(0.7)


def test_testsets_that_cannot_reach_reliability_half_are_left_out_and_not_scored(tmp_path, monkeypatch):
    got = _json(tmp_path, monkeypatch, "--budget", "12", *STATED, "--size", "ood2=16")
    assert got["dropped"] == ["ood2"] and got["reliability_full_size"]["ood2"] < 0.5
    d = got["design"]
    assert d["hours"] == pytest.approx(
        d["seeds"] * (0.1 + d["checkpoints"] * (d["id_items"] + 3 * d["ood_items"]) / 20 / 3600)
    )
    res = _plan(tmp_path, monkeypatch, "--budget", "12", *STATED, "--signal-sd", "0.001")
    assert res.exit_code == 2 and "no pair can be settled" in res.output


def test_a_design_whose_median_testset_stays_below_reliability_half_buys_no_power(tmp_path, monkeypatch):
    """The verdicts read a pair only when both its fitted reliabilities reach 0.5, so a design powered on an
    unreliable residual would settle nothing: the planner gives it no power and buys items instead. With a noisy
    ID testset (the leak, slope^2 x ID item variance / ID items) the lever is ID items."""
    from oodcorr.planner.budget import RELIABILITY_FLOOR, search

    ell, n = 0.2, 17
    model = {
        "ood": {f"t{i}": {"signal_var": 16e-4, "item_var": 0.25, "size": 4096} for i in range(3)},
        "id": {"item_var": 0.25, "size": 4096},
        "ell": ell,
        "beta": 0.8,
    }
    res = search(model, 40.0, {"families": 2, "train_h": 0.2, "examples_per_s": 10.0}, r=0.8, checkpoints=(n,))
    for row in res["rows"]:
        leak = 0.8**2 * 0.25 / row["id_items"]
        rel = reliability(16e-4, 0.25, row["ood_items"], n, ell, leak)
        assert row["reliability"] == pytest.approx(rel)
        if rel < RELIABILITY_FLOOR:
            assert not np.any(row["power"]) and not np.any(row["null"])
        else:  # the interval's own power, before the gate's share of families with no verdict
            assert np.nanmax(row["power"] / np.maximum(row["gate"], 1e-12)) > 0.5
    low = [r for r in res["rows"] if r["reliability"] < RELIABILITY_FLOOR]
    assert low and any(r["reliability"] >= RELIABILITY_FLOOR for r in res["rows"])
    best = res["best"]
    assert best["reliability"] >= RELIABILITY_FLOOR and best["power"] >= 0.8
    out = _plan(tmp_path, monkeypatch, "--budget", "12", *STATED).output
    assert ", reliability 0." in out.split("expected power")[1].splitlines()[0]


def test_a_checkpoint_count_with_only_weak_readable_designs_is_not_reported_below_the_floor():
    """Smooth curves and a small budget: at some checkpoint counts every affordable design that reaches the
    reliability floor has power near 0. Those designs are still the count's best, not an unreadable design of
    power exactly 0 (within the tie tolerance of them), and the count is not named as one where no item count
    reaches the floor; a count is named so only when no affordable design there reaches it."""
    from oodcorr.planner.budget import RELIABILITY_FLOOR, _hours, search

    model = {
        "ood": {f"t{i}": {"signal_var": 4e-4, "item_var": 0.25, "size": 4096} for i in range(7)},
        "id": {"item_var": 0.25, "size": 4096},
        "ell": 0.4,
        "beta": 0.5,
    }
    res = search(model, 24.0, {"families": 2, "train_h": 0.0788, "examples_per_s": 19.1})
    weak = [b for b in res["by_checkpoints"] if b["power"] < 0.005]
    assert weak, "the case needs a count whose readable designs all have power below the tie tolerance"
    for b in res["by_checkpoints"]:
        assert b["weakest"] >= RELIABILITY_FLOOR
    assert res["below_floor"]
    for n in res["below_floor"]:
        assert not any(
            r["weakest"] >= RELIABILITY_FLOOR and _hours(r, 1) <= 24.0 for r in res["rows"] if r["checkpoints"] == n
        )
    assert not {b["checkpoints"] for b in res["by_checkpoints"]} & set(res["below_floor"])


def test_the_floor_holds_for_every_kept_testset_in_each_family(tmp_path, monkeypatch):
    """A pilot whose families differ: the median over families looks reliable, but one family's testset is weak.
    Verdicts need both reliabilities of a pair in both families, so a design that leaves any kept testset below
    0.5 in any family buys no power, and the chosen design brings the weakest one to the floor."""
    from oodcorr.planner.budget import RELIABILITY_FLOOR, search

    ell, n = 0.2, 17
    strong, weak = {"signal_var": 16e-4, "item_var": 0.25}, {"signal_var": 4e-4, "item_var": 0.25}
    ood = {f"t{i}": {**strong, "size": 4096, "families": [strong, weak if i == 2 else strong]} for i in range(3)}
    model = {"ood": ood, "id": {"item_var": 0.25, "size": 4096}, "ell": ell, "beta": 0.8}
    cost = {"families": 2, "train_h": 0.2, "examples_per_s": 10.0}
    res = search(model, 40.0, cost, r=0.8, checkpoints=(n,))
    pooled = search(
        {**model, "ood": {k: {**v, "families": None} for k, v in ood.items()}}, 40.0, cost, r=0.8, checkpoints=(n,)
    )
    for row in res["rows"]:
        leak = 0.8**2 * 0.25 / row["id_items"]
        weakest = reliability(4e-4, 0.25, row["ood_items"], n, ell, leak)
        assert row["weakest"] == pytest.approx(weakest) and row["weakest_testset"] == "t2"
        assert np.any(row["power"]) == (weakest >= RELIABILITY_FLOOR)
    assert res["best"]["weakest"] >= RELIABILITY_FLOOR > pooled["best"]["weakest"] or (
        res["best"]["ood_items"] > pooled["best"]["ood_items"]
    )
    assert res["best"]["ood_items"] >= pooled["best"]["ood_items"]


def test_residual_noise_is_the_item_noise_left_after_the_intercept_and_the_id_slope():
    """Items shared by every checkpoint: noise c (shared by all checkpoints) + w (each checkpoint's own). The
    intercept takes the shared part, so the residual space keeps w, whatever c (Q'(c 11' + w I)Q = w I)."""
    from oodcorr.planner.pilot import residual_noise

    n, w = 12, 0.003
    x = np.linspace(0.5, 0.7, n) ** 2
    for c in (0.0, 0.02):
        V = c * np.ones((n, n)) + w * np.eye(n)
        d = {"series": {"id": x}, "id": "id", "V": {"a": V}}
        assert residual_noise(d, "a") == pytest.approx(w)
        assert np.mean(np.diag(V)) == pytest.approx(c + w)  # the raw diagonal counts the shared part too


def test_docs_planned_reliability_table_matches_its_results_file():
    from study_helpers import REPO, load_script

    bench = load_script(REPO / "bench" / "planner" / "plan_reliability_check.py")
    result = json.loads((REPO / "bench" / "planner" / "results" / "plan_reliability_check.json").read_text())
    assert bench.markdown(result) in (REPO / "docs" / "statistics-reference.md").read_text()
    for c in result["cases"]:  # each planned value is the planner's formula at the recorded design
        for r in c["rows"]:
            assert 0 <= r["planned"] <= 1 and r["planned"] >= r["planned_raw"]  # less noise, never less reliable


def test_throughput_is_the_chosen_models_and_dtypes_measured_here_or_must_be_given(tmp_path, monkeypatch):
    """Hours come from this machine's rate for the model at the dtype (the project's .oodcorr/rates.json), measured
    when first needed and kept; never from another dtype or machine; a model that is not here must be given a
    rate."""
    from oodcorr.planner.rates import PROJECT_RATES, device_and_machine, read_rates

    device, machine = device_and_machine()
    (tmp_path / ".oodcorr").mkdir()
    row = {"model": "tiny-opt", "dtype": "bfloat16", "device": device, "machine": machine, "source": "by hand"}
    (tmp_path / PROJECT_RATES).write_text(
        json.dumps(
            {
                "scoring": [{**row, "examples_per_s": 40.0}, {**row, "machine": "another CPU", "examples_per_s": 99.0}],
                "training": [{**row, "step_s": 5.0}, {**row, "dtype": "float32", "step_s": 7.0}],
            }
        )
    )
    monkeypatch.setenv("OODCORR_MEASURE_S", "1")
    args = ["--budget", "5", "--ell", "0.2", "--ood-testsets", "3", "--train-steps", "64", "--model", "tiny-opt"]
    res = _plan(tmp_path, monkeypatch, *args, "--dtype", "bfloat16")
    assert res.exit_code == 0, res.output
    assert "scoring 40 examples/s (.oodcorr/rates.json: by hand)" in res.output and "measuring" not in res.output
    assert f"training {5.0 * 64 / 3600:.3g} h per run" in res.output
    res = _plan(tmp_path, monkeypatch, *args, "--dtype", "float32")  # not measured at float32: measured now
    assert res.exit_code == 0, res.output
    assert "measuring tiny-opt's scoring rate at float32" in res.output
    assert f"training {7.0 * 64 / 3600:.3g} h per run" in res.output  # its float32 step time was there already
    kept = [r for r in read_rates(tmp_path / PROJECT_RATES)["scoring"] if r["dtype"] == "float32"]
    assert len(kept) == 1 and kept[0]["examples_per_s"] > 0 and kept[0]["machine"] == machine
    res = _plan(tmp_path, monkeypatch, *args, "--dtype", "float32")
    assert res.exit_code == 0 and "measuring" not in res.output  # kept in the project
    assert f"scoring {kept[0]['examples_per_s']:.3g} examples/s" in res.output
    res = _plan(tmp_path, monkeypatch, *args[:-1], "olmo2-7b", "--dtype", "float32")
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert res.exit_code == 2 and len(lines) == 1 and "olmo2-7b" in lines[0] and "--examples-per-s" in lines[0]


def test_the_package_ships_its_rates_and_never_reads_the_bench_folder():
    from oodcorr.planner.rates import PACKAGED_RATES, read_rates
    from study_helpers import REPO

    shipped = read_rates(PACKAGED_RATES)
    assert shipped["scoring"] and shipped["training"]
    assert "planner/rates.json" in (REPO / "pyproject.toml").read_text()
    for f in (REPO / "src" / "oodcorr").rglob("*.py"):  # the benchmark's results are read by no module at run time
        text = f.read_text()
        assert not any(k in text for k in ("eval_throughput.json", "train_bf16.json", 'Path("bench")')), f


def test_params_fragment_passes_the_params_checks(tmp_path, monkeypatch):
    from oodcorr.settings.config import check_references, deep_merge, validate
    from oodcorr.settings.yaml_dialect import read_yaml
    from oodcorr.study import check_study, load_preset

    out = tmp_path / "plan.yaml"
    res = _plan(tmp_path, monkeypatch, "--budget", "12", *STATED, "--write-params", out)
    assert res.exit_code == 0, res.output
    frag = read_yaml(out.read_text())
    d = _json(tmp_path, monkeypatch, "--budget", "12", *STATED)["design"]
    assert frag["train"]["checkpoints"]["log_spaced"] == d["checkpoints"]  # no step count known: log-spaced
    res = _plan(tmp_path, monkeypatch, "--budget", "12", *STATED, "--train-steps", "64", "--write-params", out)
    assert res.exit_code == 0, res.output
    from oodcorr.train.plan import checkpoint_schedule

    every = read_yaml(out.read_text())["train"]["checkpoints"]["every"]  # evenly spaced, as the plan's model has them
    steps = checkpoint_schedule(64, every)
    gaps = {b - a for a, b in zip(steps, steps[1:])}
    assert abs(len(steps) - d["checkpoints"]) <= 1 and max(gaps) == every
    assert frag["data"]["max_examples"] == d["ood_items"]
    assert frag["data"]["testsets"]["mnli_real"]["max_examples"] == d["id_items"]
    assert len(frag["runs"]) == d["seeds"] and {r["seed"] for r in frag["runs"].values()} == set(range(d["seeds"]))
    params = load_preset("cpu")
    params.pop("runs")
    params = deep_merge(params, frag)
    validate(params)
    check_references(params)
    check_study(params)


def _pilot(root, n=12):
    from oodcorr.core.io import write_jsonl
    from oodcorr.records.simulated_runs import write_predictions
    from oodcorr.stats.simulate import irt_metrics_rows, irt_study

    names = ["hans", "anli", "snli"]
    for s in (0, 1):
        st = irt_study(n, [120] * 3, np.eye(3), tau=[0.05, 0.05, 0.002], n_id_items=120, rng=np.random.default_rng(s))
        steps = list(range(0, 10 * n, 10))
        ev = root / "runs" / f"p-s{s}" / "eval"
        write_predictions(ev, st, steps, "mnli", names)
        write_jsonl(ev / "metrics.jsonl", irt_metrics_rows(st, f"p-s{s}", "p", s, steps, "mnli", names))


def test_pilot_project_gives_testsets_noise_and_length_scale(tmp_path, monkeypatch):
    from oodcorr.planner.pilot import pilot_model
    from oodcorr.stats.metrics import DEFAULT_METRIC

    _pilot(tmp_path)
    pm = pilot_model([tmp_path], DEFAULT_METRIC)
    assert pm["n_runs"] == 2 and pm["n_pairs"] == 3 and pm["families"] == [("p", "mnli_train", "mnli", 16)]
    assert set(pm["ood"]) == {"hans", "anli", "snli"} and pm["id"]["name"] == "mnli" and pm["id"]["items"] == 120
    assert pm["ood"]["snli"]["signal_var"] < 0.1 * pm["ood"]["hans"]["signal_var"]  # tau 0.002 vs 0.05
    assert all(math.isfinite(t["item_var"]) and t["item_var"] > 0 for t in pm["ood"].values())
    out = tmp_path / "plan.yaml"
    res = _plan(
        tmp_path,
        monkeypatch,
        "--budget",
        "5",
        "--pilot",
        tmp_path,
        "--examples-per-s",
        "20",
        "--train-hours",
        "0.1",
        "--max-items",
        "120",
        "--write-params",
        out,
    )
    assert res.exit_code == 0, res.output
    assert "pilot: 2 runs, 3 testset pairs" in res.output and "left out (not scored): snli " in res.output
    from oodcorr.settings.yaml_dialect import read_yaml

    frag = read_yaml(out.read_text())
    assert frag["evaluate"]["testsets"] == ["mnli", "anli", "hans"]
    assert all(r["model"] == "p" and r["id_testset"] == "mnli" for r in frag["runs"].values())


def test_docs_power_check_table_matches_its_results_file():
    from study_helpers import REPO, load_script

    bench = load_script(REPO / "bench" / "planner" / "plan_power_check.py")
    result = json.loads((REPO / "bench" / "planner" / "results" / "plan_power_check.json").read_text())
    assert bench.markdown(result) in (REPO / "docs" / "statistics-reference.md").read_text()
    for c in result["cells"]:  # the planner's prediction is the one the bench recorded
        noise = kernel_share(c["checkpoints"], c["ell"]) * (1 - c["reliability"]) / c["reliability"]
        terms = design_terms(c["checkpoints"], noise, noise, 0.25 * noise / 2)
        assert design_power([terms], 1.0, 1.0, c["ell"], c["rho"] or 0.5, copies=c["seeds"]) == pytest.approx(
            c["predicted_power"], abs=1e-6
        )


def test_the_expected_likelihood_ratio_is_the_divergence_to_the_nearest_null_model():
    """lr_noncentrality against an independent computation: the Gaussian Kullback-Leibler divergence written out
    from the block covariances and minimised by Nelder-Mead from several starts; it adds over seeds and is 0 at
    r = 0."""
    from scipy.optimize import minimize

    from oodcorr.stats.gp_design import lr_noncentrality

    n, ell, rho, na, nb = 20, 0.2, 0.6, 0.3, 0.5
    s = design_terms(n, na, nb, 0.05)
    t = np.linspace(0, 1, n)
    Q = s["Q"]

    def cov(a2, b2, r, e):
        u = np.sqrt(3.0) * np.abs(np.subtract.outer(t, t)) / e  # Matern 3/2, written out
        R = Q.T @ ((1 + u) * np.exp(-u)) @ Q
        top = np.hstack([a2 * R + s["Na"], r * np.sqrt(a2 * b2) * R + s["C"]])
        bottom = np.hstack([r * np.sqrt(a2 * b2) * R + s["C"], b2 * R + s["Nb"]])
        return np.vstack([top, bottom])

    S1 = cov(1.0, 1.5, rho, ell)

    def kl(th):
        S0 = cov(np.exp(th[0]), np.exp(th[1]), 0.0, np.exp(th[2]))
        return 0.5 * (np.trace(np.linalg.inv(S0) @ S1) - len(S1) + np.linalg.slogdet(S0)[1] - np.linalg.slogdet(S1)[1])

    best = min(
        minimize(kl, x0, method="Nelder-Mead", options={"xatol": 1e-7, "fatol": 1e-12}).fun
        for x0 in ([0, 0, np.log(ell)], [-1, 1, np.log(0.5)], [1, -1, np.log(0.05)])
    )
    got = lr_noncentrality([s], 1.0, 1.5, ell, rho)
    assert got == pytest.approx(2 * best, rel=1e-4) and got > 0
    assert lr_noncentrality([s, s], 1.0, 1.5, ell, rho) == pytest.approx(2 * got, rel=1e-4)
    assert lr_noncentrality([s], 1.0, 1.5, ell, 0.0) == 0.0


def test_a_design_outside_the_checked_regime_says_so_and_asks_for_a_simulation(tmp_path, monkeypatch):
    """The prediction was checked within 0.04 of the simulated power where each of >= 3 seeds carries >= 5
    effectively independent checkpoints (bench/planner/results/plan_power_check.json); on smoother curves (length-scale
    0.4: about 4.5 per seed) and with one seed it ran up to 0.07 high, and the plan says so, in the params fragment
    too."""
    from oodcorr.planner.budget import CHECKED_NEFF, prediction_caveat

    rough = _json(tmp_path, monkeypatch, "--budget", "12", *STATED)["design"]
    assert rough["seeds"] >= 3 and rough["caveat"] == ""
    smooth = [*STATED[:5], "0.4", *STATED[6:]]
    d = _json(tmp_path, monkeypatch, "--budget", "12", *smooth)["design"]
    assert "effectively independent checkpoints" in d["caveat"] and "--simulate 100" in d["caveat"]
    assert prediction_caveat({**rough, "seeds": 1}, 0.2) != ""  # one seed: outside too
    out = tmp_path / "plan.yaml"
    res = _plan(tmp_path, monkeypatch, "--budget", "12", *smooth, "--write-params", out, "--power", "0.05")
    assert d["caveat"] in res.output and f"# {d['caveat']}" in out.read_text()
    from study_helpers import REPO

    result = json.loads((REPO / "bench" / "planner" / "results" / "plan_power_check.json").read_text())
    for c in result["cells"]:  # the regime's bounds are the check's
        inside = not prediction_caveat({"checkpoints": c["checkpoints"], "seeds": c["seeds"]}, c["ell"])
        if c["rho"] and inside:
            assert abs(c["predicted_power"] - c["simulated_exclusion"]) <= 0.04 + 1e-9, c["cell"]
    stated = float(re.search(r"run up to ([0-9.]+) above", d["caveat"]).group(1))
    outside = [
        round(c["predicted_power"] - c["simulated_exclusion"], 2)
        for c in result["cells"]
        if c["rho"] and prediction_caveat({"checkpoints": c["checkpoints"], "seeds": c["seeds"]}, c["ell"])
    ]
    assert outside and max(outside) == stated  # the caveat's "up to" is the check's largest gap outside
    assert CHECKED_NEFF <= 5.7


def test_docs_plan_vs_grid_table_matches_its_results_file():
    """The planner against the independent grid: the docs' table is the results file's, and a row's prediction
    is the planner's for what the interval reported in that cell."""
    from study_helpers import REPO, load_script

    bench = load_script(REPO / "bench" / "planner" / "plan_vs_grid.py")
    result = json.loads((REPO / "bench" / "planner" / "results" / "plan_vs_grid.json").read_text())
    assert bench.markdown(result) in (REPO / "docs" / "statistics-reference.md").read_text()
    grid_file = REPO / "bench" / "stats" / "results" / "interval_grid.json"
    grid = {c["key"]: c for c in json.loads(grid_file.read_text())["cells"]}
    for row in result["rows"][::17]:
        assert bench.predict(grid[row["key"]])["predicted"] == pytest.approx(row["predicted"], abs=1e-6)
    smooth = [s for s in result["summary"] if s["dependence"].startswith("gp") and s["seeds"] != "1"]
    assert smooth and all(abs(s["mean_error"]) <= 0.05 for s in smooth)


def test_simulated_power_is_measured_with_the_interval_itself(tmp_path, monkeypatch):
    """--simulate analyses studies drawn from the plan's model with gp_interval: a strong correlation on rough,
    reliable curves is found in most of them, a zero one in few; the CLI reports it beside the prediction."""
    from oodcorr.planner.simulate import simulate_design

    strong = simulate_design(20, 4, 0.05, 0.02, 1.0, 0.1, 0.5, 0.8, 0.3, reps=8, seed=1)
    null = simulate_design(20, 4, 0.05, 0.02, 1.0, 0.1, 0.5, 0.0, 0.3, reps=8, seed=2)
    assert strong["reps"] == 8 and strong["excludes_0"] >= 0.75
    assert null["excludes_0"] <= 0.25 and 0 <= null["consistent_null"] <= 1
    out = tmp_path / "plan.yaml"
    args = ["--budget", "3", *STATED, "--ood-testsets", "2"]
    got = _json(tmp_path, monkeypatch, *args, "--simulate", "2")["design"]
    assert got["simulated"]["reps"] == 2 and 0 <= got["simulated"]["power"] <= 1
    res = _plan(tmp_path, monkeypatch, *args, "--simulate", "2", "--write-params", out, "--power", "0.05")
    assert res.exit_code == 0 and "simulated (2 studies of this design" in res.output
    assert "# simulated (2 studies" in out.read_text()


def test_target_r_and_checkpoint_counts_steer_the_design(tmp_path, monkeypatch):
    """--target-r powers the design for that |r| (with gp_design's own power at it); --checkpoints restricts the
    checkpoint counts searched."""
    at5 = _json(tmp_path, monkeypatch, "--budget", "6", *STATED, "--checkpoints", "17")
    at8 = _json(tmp_path, monkeypatch, "--budget", "6", *STATED, "--checkpoints", "17", "--target-r", "0.8")
    assert at5["target_r"] == 0.5 and at8["target_r"] == 0.8
    assert [d["checkpoints"] for d in at8["by_checkpoints"]] == [17] and at8["design"]["checkpoints"] == 17
    d = at8["design"]
    terms = design_terms(17, 0.25 / d["ood_items"], 0.25 / d["ood_items"], 0.25 * 0.25 / d["id_items"])
    gate = gate_pass([terms], 16e-4, 16e-4, 0.2, 0.8, RELIABILITY_MIN, copies=[d["seeds"]])[0]
    assert d["power"] == pytest.approx(
        design_power([terms], 16e-4, 16e-4, 0.2, 0.8, copies=d["seeds"]) * gate, abs=1e-9
    )
    assert d["power"] > at5["design"]["power"]  # a stronger correlation is easier to find at the same budget
    res = _plan(tmp_path, monkeypatch, "--budget", "0.5", *STATED, "--target-r", "0.8")
    assert "80% power at |r| = 0.8 needs a budget of" in res.output and "power |r|=0.8" in res.output


def test_fragment_keeps_the_pilot_families_own_training_settings(tmp_path, monkeypatch):
    """Two pilot families trained with different learning rates: each family's planned runs carry its own."""
    from oodcorr.core.io import write_jsonl
    from oodcorr.settings.yaml_dialect import read_yaml

    _pilot(tmp_path)
    runs = sorted((tmp_path / "runs").iterdir())
    for i, rdir in enumerate(runs):  # the second pilot run becomes a second family, trained at its own lr
        model = "p" if i == 0 else "q"
        rows = [json.loads(ln) for ln in (rdir / "eval" / "metrics.jsonl").read_text().splitlines()]
        write_jsonl(rdir / "eval" / "metrics.jsonl", [{**r, "model": model} for r in rows])
        cfg = {
            "model": model,
            "train_set": "mnli_train",
            "id_testset": "mnli",
            "shots": 16,
            "seed": i,
            "data_seed": i,
            "lr": [2e-3, 1e-3][i],
            "warmup_ratio": 0.1,
            "max_steps": 64,
        }
        (rdir / "run.json").write_text(json.dumps({"run": rdir.name, "config": cfg}))
    out = tmp_path / "plan.yaml"
    res = _plan(
        tmp_path,
        monkeypatch,
        "--budget",
        "5",
        "--pilot",
        tmp_path,
        "--examples-per-s",
        "20",
        "--train-hours",
        "0.1",
        "--write-params",
        out,
    )
    assert res.exit_code == 0, res.output
    frag = read_yaml(out.read_text())["runs"]
    assert {r["model"] for r in frag.values()} == {"p", "q"}
    for r in frag.values():
        assert r["lr"] == (2e-3 if r["model"] == "p" else 1e-3)
        assert "warmup_ratio" not in r and "max_steps" not in r  # the families share them: not repeated


def test_seeds_already_trained_cost_their_scoring_only(tmp_path, monkeypatch):
    """Extending a study whose runs exist: its trained seeds are priced as scoring alone, so the same budget buys
    at least the power it bought before, and the hours follow the formula with the training left out."""
    args = ["--budget", "3", "--checkpoints", "17", *STATED]
    fresh = _json(tmp_path, monkeypatch, *args)["design"]
    ext = _json(tmp_path, monkeypatch, *args, "--trained-seeds", "4")["design"]
    assert ext["power"] >= fresh["power"] - 1e-9 and ext["hours"] <= 3
    score = 17 * (ext["id_items"] + 4 * ext["ood_items"]) / 20 / 3600
    assert ext["hours"] == pytest.approx(ext["seeds"] * score + max(ext["seeds"] - 4, 0) * 0.1)
    # a design of no more seeds than are trained costs exactly its scoring
    res = _plan(tmp_path, monkeypatch, *args, "--trained-seeds", "64")
    assert res.exit_code == 0 and "64 seed(s) per family already trained" in res.output, res.output


def test_a_plan_from_no_stated_values_says_so_and_counts_the_studys_pairs(tmp_path, monkeypatch):
    """No --signal-sd, --item-sd, --ell or --id-slope: the plan says its values are assumed, not stated; with no
    --ood-testsets it plans the study's own OOD testsets (the quickstart's 4: 6 pairs), names no made-up testset as
    its median pair, and its caveat reads as a sentence; its `next:` line is a command, not `...`."""
    from study_helpers import quickstart_text

    (tmp_path / "params.yaml").write_text(quickstart_text())
    res = _plan(tmp_path, monkeypatch, "--budget", "2", "--examples-per-s", "20", "--train-hours", "0.1", "--details")
    assert res.exit_code == 0, res.output
    out = res.output
    assert "(planned from assumed values (none stated: --signal-sd, --item-sd, --ell, --id-slope);" in out
    assert "details: assumed values (none stated: --signal-sd, --item-sd, --ell, --id-slope); 4 OOD testsets" in out
    assert "planned from stated values" not in out
    assert re.search(r"settles: [0-9.]+ of 6 pairs", out), out
    assert "median pair: ood" not in out and "every stated testset alike, reliability 0." in out
    caveat = [ln for ln in out.splitlines() if "the prediction was checked" in ln]
    assert not caveat or re.search(
        r"here (each seed carries about [0-9.]+ effectively independent checkpoints|the design has)", caveat[0]
    )
    assert " and 1 seed(s)" not in out
    nxt = re.search(r"next: `(oodcorr plan [^`]*)`", out)
    assert nxt and "..." not in nxt.group(1) and nxt.group(1).endswith("--write-params plan.yaml"), out
    assert "--examples-per-s 20.0" in nxt.group(1) or "--examples-per-s 20" in nxt.group(1)
    stated = _plan(tmp_path, monkeypatch, "--budget", "2", *STATED, "--details").output
    assert "(planned from stated values;" in stated and "details: stated values; 4 OOD testsets" in stated
