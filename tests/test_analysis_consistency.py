"""Seed pooling (Fisher z, Q, I^2) and cross-model verdicts on constructed multi-model inputs."""

import numpy as np
import pandas as pd
import pytest

from oodcorr.analysis.pipeline import compute_partials, run_analysis
from oodcorr.core.io import write_jsonl
from oodcorr.records.run_tables import build_runs, load_metrics
from oodcorr.stats.consistency import cross_model, fisher_pool, pool_seeds
from oodcorr.stats.simulate import metrics_rows
from oodcorr.stats.verdicts import verdict


def test_fisher_pool_matches_hand_computation():
    r, w = np.array([0.2, 0.5, 0.35]), np.array([40.0, 20.0, 57.0])
    z = np.arctanh(r)
    zbar = (w * z).sum() / w.sum()
    q = (w * (z - zbar) ** 2).sum()
    out = fisher_pool(r, w)
    assert out["r"] == pytest.approx(np.tanh(zbar))
    assert out["ci_low"] == pytest.approx(np.tanh(zbar - 1.959963984540054 / np.sqrt(w.sum())))
    assert out["q"] == pytest.approx(q)
    assert out["i2"] == pytest.approx(max(0, (q - 2) / q))
    assert fisher_pool([np.nan], [10])["m"] == 0


def test_verdict_rules():
    assert verdict([0.5, 0.4, 0.3], [0.001, 0.01, 0.2]) == "consistent_positive"
    assert verdict([-0.5, -0.4], [0.001, 0.01]) == "consistent_negative"
    assert verdict([0.5, -0.4, 0.1], [0.001, 0.01, 0.9]) == "model_dependent"
    assert verdict([0.5, 0.1, -0.1], [0.001, 0.5, 0.5]) == "insufficient_evidence"  # only one significant
    assert verdict([0.5], [0.001]) == "insufficient_evidence"  # one model cannot show consistency
    assert verdict([0.5, np.nan], [0.001, np.nan]) == "insufficient_evidence"


def _partials(tmp_path, spec, n_steps=60, seeds=(0, 1)):
    """spec: {model: rho between the first two OOD testsets}; linear shapes so linear is unbiased."""
    files = []
    for model, rho in spec.items():
        for seed in seeds:
            path = tmp_path / f"{model}-{seed}.jsonl"
            write_jsonl(path, metrics_rows(model, seed, n_steps, rho, ["a", "b", "c"], shapes=["linear"] * 3))
            files.append(path)
    return compute_partials(build_runs(load_metrics(files)), ["linear"])


def _pair(cons, a="a", b="b"):
    return cons[(cons["testset_a"] == a) & (cons["testset_b"] == b)].iloc[0]


def test_pool_seeds_weights_and_heterogeneity(tmp_path):
    partials = _partials(tmp_path, {"m1": 0.6})
    pooled = pool_seeds(partials)
    row = pooled[(pooled["testset_a"] == "a") & (pooled["testset_b"] == "b")].iloc[0]
    seeds = partials[(partials["testset_a"] == "a") & (partials["testset_b"] == "b")]
    ref = fisher_pool(seeds["r"], seeds["n"] - 3 - seeds["k"])
    assert row["n_seeds"] == 2 and row["r"] == pytest.approx(ref["r"]) and row["i2"] == pytest.approx(ref["i2"])
    assert row["n_total"] == 120 and row["seeds"] == "0,1"
    assert {"p_bh", "ci_low", "ci_high", "q"} <= set(pooled.columns)


def test_same_sign_everywhere_is_consistent(tmp_path):
    cons = cross_model(pool_seeds(_partials(tmp_path, {"m1": 0.7, "m2": 0.6, "m3": 0.65})))
    row = _pair(cons)
    assert row["verdict"] == "consistent_positive" and row["n_models_sig"] == 3 and not row["sign_flip"]
    neg = cross_model(pool_seeds(_partials(tmp_path, {"m1": -0.7, "m2": -0.6})))
    assert _pair(neg)["verdict"] == "consistent_negative"


def test_flipped_sign_is_model_dependent(tmp_path):
    cons = cross_model(pool_seeds(_partials(tmp_path, {"m1": 0.7, "m2": 0.7, "m3": -0.7})))
    row = _pair(cons)
    assert row["verdict"] == "model_dependent"
    assert (row["n_sig_positive"], row["n_sig_negative"]) == (2, 1) and row["sign_flip"]
    assert row["i2"] > 0.5 and row["q_p"] < 0.05
    assert "m3: -0." in row["models"]


def test_too_little_data_is_insufficient(tmp_path):
    cons = cross_model(pool_seeds(_partials(tmp_path, {"m1": 0.0, "m2": 0.0}, n_steps=8, seeds=(0,))))
    assert set(cons["verdict"]) == {"insufficient_evidence"}
    one_model = cross_model(pool_seeds(_partials(tmp_path, {"m1": 0.8})))
    assert _pair(one_model)["verdict"] == "insufficient_evidence"


def test_summary_counts_verdicts(tmp_path):
    files = []
    for model, rho in {"m1": 0.7, "m2": 0.7, "m3": -0.7}.items():
        path = tmp_path / f"{model}.jsonl"
        write_jsonl(path, metrics_rows(model, 0, 50, rho, ["a", "b", "c"], shapes=["linear"] * 3))
        files.append(path)
    summary = run_analysis(files, tmp_path / "out", methods=("linear",), plots=False)
    lin = summary["methods"]["linear"]
    assert summary["n_runs"] == 3 and summary["n_models"] == 3 and summary["n_pairs"] == 3
    assert lin["verdicts"]["model_dependent"] == 1 and sum(lin["verdicts"].values()) == 3
    assert "raw" in summary["methods"]  # always computed as the unpartialled reference
    cons = pd.read_csv(tmp_path / "out" / "consistency.csv")
    assert set(cons["method"]) == {"linear", "raw"}


def test_a_pooled_row_is_flagged_by_the_reliabilities_its_own_interval_used(tmp_path):
    """A seed's `unreliable:` flag (its own, one-seed fit) does not stick to the pooled row, whose interval is one
    likelihood over every seed: the row flags the testsets whose pooled reliability is below the threshold, and
    keeps the seeds' other flags."""
    partials = _partials(tmp_path, {"m1": 0.6}).copy()
    ab = (partials["testset_a"] == "a") & (partials["testset_b"] == "b")
    for col in ("ci2_low", "ci2_high", "ci2_se", "attenuation", "r_disattenuated", "rel_a", "rel_b", "n_eff"):
        partials[col] = np.nan
    partials.loc[ab & (partials["seed"] == 0), "flag"] = "unreliable:b;collinear_with_id:b"
    key = tuple(
        partials.loc[ab, ["model", "train_set", "shots", "id_testset", "method", "testset_a", "testset_b"]].iloc[0]
    )
    iv = {
        "reason": "",
        "ci_low": 0.2,
        "ci_high": 0.9,
        "se_z": 0.3,
        "n_eff": 40.0,
        "A": 0.8,
        "r_hat": 0.6,
        "rel_a": 0.45,
        "rel_b": 0.7,
        "ell": 0.2,
        "why": "",
    }
    row = (
        pool_seeds(partials, ci2_pooled={key: iv}, reliability_min=0.5)
        .query("testset_a == 'a' and testset_b == 'b'")
        .iloc[0]
    )
    assert row["flag"].split(";") == ["collinear_with_id:b", "unreliable:a"]
    assert (row["rel_a"], row["rel_b"]) == (0.45, 0.7)
    # without a pooled likelihood and no noise columns the seeds' flags are all kept
    row = pool_seeds(partials).query("testset_a == 'a' and testset_b == 'b'").iloc[0]
    assert "unreliable:b" in row["flag"].split(";")


def test_a_pooled_row_without_a_joint_likelihood_is_flagged_by_its_own_mean_reliabilities_and_interval(tmp_path):
    """rank / gam rows pool the seeds' own intervals: one seed's unreliable testset (its interval undefined) does not
    flag the pooled row when the seeds' mean reliability passes and the pooled interval is defined from the others;
    where no seed has an interval the row keeps `ci2_undefined`."""
    partials = _partials(tmp_path, {"m1": 0.6}).copy()
    ab = (partials["testset_a"] == "a") & (partials["testset_b"] == "b")
    seeds = sorted(partials.loc[ab, "seed"].unique())
    assert len(seeds) >= 2
    vals = {
        "ci2_low": 0.1,
        "ci2_high": 0.8,
        "ci2_se": 0.3,
        "attenuation": 0.9,
        "r_disattenuated": 0.5,
        "rel_a": 0.9,
        "rel_b": 0.8,
        "n_eff": 10.0,
    }
    for col, v in vals.items():
        partials[col] = v
    bad = ab & (partials["seed"] == seeds[0])
    partials.loc[bad, ["ci2_low", "ci2_high", "ci2_se", "r_disattenuated"]] = np.nan
    partials.loc[bad, "rel_b"] = 0.45
    partials.loc[bad, "flag"] = "unreliable:b;ci2_undefined:unreliable;collinear_with_id:b"
    pooled = pool_seeds(partials, reliability_min=0.5)
    row = pooled.query("testset_a == 'a' and testset_b == 'b'").iloc[0]
    assert np.isfinite(row["ci2_low"]) and row["rel_b"] > 0.5
    assert row["flag"].split(";") == ["collinear_with_id:b"]
    partials.loc[ab, ["ci2_low", "ci2_high", "ci2_se", "r_disattenuated"]] = np.nan  # no seed has an interval
    partials.loc[ab, "rel_a"] = 0.3
    row = pool_seeds(partials, reliability_min=0.5).query("testset_a == 'a' and testset_b == 'b'").iloc[0]
    assert np.isnan(row["ci2_low"])
    assert row["flag"].split(";") == ["ci2_undefined:unreliable", "collinear_with_id:b", "unreliable:a"]
