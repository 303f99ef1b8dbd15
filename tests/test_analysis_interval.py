"""The noise-corrected interval (stats/interval.py), `oodcorr plan`'s power mode and its pilot errors, and the
equivalence verdict. Statistics are checked against independent computations (numpy covariance, pingouin's
Cronbach alpha, statsmodels' acf, Monte Carlo) and against simulated designs with a known noise-free partial r."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from oodcorr.core.errors import UserError
from oodcorr.core.io import write_jsonl
from oodcorr.records.simulated_runs import write_predictions
from oodcorr.stats.interval import (
    ar1_corr,
    disattenuated_bounds,
    fit_ar1,
    partial_interval,
    residual_maker,
    z_dof,
)
from oodcorr.stats.item_cov import noise_cov
from oodcorr.stats.noise_pooling import _pool_noise
from oodcorr.stats.simulate import design_runs, irt_metrics_rows, irt_study
from oodcorr.stats.verdicts import equivalent, noise_verdict, verdict
from study_helpers import REPO, load_script

_superseded = load_script(REPO / "bench" / "stats" / "superseded.py")  # the earlier engines, kept for comparison
effective_dof, power = _superseded.effective_dof, _superseded.power


def _interval(d, **kw):
    ser = [m.mean(-1, dtype=np.float64) for m in d["items"]]
    V = [noise_cov(m, lab) for m, lab in zip(d["items"], d["labels"])]
    return partial_interval(*ser, *V, **kw)


def test_noise_cov_is_the_item_covariance_over_items_stratified_by_label():
    rng = np.random.default_rng(0)
    items = rng.normal(size=(7, 40)) + rng.normal(size=(7, 1))
    labels = np.r_[np.zeros(15), np.ones(25)]
    assert np.allclose(noise_cov(items), np.cov(items) / 40)  # rows = checkpoints, items = observations
    want = sum((k / 40) ** 2 * np.cov(items[:, labels == c]) / k for c, k in ((0, 15), (1, 25)))
    assert np.allclose(noise_cov(items, labels), want)
    # a per-checkpoint shift of one label's items (an answer bias) is not item noise once stratified
    shifted = items + np.where(labels == 1, 1.0, -1.0)[None, :] * rng.normal(0, 3, (7, 1))
    assert np.allclose(noise_cov(shifted, labels), want)
    assert not np.allclose(noise_cov(shifted), noise_cov(items))


def test_shrunk_noise_cov_takes_the_pull_that_best_predicts_held_out_items():
    from scipy.linalg import null_space
    from scipy.stats import multivariate_normal

    from oodcorr.stats.item_cov import SHRINK_FOLDS, SHRINK_GRID, cv_shrinkage

    rng = np.random.default_rng(3)
    n = 12
    smooth = np.exp(-(np.subtract.outer(np.arange(n), np.arange(n)) ** 2) / 20.0)
    structured = np.linalg.cholesky(smooth + 1e-6 * np.eye(n)) @ rng.normal(size=(n, 60)) + 0.05 * rng.normal(
        size=(n, 60)
    )
    Z = structured.T @ null_space(np.ones((1, n)))
    # the objective, computed independently: scipy's Gaussian log-density of each held-out fold
    best, want = -np.inf, None
    for d in SHRINK_GRID:
        ll = 0.0
        for test in np.array_split(np.arange(len(Z)), SHRINK_FOLDS):
            train = np.setdiff1d(np.arange(len(Z)), test)
            mu = Z[train].mean(0)
            S = np.cov(Z[train].T)
            C = (1 - d) * S + d * np.trace(S) / len(S) * np.eye(len(S))
            ll += multivariate_normal(np.zeros(len(S)), C, allow_singular=False).logpdf(Z[test] - mu).sum()
        if ll > best:
            best, want = ll, d
    assert cv_shrinkage(Z) == want
    assert cv_shrinkage(Z) <= 0.1  # strongly structured item noise: (almost) no pull
    white = rng.normal(size=(n, 40))  # white noise, few items per checkpoint: a strong pull
    assert cv_shrinkage(white.T @ null_space(np.ones((1, n)))) >= 0.7
    # the shrunk estimate keeps the total noise and the constant direction, and only moves the rest
    labels = np.r_[np.zeros(20), np.ones(20)]
    V, Vs = noise_cov(white, labels), noise_cov(white, labels, shrink=True)
    one = np.ones(n) / math.sqrt(n)
    assert np.trace(Vs) == pytest.approx(np.trace(V))
    assert np.allclose(Vs @ one, V @ one)
    assert not np.allclose(Vs, V)
    spread = lambda M: np.ptp(np.linalg.eigvalsh(null_space(one[None]).T @ M @ null_space(one[None])))  # noqa
    assert spread(Vs) < 0.5 * spread(V)
    # batched over leading axes like the plain estimate
    both = noise_cov(np.stack([white, structured[:, :40]]), labels, shrink=True)
    assert np.allclose(both[0], Vs)


def test_item_noise_reliability_is_cronbachs_alpha_of_the_residualised_items():
    import pingouin as pg

    st = irt_study(25, 120, np.eye(1), tau=0.05, rng=np.random.default_rng(2))
    x, items = st["x_items"].mean(axis=1), st["items"][0].astype(float)
    res = partial_interval(
        x, items.mean(1), items.mean(1), np.zeros((25, 25)), noise_cov(items), noise_cov(items), eiv=False
    )
    M = residual_maker(x)
    alpha = pg.cronbach_alpha(pd.DataFrame(M @ items))[0]
    e = M @ items.mean(1)
    assert 1 - np.trace(M @ noise_cov(items)) / (e @ e) == pytest.approx(alpha, abs=1e-9)  # exactly alpha
    # the interval's moment version subtracts the centred (not residualised) noise: O(1/n) apart
    assert res["rel_a"] == pytest.approx(alpha, abs=0.03)


def test_errors_in_variables_estimator_equals_partialling_the_noise_corrected_covariance():
    d = design_runs(1, 30, 200, 0.4, 0.0, 150, rng=np.random.default_rng(5))
    ser = [m[0].mean(-1, dtype=np.float64) for m in d["items"]]
    V = [noise_cov(m[0], lab) for m, lab in zip(d["items"], d["labels"])]
    res = partial_interval(*ser, *V)
    S = np.cov(np.vstack(ser)) * 29 - np.diag([np.trace(v) - v.sum() / 30 for v in V])  # centred sums - noise
    P = np.linalg.inv(S)  # partial correlation from the precision matrix
    assert res["r_hat"] == pytest.approx(-P[1, 2] / math.sqrt(P[1, 1] * P[2, 2]), abs=1e-9)


def test_effective_sample_matches_fisher_dutilleul_and_statsmodels_acf():
    from statsmodels.tsa.stattools import acf

    n = 30
    M = residual_maker(np.linspace(0, 1, n) ** 2)
    assert z_dof(M, np.eye(n), np.eye(n), np.zeros((n, n))) == pytest.approx(n - 4)  # Fisher: n - 3 - k
    Ra, Rb = ar1_corr(0.7, n), ar1_corr(0.5, n)
    var0 = np.trace(M @ Ra @ M @ Rb) / (np.trace(M @ Ra) * np.trace(M @ Rb))  # Dutilleul's null variance
    assert z_dof(M, Ra, Rb, np.zeros((n, n))) == pytest.approx(1 / var0 - 2)
    # a long AR(1) series: the fitted phi agrees with statsmodels' lag-1 acf, and the null n_eff with the
    # Bartlett sum over statsmodels' acf of two such series
    rng = np.random.default_rng(3)
    N = 250
    e = np.zeros((2, N))
    eta = rng.standard_normal((2, N))
    for t in range(1, N):
        e[:, t] = 0.8 * e[:, t - 1] + 0.6 * eta[:, t]
    Ml = residual_maker(np.linspace(0, 1, N))
    phi, _ = fit_ar1(e @ Ml, Ml, np.zeros((N, N)))
    r1 = [acf(s, nlags=1, fft=True)[1] for s in e]
    assert phi == pytest.approx(r1, abs=0.03)
    a, b = (acf(s, nlags=40, fft=True) for s in e)
    bartlett = N / (1 + 2 * (a[1:] * b[1:]).sum())
    ours = 1 / (
        np.trace(Ml @ ar1_corr(phi[0], N) @ Ml @ ar1_corr(phi[1], N))
        / (np.trace(Ml @ ar1_corr(phi[0], N)) * np.trace(Ml @ ar1_corr(phi[1], N)))
    )
    assert ours == pytest.approx(bartlett, rel=0.3)
    assert ours == pytest.approx(N * (1 - 0.64) / (1 + 0.64), rel=0.3)  # Bretherton et al.'s AR(1) closed form


def test_smooth_trajectories_keep_the_false_distinguishable_rate_and_coverage():
    """40 checkpoints of AR(1) phi 0.8 trajectories, 128 items, ID as small as the OOD testsets: at true r = 0 the
    interval excludes 0 in <= 8 % of 240 runs (SE 0.014 at 5 %); the earlier ci2 (independent checkpoints, exact ID)
    does so far more often; at r = 0.5 coverage is 0.90-0.99."""
    disattenuated_ci = _superseded.disattenuated_ci
    from oodcorr.stats.partial import _corr_cols, fisher_ci, residualise_linear

    d = design_runs(240, 40, 128, 0.0, 0.8, 128, rng=np.random.default_rng(11))
    res = _interval(d, reliability_min=0.5)
    ok = np.isfinite(res["ci_low"])
    assert ok.mean() > 0.5
    rejects = ((res["ci_low"] > 0) | (res["ci_high"] < 0))[ok].mean()
    assert rejects <= 0.08
    ser = [m.mean(-1, dtype=np.float64) for m in d["items"]]
    r = _corr_cols(residualise_linear(ser[0], np.stack(ser[1:], -1)))[:, 0, 1]
    lo, hi = disattenuated_ci(*fisher_ci(r, 40, 1), res["rel_a"], res["rel_b"], 0.5)
    old = np.isfinite(lo)
    assert ((lo > 0) | (hi < 0))[old].mean() > 2 * rejects + 0.05
    d = design_runs(240, 40, 350, 0.5, 0.8, 350, rng=np.random.default_rng(12))
    res = _interval(d, reliability_min=0.5)
    ok = np.isfinite(res["ci_low"])
    assert 0.90 <= ((res["ci_low"] <= 0.5) & (0.5 <= res["ci_high"]))[ok].mean() <= 0.99


def test_answer_bias_with_imbalanced_labels_balanced_margin_interval_holds():
    d = design_runs(
        200,
        40,
        350,
        0.0,
        0.8,
        350,
        "balanced_margin",
        bias_sd=1.0,
        yes_share=(1 / 3, 0.28, 0.4),
        rng=np.random.default_rng(13),
    )
    res = _interval(d, reliability_min=0.5)
    ok = np.isfinite(res["ci_low"])
    assert ok.mean() > 0.8 and ((res["ci_low"] > 0) | (res["ci_high"] < 0))[ok].mean() <= 0.09


def test_interval_never_has_zero_width_and_is_one_sided_only_when_zero_is_excluded():
    A = np.array([0.5, 0.5, 0.9, 0.6])
    r_att = np.array([0.49, 0.2, 0.95, -0.58])
    lo, hi = disattenuated_bounds(r_att, A, np.full(4, 0.2))
    assert (hi > lo).all() and (lo >= -1).all() and (hi <= 1).all()
    assert hi[0] == 1 and lo[0] > 0 and lo[0] < r_att[0] / A[0]  # strong r: [one-sided lower bound, 1]
    assert lo[1] < 0 < hi[1]  # includes 0: the two-sided interval (the test of 0 is unchanged)
    assert lo[3] == -1 and hi[3] < 0


def test_plan_power_matches_the_simulated_rejection_rate():
    d = design_runs(300, 40, 350, 0.5, 0.0, 1000, rng=np.random.default_rng(21))
    res = _interval(d)
    ok = np.isfinite(res["ci_low"])
    sim = ((res["ci_low"] > 0) | (res["ci_high"] < 0))[ok].mean()
    pred = power(40, 0.5, float(np.median(res["A"])), 0.0)
    assert abs(pred - sim) <= 3 * math.sqrt(pred * (1 - pred) / ok.sum()) + 0.02
    assert effective_dof(40, 0.8, 0.9) < effective_dof(40, 0.0, 0.9)  # autocorrelation costs checkpoints
    assert power(40, 0.5, 0.9, 0.8, seeds=2) > power(40, 0.5, 0.9, 0.8, seeds=1)


def _pilot(root, n, constant_id=False):
    st = irt_study(n, [60, 60], np.eye(2), tau=0.05, n_id_items=60, rng=np.random.default_rng(1))
    if constant_id:
        st["x_items"][:] = st["x_items"][0]
        st["x_margin"][:] = st["x_margin"][0]
    steps = list(range(0, 10 * n, 10))
    ev = root / "runs" / "p-s0" / "eval"
    write_predictions(ev, st, steps, "mnli", ["hans", "anli"])
    write_jsonl(ev / "metrics.jsonl", irt_metrics_rows(st, "p-s0", "p", 0, steps, "mnli", ["hans", "anli"]))
    return ev / "metrics.jsonl"


@pytest.mark.parametrize(
    "n,constant,needle",
    [
        (6, False, "has 6 checkpoints; a pilot needs >= 10"),
        (12, True, "the ID series (mnli, balanced_margin) is constant"),
    ],
)
def test_plan_pilot_errors_are_one_line(tmp_path, monkeypatch, n, constant, needle):
    from oodcorr.cli import cli

    f = _pilot(tmp_path, n, constant)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["plan", "--pilot", str(f), "--detect-r", "0.5"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0] and "run 'p-s0'" in lines[0]


def test_plan_power_mode_cli(tmp_path, monkeypatch):
    from oodcorr.cli import cli

    f = _pilot(tmp_path, 16)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(
        cli,
        [
            "plan",
            "--pilot",
            str(f),
            "--detect-r",
            "0.5",
            "--seeds",
            "2",
            "--items",
            "128",
            "--reliability-product",
            "0.7",
            "--json",
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    got = json.loads(res.output)
    stated = got["rows"][-1]
    assert stated["reliability"] == pytest.approx(math.sqrt(0.7)) and stated["power"] >= 0.8
    # the interval's own power (gp_design, the gate counted) one checkpoint fewer: short of 0.8 (the smallest such n)
    from oodcorr.planner.budget import kernel_share
    from oodcorr.planner.modes import interval_at

    n, rel = stated["checkpoints"] - 1, math.sqrt(0.7)
    noise = got["signal_var"] * kernel_share(n, got["ell"]) * (1 - rel) / rel - got["leak"]
    assert interval_at(n, got["signal_var"], noise, got["leak"], got["ell"], 0.5, 0.05, 0.5, [2])["power"][0] < 0.8
    res = CliRunner().invoke(cli, ["plan", "--detect-r", "1.5"])
    assert res.exit_code == 2 and "--detect-r must be in (0, 1)" in res.output


def test_equivalence_verdicts_on_hand_made_intervals():
    assert list(equivalent([-0.2, -0.4, 0.35, np.nan], [0.25, 0.1, 0.6, 0.1], 0.3)) == [True, False, False, False]
    rel = [0.9, 0.9]
    inside = noise_verdict([0.05, -0.02], [-0.2, -0.25], [0.25, 0.2], rel, rel, equivalence=0.3)
    straddling = noise_verdict([0.05, 0.1], [-0.2, -0.35], [0.25, 0.5], rel, rel, equivalence=0.3)
    outside = noise_verdict([0.5, 0.55], [0.35, 0.4], [0.7, 0.75], rel, rel, equivalence=0.3)
    assert (inside, straddling, outside) == ("consistent_null", "insufficient_evidence", "consistent_positive")
    # an unreliable model does not count; fewer than 2 reliable models is still `unreliable`
    assert (
        noise_verdict([0.05, 0.0, 0.4], [-0.2, -0.2, -0.5], [0.25, 0.2, 0.9], [0.9, 0.9, 0.2], [0.9] * 3)
        == "consistent_null"
    )
    assert noise_verdict([0.05, 0.0], [-0.2, -0.2], [0.25, 0.2], [0.9, 0.3], [0.9, 0.9]) == "unreliable"
    assert noise_verdict([0.05, 0.0], [-0.2, -0.2], [0.25, 0.2], rel, rel, equivalence=0.2) == "insufficient_evidence"
    # without the noise analysis: the models' Fisher CIs
    assert verdict([0.05, 0.0], [0.8, 0.9], 0.05, [-0.2, -0.25], [0.25, 0.24]) == "consistent_null"
    assert verdict([0.05, 0.0], [0.8, 0.9], 0.05, [-0.2, -0.45], [0.25, 0.4]) == "insufficient_evidence"


def test_seed_pooling_is_inverse_variance_on_the_attenuated_z():
    v = pd.DataFrame(
        {
            "r": [0.3, 0.5],
            "n": [30, 40],
            "k": [1.0, 1.0],
            "rel_a": [0.8, 0.7],
            "rel_b": [0.9, 0.6],
            "r_disattenuated": [0.4, 0.7],
            "attenuation": [0.8, 0.6],
            "ci2_se": [0.2, 0.25],
            "n_eff": [30.0, 20.0],
            "ci2_low": [0.0, 0.1],
            "ci2_high": [0.8, 1.0],
        }
    )
    got = _pool_noise(v, 0.05)
    w = np.array([1 / 0.04, 1 / 0.0625])
    z = (w * np.arctanh([0.32, 0.42])).sum() / w.sum()
    a = (w * [0.8, 0.6]).sum() / w.sum()
    s = 1 / math.sqrt(w.sum())
    assert got["ci2_low"] == pytest.approx(math.tanh(z - 1.959964 * s) / a, abs=1e-6)
    assert got["ci2_high"] == pytest.approx(min(1.0, math.tanh(z + 1.959964 * s) / a), abs=1e-6)
    assert got["r_disattenuated"] == pytest.approx(math.tanh(z) / a, abs=1e-9)


def test_a_pooled_point_estimate_lies_inside_its_own_interval_when_one_seed_reads_minus_one():
    """The seeds-pooled r_disattenuated is the pooled interval's own centre: one seed whose disattenuated r is
    clipped at -1 (a low-reliability seed) does not drag it to -1 outside [ci2_low, ci2_high], as an unweighted
    Fisher-z mean of the seeds' r_disattenuated did."""
    v = pd.DataFrame(
        {
            "r": [-0.3, -0.4, -0.2],
            "n": [17] * 3,
            "k": [1.0] * 3,
            "rel_a": [0.8, 0.9, 0.5],
            "rel_b": [0.7, 0.8, 0.4],
            "r_disattenuated": [-0.45, -0.5, -1.0],
            "attenuation": [0.75, 0.85, 0.45],
            "ci2_se": [0.3, 0.28, 0.6],
            "n_eff": [8.0, 9.0, 5.0],
            "ci2_low": [-0.9, -0.85, -1.0],
            "ci2_high": [0.1, 0.0, 0.9],
        }
    )
    got = _pool_noise(v, 0.05)
    assert got["ci2_low"] <= got["r_disattenuated"] <= got["ci2_high"]
    assert -0.9 < got["r_disattenuated"] < -0.3
    v["r_disattenuated"] = np.nan  # no seed has a disattenuated r: nothing pooled
    assert math.isnan(_pool_noise(v, 0.05)["r_disattenuated"])


def test_analyze_equivalence_outside_unit_interval_is_one_line(tmp_path):
    from oodcorr.analysis.pipeline import run_analysis

    f = _pilot(tmp_path, 12)
    for bad in (0, 1.2, -0.1):
        with pytest.raises(UserError, match=r"^analyze.equivalence: must be a number in \(0, 1\)"):
            run_analysis([f], tmp_path / "out", methods=("linear",), plots=False, equivalence=bad)
    assert not (tmp_path / "out").exists()
