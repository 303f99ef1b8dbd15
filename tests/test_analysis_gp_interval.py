"""The likelihood interval (stats.gp_interval) against independent computations: scipy's multivariate normal
for the likelihood, finite differences for its score, pingouin's partial correlation for the independent-
checkpoint limit, and the ID smoother against the truth it is meant to recover."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import multivariate_normal

from oodcorr.stats import gp_design as D
from oodcorr.stats import gp_interval as G
from oodcorr.stats import gp_model as GM
from oodcorr.stats import gp_smooth as GS


def _seed(rng, n=20, rho=0.5, ell=0.2, noise=0.01, id_noise=0.01, sig=0.3):
    t = np.linspace(0, 1, n)
    R = np.exp(-0.5 * (np.subtract.outer(t, t) / ell) ** 2) + 1e-9 * np.eye(n)
    L = np.linalg.cholesky(R)
    w1, w2 = L @ rng.standard_normal(n), L @ rng.standard_normal(n)
    x_true = 1.5 * (1 - np.exp(-t / 0.3))
    a = 0.7 * x_true + sig * w1 + math.sqrt(noise) * rng.standard_normal(n)
    b = 0.8 * x_true + sig * (rho * w1 + math.sqrt(1 - rho**2) * w2) + math.sqrt(noise) * rng.standard_normal(n)
    x = x_true + math.sqrt(id_noise) * rng.standard_normal(n)
    return {
        "x": x,
        "ya": a,
        "yb": b,
        "Vx": id_noise * np.eye(n),
        "Va": noise * np.eye(n),
        "Vb": noise * np.eye(n),
        "t": t,
    }, x_true


def test_loglik_equals_scipy_multivariate_normal_with_the_coregionalised_covariance():
    rng = np.random.default_rng(0)
    seed, _ = _seed(rng)
    s = G._seed_terms(seed)
    sa2, sb2, ell, rho = 0.05, 0.08, 0.17, 0.4
    ll, _, _ = GM._loglik_and_score(
        [s], np.array([[math.log(sa2), math.log(sb2), math.log(ell)]]), np.array([rho]), "se"
    )
    # independent: the ICM covariance B (x) R built with np.kron, projected, plus the noise blocks
    t = seed["t"]
    R = np.exp(-0.5 * (np.subtract.outer(t, t) / ell) ** 2)
    B = np.array([[sa2, rho * math.sqrt(sa2 * sb2)], [rho * math.sqrt(sa2 * sb2), sb2]])
    Q2 = np.kron(np.eye(2), s["Q"])
    N = np.block([[s["Na"], s["C"]], [s["C"], s["Nb"]]])
    cov = Q2.T @ np.kron(B, R) @ Q2 + N
    want = multivariate_normal(np.zeros(len(cov)), cov).logpdf(s["z"])
    assert ll[0] == pytest.approx(want, rel=1e-7)


def test_score_matches_finite_differences():
    rng = np.random.default_rng(1)
    s = G._seed_terms(_seed(rng)[0])
    theta = np.array([[math.log(0.05), math.log(0.08), math.log(0.17)]])
    rho = np.array([0.3])
    _, g, info = GM._loglik_and_score([s], theta, rho, "se")
    h = 1e-5
    for p in range(3):
        up, dn = theta.copy(), theta.copy()
        up[0, p] += h
        dn[0, p] -= h
        ll_up = GM._loglik_and_score([s], up, rho, "se", False)[0]
        fd = (ll_up - GM._loglik_and_score([s], dn, rho, "se", False)[0]) / (2 * h)
        assert g[0, p] == pytest.approx(fd[0], rel=1e-4, abs=1e-6)
    assert np.all(np.linalg.eigvalsh(info[0]) > 0)


def test_independent_checkpoints_without_noise_agree_with_pingouins_partial_correlation():
    pg = pytest.importorskip("pingouin")
    import pandas as pd

    rng = np.random.default_rng(2)
    n = 80
    t = np.linspace(0, 1, n)
    x = 1.5 * (1 - np.exp(-t / 0.3))
    u = rng.standard_normal(n)
    v = 0.6 * u + 0.8 * rng.standard_normal(n)
    a, b = 0.7 * x + 0.3 * u, 0.8 * x + 0.3 * v
    z = np.zeros((n, n))
    res = G.gp_interval([{"x": x, "ya": a, "yb": b, "Vx": z, "Va": 1e-8 * np.eye(n), "Vb": 1e-8 * np.eye(n), "t": t}])
    ref = pg.partial_corr(pd.DataFrame({"a": a, "b": b, "x": x}), x="a", y="b", covar="x")
    lo, hi = ref["CI95"].iloc[0]
    assert res["r_hat"] == pytest.approx(float(ref["r"].iloc[0]), abs=0.03)
    assert res["ci_low"] == pytest.approx(lo, abs=0.06) and res["ci_high"] == pytest.approx(hi, abs=0.06)
    assert res["ell"] < 1.5 / (n - 1)  # independent checkpoints are not taken for a smooth trajectory
    assert res["n_eff"] == pytest.approx(n, rel=0.1)


def test_the_id_smoother_recovers_the_noise_free_curve_and_leaves_an_exact_control_alone():
    rng = np.random.default_rng(3)
    errs_raw, errs_smooth = [], []
    for _ in range(20):
        seed, x_true = _seed(rng, n=30, id_noise=0.02)
        xs, P = GS.smooth_id(seed["x"], seed["Vx"], seed["t"])
        errs_raw.append(np.mean((seed["x"] - x_true) ** 2))
        errs_smooth.append(np.mean((xs - x_true) ** 2))
        assert np.all(np.linalg.eigvalsh(P) > -1e-10)
    assert np.mean(errs_smooth) < 0.5 * np.mean(errs_raw)
    x = np.linspace(0, 1, 10) ** 2
    xs, P = GS.smooth_id(x, np.zeros((10, 10)), np.linspace(0, 1, 10))
    assert np.array_equal(xs, x) and not P.any()


def test_pooled_seeds_narrow_the_interval_and_a_lone_smooth_seed_says_why_in_words():
    from oodcorr.stats.pair_ci2 import interval

    rng = np.random.default_rng(4)
    runs = []
    for _ in range(4):
        seed, _ = _seed(rng, n=20, rho=0.6, noise=0.004, id_noise=0.004)
        runs.append(
            {
                "t": seed["t"],
                "id": "mnli",
                "series": {"mnli": seed["x"], "a": seed["ya"], "b": seed["yb"]},
                "V": {"mnli": seed["Vx"], "a": seed["Va"], "b": seed["Vb"]},
            }
        )
    one = interval(runs[:1], "a", "b", 0.05)
    four = interval(runs, "a", "b", 0.05)
    assert np.isfinite([one["ci_low"], one["ci_high"], four["ci_low"], four["ci_high"]]).all()
    assert four["ci_high"] - four["ci_low"] < one["ci_high"] - one["ci_low"]
    assert four["n_eff"] > 3 * one["n_eff"] * 0.8  # effective sample sizes add over seeds
    assert "effectively independent checkpoints over 1 seed" in one["why"]
    assert "oodcorr plan" in one["why"]


def test_design_power_rises_with_seeds_and_seeds_for_power_is_the_first_to_reach_it():
    s = D.design_terms(20, 0.005, 0.005)
    p = [D.design_power([s], 0.05, 0.05, 0.2, 0.5, copies=k) for k in (1, 4, 16)]
    assert p[0] < p[1] < p[2]
    k = D.seeds_for_power([s], 0.05, 0.05, 0.2, 0.5)
    assert D.design_power([s], 0.05, 0.05, 0.2, 0.5, copies=k) >= 0.8
    assert D.design_power([s], 0.05, 0.05, 0.2, 0.5, copies=k - 1) < 0.8


def test_lr_cut_tends_to_chi_square_and_grows_for_few_effective_checkpoints():
    from scipy.stats import chi2

    assert G.lr_cut(1e5) == pytest.approx(chi2.ppf(0.95, 1), rel=1e-3)
    assert G.lr_cut(3) > G.lr_cut(10) > G.lr_cut(100) > chi2.ppf(0.95, 1)


def test_the_analysis_pools_seeds_in_one_likelihood_and_can_share_one_estimate_across_models(tmp_path):
    """pooled_seeds.csv's linear ci2 is the joint likelihood over a model's seeds (not a pool of per-seed
    intervals): it is defined for every pair whose runs have series, its n_eff is about the sum of the runs',
    and analyze.pool_models adds one shared estimate per pair over both models."""
    import pandas as pd

    from oodcorr.analysis.pipeline import run_analysis
    from test_analysis_noise import make_project

    files = make_project(tmp_path, models=("m1", "m2"), seeds=(0, 1), n=12, items=(200, 200, 40))
    out = tmp_path / "results"
    run_analysis(files, out, methods=("linear",), plots=False, metric="accuracy", pool_models=True)
    p = pd.read_csv(out / "partial_correlations.csv")
    lin = p[(p["method"] == "linear") & p["r"].notna()]
    assert {"ci2_ell", "ci2_why"} <= set(p.columns)
    assert ((lin["rel_a"] > 0) & (lin["rel_a"] < 1)).all()  # the interval's own (fitted) reliabilities
    pooled = pd.read_csv(out / "pooled_seeds.csv")
    pl = pooled[pooled["method"] == "linear"]
    assert pl["ci2_low"].notna().all() and (pl["ci2_low"] < pl["ci2_high"]).all()
    # the even-weight estimate beside it (gp_even), for linear rows only
    for tab in (lin, pl):
        ok = tab["r_even"].notna()
        assert ok.any()
        assert ((tab["ci2even_low"][ok] <= tab["r_even"][ok]) & (tab["r_even"][ok] <= tab["ci2even_high"][ok])).all()
    assert p.loc[p["method"] != "linear", "r_even"].isna().all()
    for _, row in pl.iterrows():
        runs = lin[
            (lin["model"] == row["model"])
            & (lin["testset_a"] == row["testset_a"])
            & (lin["testset_b"] == row["testset_b"])
        ]
        assert row["n_eff"] == pytest.approx(runs["n_eff"].sum(), rel=0.35)
    cons = pd.read_csv(out / "consistency.csv")
    cl = cons[cons["method"] == "linear"]
    assert {"r_shared", "ci2_shared_low", "ci2_shared_high", "shared_why"} <= set(cons.columns)
    assert cl["ci2_shared_low"].notna().all() and (cl["ci2_shared_low"] <= cl["r_shared"]).all()
    report = out / "report.html"
    pooled_why = pl["ci2_why"].dropna()
    if report.exists() and len(pooled_why) and (cl["verdict"] != "consistent_positive").any():
        assert "effectively independent checkpoints" in report.read_text()  # the words reach the verdict table


def _profile(terms, rho, bounds, kernel):
    """The profile log-likelihood at `rho` by scipy's L-BFGS-B from 27 starts over (log sa2, log sb2, log ell):
    independent of the Fisher scoring and the warm starts the interval's own search uses."""
    from scipy.optimize import minimize

    lo, hi = bounds[0][:3], bounds[1][:3]

    def nll(th):
        return -float(GM._loglik_and_score(terms, th[None, :], np.array([rho]), kernel, want_derivs=False)[0][0])

    starts = [lo + (hi - lo) * np.array(f) for f in np.stack(np.meshgrid(*[[0.2, 0.5, 0.8]] * 3), -1).reshape(-1, 3)]
    return -min(minimize(nll, s, method="L-BFGS-B", bounds=list(zip(lo, hi))).fun for s in starts)


def test_an_estimate_at_the_boundary_keeps_the_interval_the_profile_gives():
    """A real case (studies/breadth's first two Gemma seeds, ANLI R1 ~ SciTail): the maximum sits at rho = -1, and
    a profile fit warm-started from the far side once fell into a basin where one signal variance is at its floor
    and rho does not matter, which ended the interval at [-1.00, -1.00]. Its upper end must be where the profile
    likelihood, maximised independently, crosses the cut: inside it below, outside it above."""
    case = np.load(Path(__file__).parent / "fixtures" / "ci2_boundary_case.npz")
    seeds = [{k: case[f"s{i}_{k}"] for k in ("x", "ya", "yb", "Vx", "Va", "Vb", "t")} for i in (0, 1)]
    res = G.gp_interval(seeds, 0.05)
    assert res["r_hat"] < -0.99 and res["ci_low"] == -1.0
    terms = res["terms"]
    za = np.concatenate([s["z"][: s["m"]] for s in terms])
    zb = np.concatenate([s["z"][s["m"] :] for s in terms])
    bounds, kernel, _ = G._kernel_fit(terms, float(np.mean(za**2)), float(np.mean(zb**2)), res["kernel"])
    cut = G.lr_cut(res["n_eff"] - 2 * len(terms) - 1, 0.05)
    top = max(_profile(terms, r, bounds, kernel) for r in (res["r_hat"], -0.99, -0.97))
    hi = res["ci_high"]
    assert hi < -0.8  # where the profile crosses here: about -0.89
    assert 2 * (top - _profile(terms, hi - 0.02, bounds, kernel)) < cut
    assert 2 * (top - _profile(terms, hi + 0.02, bounds, kernel)) > cut
