"""Correlation methods against independent computations and against ground truth by construction."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from oodcorr.stats.partial import (
    GAM_ALPHAS,
    adjust_pvalues,
    analyse_matrix,
    fisher_ci,
    gam_design,
    gam_fit,
    pingouin_partial,
)
from oodcorr.stats.simulate import trajectories


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(42)
    steps, x, Y = trajectories(60, 0.5, ("quadratic", "sigmoid", "hump"), noise=0.02, rng=rng)
    return x, Y


def test_linear_equals_ols_residual_correlation_and_pingouin(data):
    import statsmodels.api as sm

    x, Y = data
    rows = analyse_matrix(x, Y, ["a", "b", "c"], "linear")
    X = sm.add_constant(x)
    resid = np.column_stack([sm.OLS(Y[:, j], X).fit().resid for j in range(3)])
    expected = np.corrcoef(resid.T)
    frame = pd.DataFrame({"x": x, "a": Y[:, 0], "b": Y[:, 1], "c": Y[:, 2]})
    for row in rows:
        i, j = "abc".index(row["testset_a"]), "abc".index(row["testset_b"])
        assert abs(row["r"] - expected[i, j]) <= 1e-9
        ref = pingouin_partial(frame, row["testset_a"], row["testset_b"], "x")
        assert abs(row["r"] - ref["r"]) <= 1e-9
        assert row["p"] == pytest.approx(ref["p"], rel=1e-6)  # pingouin uses the same df = n - 2 - 1
        assert (row["k"], row["df"]) == (1.0, 60 - 3)


def test_rank_equals_pingouin_spearman_and_raw_equals_pearson(data):
    x, Y = data
    frame = pd.DataFrame({"x": x, "a": Y[:, 0], "b": Y[:, 1]})
    rank = analyse_matrix(x, Y[:, :2], ["a", "b"], "rank")[0]
    assert abs(rank["r"] - pingouin_partial(frame, "a", "b", "x", "spearman")["r"]) <= 1e-9
    raw = analyse_matrix(x, Y[:, :2], ["a", "b"], "raw")[0]
    assert abs(raw["r"] - stats.pearsonr(Y[:, 0], Y[:, 1])[0]) <= 1e-12
    assert raw["k"] == 0 and raw["p"] == pytest.approx(stats.pearsonr(Y[:, 0], Y[:, 1])[1], rel=1e-9)


def test_p_values_use_stated_df_and_fisher_ci(data):
    x, Y = data
    for method in ("linear", "gam"):
        for row in analyse_matrix(x, Y, ["a", "b", "c"], method):
            r, df, n, k = row["r"], row["df"], row["n"], row["k"]
            assert df == pytest.approx(n - 2 - k, abs=1e-3)
            t = r * np.sqrt(row["df"] / (1 - r**2))
            assert row["p"] == pytest.approx(2 * stats.t.sf(abs(t), row["df"]), rel=1e-6)
            z, se = np.arctanh(r), 1 / np.sqrt(n - 3 - row["k"])
            assert row["ci_low"] == pytest.approx(np.tanh(z - 1.959963984540054 * se), abs=1e-9)
            assert row["ci_high"] == pytest.approx(np.tanh(z + 1.959963984540054 * se), abs=1e-9)
    lo, hi = fisher_ci(0.3, 4, 1)  # n - 3 - k = 0: undefined
    assert np.isnan(lo) and np.isnan(hi)


def test_gam_residuals_equal_statsmodels_glmgam(data):
    from statsmodels.gam.api import GLMGam

    x, Y = data
    resid, edf, alpha = gam_fit(x, Y)
    _, _, bs = gam_design(x)
    for j in range(Y.shape[1]):
        fit = GLMGam(Y[:, j], exog=np.ones((len(x), 1)), smoother=bs, alpha=alpha[j]).fit()
        assert np.max(np.abs((Y[:, j] - fit.fittedvalues) - resid[:, j])) <= 1e-6
        assert edf[j] == pytest.approx(fit.edf.sum(), abs=1e-6)
        assert alpha[j] in GAM_ALPHAS
    rows = analyse_matrix(x, Y, ["a", "b", "c"], "gam")
    r01 = np.corrcoef(resid[:, 0], resid[:, 1])[0, 1]
    assert abs(rows[0]["r"] - r01) <= 1e-6
    assert rows[0]["k"] == pytest.approx(max(edf[0], edf[1]) - 1, abs=1e-4)


@pytest.mark.parametrize("rho", [0.6, 0.0])
def test_gam_recovers_rho_where_linear_is_biased(rho):
    rng = np.random.default_rng(7)
    lin, gam = [], []
    for _ in range(12):
        _, x, Y = trajectories(80, rho, ("quadratic", "sigmoid"), noise=0.02, rng=rng)
        lin.append(analyse_matrix(x, Y, ["a", "b"], "linear")[0]["r"])
        gam.append(analyse_matrix(x, Y, ["a", "b"], "gam")[0]["r"])
    assert abs(np.mean(gam) - rho) < 0.1
    assert abs(np.mean(lin) - rho) > 2 * abs(np.mean(gam) - rho)


def test_linear_p_values_calibrated_under_null():
    rng = np.random.default_rng(123)
    hits = 0
    n_sim = 400
    for _ in range(n_sim):
        _, x, Y = trajectories(50, 0.0, ("linear", "linear"), noise=0.02, rng=rng)
        hits += analyse_matrix(x, Y, ["a", "b"], "linear")[0]["p"] < 0.05
    assert 0.02 <= hits / n_sim <= 0.09


def test_bootstrap_ci_brackets_estimate_and_is_reproducible(data):
    x, Y = data
    for method in ("linear", "rank", "gam", "raw"):
        a = analyse_matrix(x, Y, ["a", "b", "c"], method, n_boot=300, rng=np.random.default_rng(1))
        b = analyse_matrix(x, Y, ["a", "b", "c"], method, n_boot=300, rng=np.random.default_rng(1))
        for ra, rb in zip(a, b):
            assert ra["boot_ci_low"] == rb["boot_ci_low"]
            assert ra["boot_ci_low"] - 0.05 <= ra["r"] <= ra["boot_ci_high"] + 0.05
            assert ra["boot_ci_low"] < ra["boot_ci_high"]


def test_multiple_testing_adjustment_keeps_nan():
    from statsmodels.stats.multitest import multipletests

    p = np.array([0.01, np.nan, 0.04, 0.03])
    holm, bh = adjust_pvalues(p)
    assert np.isnan(holm[1]) and np.isnan(bh[1])
    np.testing.assert_allclose(holm[[0, 2, 3]], multipletests(p[[0, 2, 3]], method="holm")[1])
    np.testing.assert_allclose(bh[[0, 2, 3]], multipletests(p[[0, 2, 3]], method="fdr_bh")[1])


def test_adjustment_matches_statsmodels_on_random_p():
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(5)
    for m in (1, 2, 7, 50):
        p = rng.uniform(0, 0.2, m) ** 2
        p[rng.integers(0, m)] = p[0]  # ties
        holm, bh = adjust_pvalues(p)
        np.testing.assert_allclose(holm, multipletests(p, method="holm")[1], rtol=1e-12)
        np.testing.assert_allclose(bh, multipletests(p, method="fdr_bh")[1], rtol=1e-12)
