"""Signal or noise (issue #10): reliability, disattenuated r, two-level bootstrap, noise-aware verdicts,
`oodcorr plan`. Statistics are checked against independent computations (numpy least squares, pingouin,
explicit loops) and against the item-response simulator whose true partial r and reliability are known."""

import json
import math
import shutil

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from oodcorr.analysis.pipeline import run_analysis
from oodcorr.core.errors import UserError
from oodcorr.core.io import write_jsonl
from oodcorr.records.simulated_runs import write_predictions
from oodcorr.stats.metrics import METRICS
from oodcorr.stats.noise import (
    basic_ci,
    item_weights,
    reliability,
    spearman_brown,
    split_masks,
    two_level_boot,
)
from oodcorr.stats.partial import _corr_cols, fisher_ci, pingouin_partial, residualise_linear
from oodcorr.stats.simulate import irt_metrics_rows, irt_study, true_reliability
from oodcorr.stats.verdicts import noise_verdict
from study_helpers import REPO, load_script

# the earlier noise-corrected interval, kept in bench/ for comparison
disattenuate = load_script(REPO / "bench" / "stats" / "superseded.py").disattenuate
disattenuated_ci = load_script(REPO / "bench" / "stats" / "superseded.py").disattenuated_ci

OOD = ["hans", "anli", "wnli"]
SIGMA = np.array([[1, 0.6, 0.0], [0.6, 1, 0.0], [0.0, 0.0, 1]])


def make_project(root, models=("m1", "m2"), seeds=(0,), n=12, items=(200, 200, 10), predictions=True):
    files = []
    for model in models:
        for seed in seeds:
            st = irt_study(n, list(items), SIGMA, tau=0.04, rng=np.random.default_rng(len(files) + 10 * seed))
            run, steps = f"{model}-s{seed}", list(range(0, 10 * n, 10))
            ev = root / "runs" / run / "eval"
            if predictions:
                write_predictions(ev, st, steps, "mnli", OOD)
            write_jsonl(ev / "metrics.jsonl", irt_metrics_rows(st, run, model, seed, steps, "mnli", OOD))
            files.append(ev / "metrics.jsonl")
    return files


def test_reliability_is_the_explicit_split_half_with_ols_residuals():
    st = irt_study(15, 60, np.eye(1), tau=0.04, rng=np.random.default_rng(4))
    items, x = st["items"][0].astype(float), st["x_items"].mean(axis=1)
    rel, flag = reliability(items, x, "linear", n_splits=7, rng=np.random.default_rng(9))
    A, B = split_masks(60, 7, np.random.default_rng(9))
    cs = []
    for a, b in zip(A, B):
        assert (a > 0).sum() == (b > 0).sum() == 30 and not ((a > 0) & (b > 0)).any()
        X = np.column_stack([np.ones_like(x), x])
        ya, yb = items[:, a > 0].mean(axis=1), items[:, b > 0].mean(axis=1)
        ra = ya - X @ np.linalg.lstsq(X, ya, rcond=None)[0]
        rb = yb - X @ np.linalg.lstsq(X, yb, rcond=None)[0]
        cs.append(np.corrcoef(ra, rb)[0, 1])
    c = np.mean(cs)
    assert flag == "" and rel == pytest.approx(2 * c / (1 + c), abs=1e-10)
    assert spearman_brown(0.5) == pytest.approx(2 / 3)
    few, why = reliability(items[:, :19], x, "linear")
    assert math.isnan(few) and why == "too_few_items:19<20"


def test_two_level_replicates_are_item_and_checkpoint_resamples():
    """Each replicate = pingouin partial r on series rebuilt from resampled items at resampled checkpoints."""
    st = irt_study(10, 40, SIGMA[:2, :2], tau=0.04, rng=np.random.default_rng(1))
    xi, Yi = st["x_items"].astype(float), [m.astype(float) for m in st["items"]]
    boot = two_level_boot(xi, Yi, "linear", 3, np.random.default_rng(5))
    rng = np.random.default_rng(5)  # the same draws in the documented order: checkpoints, OOD items, ID items
    ck = rng.integers(0, 10, size=(3, 10))
    W = [item_weights(40, 3, rng) for _ in Yi]
    Wx = item_weights(40, 3, rng)
    for b in range(3):
        counts = W[0][b] * 40
        assert np.allclose(counts, np.round(counts)) and counts.sum() == pytest.approx(40)
        df = pd.DataFrame({"x": (xi @ Wx[b])[ck[b]], "a": (Yi[0] @ W[0][b])[ck[b]], "b": (Yi[1] @ W[1][b])[ck[b]]})
        assert boot[b, 0, 1] == pytest.approx(pingouin_partial(df, "a", "b", "x")["r"], abs=1e-9)


def test_disattenuation_and_basic_interval():
    assert disattenuate(0.3, 0.6, 0.6) == pytest.approx(0.5)
    assert disattenuate(0.9, 0.6, 0.7) == 1.0  # clipped
    assert np.isnan(disattenuate(0.3, 0.4, 0.9)) and np.isnan(disattenuate(0.3, np.nan, 0.9))
    rng = np.random.default_rng(0)
    z = rng.normal(0, 0.1, 4000)
    lo, hi = basic_ci(0.5, np.tanh(np.arctanh(0.5) + z))
    lo2, hi2 = basic_ci(0.5, np.tanh(np.arctanh(0.5) - 0.2 + z))  # replicates attenuated: interval moves up
    assert np.arctanh(lo2) - np.arctanh(lo) == pytest.approx(0.2, abs=0.01)
    assert np.arctanh(hi) - np.arctanh(0.5) == pytest.approx(1.96 * 0.1, abs=0.02)
    assert basic_ci(np.nan, z) == (math.nan, math.nan) or all(map(math.isnan, basic_ci(np.nan, z)))


def test_noise_corrected_ci_is_the_fisher_ci_disattenuated_and_pools_like_r():
    lo, hi = fisher_ci(0.4, 40, 1)
    got = disattenuated_ci(lo, hi, 0.64, 0.81)
    assert got[0] == pytest.approx(lo / 0.72) and got[1] == pytest.approx(hi / 0.72)
    assert got[0] < disattenuate(0.4, 0.64, 0.81) < got[1]  # holds r_disattenuated
    lo, hi = disattenuated_ci(*fisher_ci(0.7, 40, 1), 0.6, 0.6)
    assert -1 <= lo < hi == 1.0  # clipped to [-1, 1]
    assert all(np.isnan(disattenuated_ci(*fisher_ci(0.4, 40, 1), 0.45, 0.9)))  # below reliability_min
    assert all(np.isnan(disattenuated_ci(np.nan, np.nan, 0.9, 0.9)))
    assert (disattenuated_ci(-0.1, 0.3, 0.6, 0.7)[0] < 0) == (-0.1 < 0)  # 0 inside iff inside the Fisher CI


def test_small_simulation_study_coverage_reliability_and_disattenuation():
    """60 simulated runs with known partial r 0.8 and reliabilities ~0.7 (strong attenuation): the
    noise-corrected CI covers it about 95% of the time, the checkpoint-only Fisher CI of the observed r far
    less; reliabilities and disattenuated r are about unbiased."""
    rho, n, k = 0.8, 30, 300
    rng = np.random.default_rng(123)
    cov2, cov1, defined = 0, 0, 0
    est, true, dis = [], [], []
    for _ in range(60):
        st = irt_study(n, k, np.array([[1, rho], [rho, 1]]), tau=0.035, n_id_items=400, rng=rng)
        x = st["x_items"].mean(axis=1)
        Y = np.column_stack([m.mean(axis=1) for m in st["items"]])
        r = _corr_cols(residualise_linear(x, Y))[0, 1]
        flo, fhi = fisher_ci(r, n, 1)
        cov1 += flo <= rho <= fhi
        rels = [reliability(m.astype(float), x, "linear", 50, rng)[0] for m in st["items"]]
        lo, hi = disattenuated_ci(flo, fhi, rels[0], rels[1])
        if np.isfinite(lo):
            defined += 1
            cov2 += lo <= rho <= hi
        est.append(rels[0])
        true.append(true_reliability(st, 0))
        dis.append(float(disattenuate(r, rels[0], rels[1], 0.5)))
    assert defined >= 50 and 0.88 <= cov2 / defined <= 1.0 and cov1 / 60 < 0.7
    assert abs(np.mean(est) - np.mean(true)) < 0.1
    assert abs(np.nanmean(dis) - rho) < 0.1


def test_noise_verdict_counts_signs_only_for_reliable_models_with_ci_excluding_zero():
    r, lo, hi = [0.6, -0.5], [0.2, -0.8], [0.8, -0.1]
    assert noise_verdict(r, lo, hi, [0.9, 0.9], [0.8, 0.8]) == "model_dependent"
    assert noise_verdict(r, lo, hi, [0.9, 0.3], [0.8, 0.8]) == "unreliable"
    assert noise_verdict([0.6, 0.5], [0.2, -0.1], [0.8, 0.7], [0.9] * 2, [0.9] * 2) == "insufficient_evidence"
    assert (
        noise_verdict([0.6, 0.5, 0.4], [0.2, 0.1, 0.1], [0.8, 0.7, 0.6], [0.9] * 3, [0.9, 0.9, 0.2])
        == "consistent_positive"
    )


def test_analysis_with_predictions_writes_noise_outputs(tmp_path):
    files = make_project(tmp_path)
    out = tmp_path / "results"
    summary = run_analysis(files, out, methods=("linear", "gam"), bootstrap=100, plots=False, metric="accuracy")
    rel = pd.read_csv(out / "reliability.csv")
    assert set(rel["metric"]) == set(METRICS) and set(rel["method"]) == {"linear", "gam"}
    few = rel[rel["testset"] == "wnli"]
    assert few["reliability"].isna().all() and (few["flag"] == "too_few_items:10<20").all()
    assert rel[rel["testset"] != "wnli"]["reliability"].notna().all()
    margin = rel[(rel["metric"] == "mean_margin") & (rel["testset"] != "wnli")]["reliability"].median()
    accuracy = rel[(rel["metric"] == "accuracy") & (rel["testset"] != "wnli")]["reliability"].median()
    assert margin > accuracy  # the continuous score is less noisy than 0/1 correctness
    p = pd.read_csv(out / "partial_correlations.csv")
    assert {"rel_a", "rel_b", "r_disattenuated", "ci2_low", "ci2_high", "distinguishable"} <= set(p.columns)
    lin = p[(p["method"] == "linear") & p["r"].notna()]
    wn = lin[(lin["testset_a"] == "wnli") | (lin["testset_b"] == "wnli")]
    ok = lin.drop(wn.index)
    assert ok["ci2_low"].notna().all() and (ok["ci2_low"] <= ok["r_disattenuated"]).all()
    assert (ok["r_disattenuated"] <= ok["ci2_high"]).all() and (ok["ci2_high"] <= 1).all()
    assert (ok["n_eff"] > 4).all() and (ok["ci2_high"] > ok["ci2_low"]).all()  # never zero width
    assert wn["r_disattenuated"].isna().all() and wn["ci2_low"].isna().all() and wn["ci2_high"].isna().all()
    assert wn["flag"].str.contains("unreliable:wnli").all()
    assert not wn["distinguishable"].any()
    # the two-level bootstrap view (checkpoints x items) sits beside ci2 for linear; gam has none
    assert ok["ci2boot_low"].notna().all() and (ok["ci2boot_low"] <= ok["ci2boot_high"]).all()
    assert ok["ci2boot_low"].between(-1, 1).all() and ok["ci2boot_high"].between(-1, 1).all()
    assert p[p["method"] == "gam"]["ci2boot_low"].isna().all()
    cons = pd.read_csv(out / "consistency.csv")
    assert (cons[(cons["method"] == "linear") & (cons["testset_b"] == "wnli")]["verdict"] == "unreliable").all()
    assert summary["noise"]["enabled"] and summary["methods"]["linear"]["verdicts"]["unreliable"] == 2
    assert set(summary["noise"]["median_reliability_linear_by_metric"]) == set(METRICS)
    assert "Signal or noise?" in (out / "report.html").read_text()
    head = json.loads((out / "metrics.json").read_text())  # the few numbers `dvc metrics show` prints
    assert head["distinguishable"] == pytest.approx(
        summary["noise"]["methods"]["linear"]["share_distinguishable"], abs=1e-4
    )
    assert head["reliability"] == pytest.approx(
        max(summary["noise"]["methods"]["linear"]["median_reliability"], 0), abs=1e-4
    )
    assert head["consistent_null"] == summary["methods"]["linear"]["verdicts"]["consistent_null"]
    assert (
        "equivalent" in pd.read_csv(out / "pooled_seeds.csv") and "consistent_null" in (out / "report.html").read_text()
    )
    run_analysis(files[:1], tmp_path / "one", methods=("linear",), bootstrap=50, plots=True, metric="mean_margin")
    html = (tmp_path / "one" / "report.html").read_text()
    assert "distinguishable" in html and "reliability_mean_margin_linear.png" in html
    assert (tmp_path / "one" / "figures" / "reliability_mean_margin_linear.png").is_file()


def test_metric_mean_margin_analyses_the_margin_trajectories(tmp_path):
    files = make_project(tmp_path, models=("m1",), items=(100, 100, 100))
    run_analysis(files, tmp_path / "acc", methods=("linear",), bootstrap=20, plots=False, metric="accuracy")
    run_analysis(files, tmp_path / "mar", methods=("linear",), bootstrap=20, plots=False, metric="mean_margin")
    import pyarrow.parquet as pq

    def margin(name, step):
        t = pq.read_table(
            tmp_path / "runs" / "m1-s0" / "eval" / "predictions" / f"step-{step}" / f"{name}.parquet"
        ).to_pandas()
        d = t["logp_entailment"] - t["logp_non_entailment"]
        return float(np.where(t["label"] == "entailment", d, -d).mean())

    steps = range(0, 120, 10)
    df = pd.DataFrame({n: [margin(n, s) for s in steps] for n in ["mnli", "hans", "anli"]})
    ref = pingouin_partial(df, "anli", "hans", "mnli")["r"]
    mar = pd.read_csv(tmp_path / "mar" / "partial_correlations.csv")
    row = mar[(mar["method"] == "linear") & (mar["testset_a"] == "anli") & (mar["testset_b"] == "hans")].iloc[0]
    assert row["r"] == pytest.approx(ref, abs=1e-5)
    acc = pd.read_csv(tmp_path / "acc" / "partial_correlations.csv")
    assert acc.loc[row.name, "r"] != pytest.approx(row["r"], abs=1e-3)
    assert json.loads((tmp_path / "mar" / "summary.json").read_text())["noise"]["metric"] == "mean_margin"


def test_missing_predictions_fail_with_one_line_naming_run_and_command(tmp_path):
    files = make_project(tmp_path)
    shutil.rmtree(tmp_path / "runs" / "m2-s0" / "eval" / "predictions")
    out = tmp_path / "results"
    with pytest.raises(UserError, match=r"run 'm2-s0'.*oodcorr evaluate --run m2-s0") as e:
        run_analysis(files, out, methods=("linear",), plots=False)
    assert "\n" not in str(e.value) and not out.exists()
    (tmp_path / "runs" / "m1-s0" / "eval" / "predictions" / "step-30" / "hans.parquet").unlink()
    with pytest.raises(UserError, match=r"run 'm1-s0': predictions missing: .*step-30.*hans\.parquet"):
        run_analysis(files[:1], out, methods=("linear",), plots=False)
    with pytest.raises(
        UserError,
        match=r"run 'm2-s0': .*metrics.jsonl has no mean_margin and there are no "
        r"per-example log-probs .*; run `oodcorr evaluate --run m2-s0`",
    ):
        run_analysis(files[1:], out, methods=("linear",), plots=False, metric="mean_margin")
    with pytest.raises(UserError, match=r"has no balanced_margin .*oodcorr evaluate --run m2-s0") as e:
        run_analysis(files[1:], out, methods=("linear",), plots=False)  # the default metric needs log-probs
    assert "\n" not in str(e.value) and not out.exists()
    with pytest.raises(UserError, match="oodcorr evaluate --run m2-s0"):
        run_analysis(files[1:], out, methods=("linear",), plots=False, noise=True)
    with pytest.raises(UserError, match="unknown metric 'margin'"):
        run_analysis(files[1:], out, methods=("linear",), plots=False, metric="margin")
    summary = run_analysis(
        files[1:], out, methods=("linear",), plots=False, bootstrap=20, metric="accuracy"
    )  # noise auto and no predictions: skipped
    assert summary["noise"]["enabled"] is False
    assert (out / "reliability.csv").read_text().strip().count("\n") == 0  # header only: a declared DVC out
    assert "Not assessed" in (out / "report.html").read_text()


def test_plan_formulas_and_cli(tmp_path, monkeypatch):
    """The half-width mode plans with the interval that decides verdicts (gp_design): the fewest checkpoints whose
    expected half-width is within the target, items for the target reliability at that design."""
    from oodcorr.planner.budget import reliability
    from oodcorr.planner.modes import half_width_plan, interval_at

    S, v, ell = 0.02**2, 0.24, 0.4
    d = half_width_plan(S, v, 0.0, ell, 0.2, 0.8, 3, 0.0, 0.05, 0.5)
    n, k, s = d["checkpoints_per_run"], d["items_per_testset"], d["seeds"]
    assert reliability(S, v, k, n, ell) >= 0.8 > reliability(S, v, k - 1, n, ell)
    assert s >= 3 and d["expected_half_width"] <= 0.2
    half = lambda seeds, r0=0.0: interval_at(n, S, v / k, 0.0, ell, r0, 0.05, 0.5, [seeds])["half"][0]  # noqa: E731
    assert half(s) == pytest.approx(d["expected_half_width"]) and half(1) > half(s) and half(s, 0.7) < half(s)
    from oodcorr.cli import cli

    files = make_project(tmp_path, models=("m1",), items=(200, 200, 200))
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(
        cli, ["plan", "--pilot", str(files[0]), "--examples-per-s", "50", "--json"], catch_exceptions=False
    )
    assert res.exit_code == 0, res.output
    got = json.loads(res.output)
    assert got["items_per_testset"] > 0 and got["checkpoints_per_run"] >= 5 and "pilot" in got["source"]
    res = CliRunner().invoke(cli, ["plan", "--accuracy", "1.5"])
    assert res.exit_code == 2 and "--accuracy must be in (0, 1)" in res.output


def test_analyze_cli_missing_predictions_is_one_line_exit_2(tmp_path, monkeypatch):
    from oodcorr.cli import cli

    make_project(tmp_path)
    shutil.rmtree(tmp_path / "runs" / "m1-s0" / "eval" / "predictions")
    (tmp_path / "params.yaml").write_text(
        "study: {name: demo}\nanalyze: {out: results, methods: [linear], bootstrap: 20, mlflow: false}\n"
    )
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["analyze", "--no-plots"])
    assert res.exit_code == 2 and not (tmp_path / "results").exists()
    lines = [ln for ln in res.output.splitlines() if ln.startswith("error:")]  # (mlflow set-up logs aside)
    assert len(lines) == 1 and "run 'm1-s0'" in lines[0] and "oodcorr evaluate --run m1-s0" in lines[0]


def test_report_says_what_the_study_can_and_cannot_show(tmp_path):
    from oodcorr.analysis.bottom_line import bottom_line, items_for

    # Spearman-Brown: reliability k*rho/(1+(k-1)*rho) at k times the items; items_for inverts it
    rel, n = 0.3, 64
    k = items_for(rel, n, target=0.8) / n
    assert k * rel / (1 + (k - 1) * rel) == pytest.approx(0.8)
    assert items_for(-0.1, 64) is None and items_for(float("nan"), 64) is None
    files = make_project(tmp_path)
    out = tmp_path / "results"
    summary = run_analysis(files, out, methods=("linear",), bootstrap=20, plots=False)
    html = (out / "report.html").read_text()
    assert "In short: what this study can and cannot show" in html
    share = summary["noise"]["methods"]["linear"]["share_distinguishable"]
    assert f"distinguishable from noise {share:.3f}" in html
    # a study in which nothing is distinguishable says it is not a finding; otherwise points to the pairs
    runs = {"r0": {"x": np.array([0.5, 0.6, 0.75])}}
    none = {
        "n_pairs": 3,
        "noise": {"enabled": True, "methods": {"linear": {"median_reliability": -0.2, "share_distinguishable": 0.0}}},
    }
    rel_df = pd.DataFrame({"n_items": [100, 100]})
    text = " ".join(bottom_line(none, runs, rel_df))
    assert "not a finding" in text and "no residual signal above testset noise at ≈ 100 items" in text
    assert "0.500 → 0.750 (+25.0 points, +3.5 SE)" in text and "1 of 1 runs moved by ≥ 2 SE" in text
    # the SE uses the ID testset's own size when the metrics carry it (here 400 ID items vs 100 OOD items)
    sized = " ".join(bottom_line(none, {"r0": {"x": np.array([0.5, 0.75]), "n_id": 400.0}}, rel_df))
    assert "(+25.0 points, +7.1 SE)" in sized and "N = 400 ID items" in sized
    # under a bias-free analysed metric x is its ID series (a margin, not a proportion): the training line still
    # reads ID accuracy from the attached series
    bm = {
        "r0": {
            "x": np.array([-0.16, 0.09]),
            "n_id": 400.0,
            "meta": {"id_testset": "mnli"},
            "series": {
                "balanced_margin": {"mnli": np.array([-0.16, 0.09])},
                "accuracy": {"mnli": np.array([0.5, 0.75])},
            },
        }
    }
    text_bm = " ".join(bottom_line(none, bm, rel_df))
    assert "0.500 → 0.750 (+25.0 points, +7.1 SE)" in text_bm and "-0.160" not in text_bm
    some = {
        "noise": {"enabled": True, "methods": {"linear": {"median_reliability": 0.5, "share_distinguishable": 0.25}}}
    }
    text = " ".join(bottom_line(some, runs, rel_df))
    assert "not a finding" not in text and "≈ 400 items per testset" in text
