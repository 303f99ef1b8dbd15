"""Answer bias: class-balanced metrics from the stored log-probs, gold-stratified reliability halves, the
answer_bias diagnosis. Values are checked against independent computations (explicit pair loops, pandas
groupby) and against the simulator with a shared "Yes" bias whose true partial r is 0."""

import math

import numpy as np
import pandas as pd
import pytest

from oodcorr.aggregate import stratified_halves, values
from oodcorr.analysis.simulate import answer_bias_study, prediction_table
from oodcorr.errors import UserError
from oodcorr.metrics import ANALYSABLE, METRICS, check_metric, table_metrics, value_of


def _table(gold, m):
    return prediction_table(np.asarray(gold, bool), np.asarray(m, float))


def test_an_additive_log_odds_shift_leaves_balanced_margin_and_auc_unchanged():
    rng = np.random.default_rng(3)
    gold = np.r_[np.ones(30, bool), np.zeros(70, bool)]  # 30 % gold "Yes"
    m = np.where(gold, 0.8, -0.8) + rng.normal(0, 1.2, 100)
    before = table_metrics(_table(gold, m))
    after = table_metrics(_table(gold, m + 1.5))  # every item's log-odds of " Yes" shifted: an answer bias
    for name in ("balanced_margin", "auc"):
        assert METRICS[name].bias_invariant
        assert after[name] == pytest.approx(before[name], abs=1e-9), name
    # the same shift moves accuracy and the share of "Yes" answers (more "Yes" on a mostly-"No" testset)
    assert after["yes_rate"] > before["yes_rate"] + 0.2
    assert after["accuracy"] < before["accuracy"] - 0.1
    assert after["mean_margin"] != pytest.approx(before["mean_margin"], abs=1e-3)
    assert not METRICS["accuracy"].bias_invariant and not METRICS["mean_margin"].bias_invariant


def test_balanced_metrics_match_independent_computations():
    rng = np.random.default_rng(0)
    gold = rng.random(57) < 0.35
    m = np.round(np.where(gold, 0.5, -0.3) + rng.normal(0, 1, 57), 1)  # rounded: ties count 1/2 in the AUC
    t = _table(gold, m)
    df = pd.DataFrame({"gold": gold, "m": m, "correct": (m >= 0) == gold})
    recall = df.groupby("gold")["correct"].mean()
    assert value_of(t, "balanced_accuracy") == pytest.approx(recall.mean())
    by = df.groupby("gold")["m"].mean()
    assert value_of(t, "balanced_margin") == pytest.approx(0.5 * (by[True] - by[False]))
    pos, neg = m[gold], m[~gold]
    pairs = [(1.0 if a > b else 0.5 if a == b else 0.0) for a in pos for b in neg]
    assert value_of(t, "auc") == pytest.approx(np.mean(pairs))
    assert value_of(t, "yes_rate") == pytest.approx((m >= 0).mean())
    # per checkpoint and per item subset (the reliability halves): the same numbers row by row
    M = np.vstack([m, -m, m + 2])
    masks = rng.random((4, 57)) < 0.6
    got = values("auc", M, gold, masks)
    for s, keep in enumerate(masks):
        for i in range(3):
            p, q = M[i][keep & gold], M[i][keep & ~gold]
            assert got[i, s] == pytest.approx(np.mean([(a > b) + 0.5 * (a == b) for a in p for b in q]))


def test_stratified_halves_keep_the_label_shares():
    gold = np.r_[np.ones(37, bool), np.zeros(91, bool)]
    np.random.default_rng(1).shuffle(gold)
    A, B = stratified_halves(gold, 50, np.random.default_rng(2))
    assert not (A & B).any()
    for half in (A, B):
        assert (half & gold).sum(axis=1).tolist() == [18] * 50  # floor(37 / 2) gold "Yes" in every half
        assert (half & ~gold).sum(axis=1).tolist() == [45] * 50
    assert len({tuple(np.flatnonzero(a)) for a in A}) > 40  # random draws, not one fixed split


def test_one_gold_class_gives_nan_balanced_metrics_not_a_crash():
    t = _table(np.ones(40, bool), np.linspace(-2, 2, 40))
    got = table_metrics(t)
    assert got["n_entailment"] == 40
    for name in ("balanced_margin", "balanced_accuracy", "auc"):
        assert math.isnan(got[name]), name
    assert got["accuracy"] == pytest.approx(0.5) and got["yes_rate"] == pytest.approx(0.5)


def test_unknown_metric_is_one_line_listing_the_metrics():
    with pytest.raises(UserError) as e:
        check_metric("balanced_margn")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("analyze.metric: unknown metric 'balanced_margn'")
    assert all(m in msg for m in ANALYSABLE) and "yes_rate" not in msg.split("known:")[1]


def _partials(st, metric):
    from oodcorr.analysis.partial import analyse_matrix

    spec = METRICS[metric]
    tables = [prediction_table(g, m) for g, m in zip(st["gold"], st["log_odds"])]
    series = [values(spec.aggregate, spec.score(t), g) for t, g in zip(tables, st["gold"])]
    rows = analyse_matrix(series[0], np.column_stack(series[1:]), ["a", "b"], "linear")
    return pd.DataFrame(rows).assign(run="r", method="linear"), series


@pytest.mark.parametrize("bias_sd,fires", [(2.5, True), (0.0, False)])
def test_answer_bias_flag_fires_on_a_shared_bias_with_uncorrelated_abilities(bias_sd, fires):
    from oodcorr.analysis.answer_bias import diagnose, pair_flags

    st = answer_bias_study(20, 300, (0.28, 0.40), bias_sd, n_id_items=300, rng=np.random.default_rng(7))
    acc, acc_series = _partials(st, "accuracy")
    bm, bm_series = _partials(st, "balanced_margin")
    _, yes = _partials(st, "yes_rate")
    names = ["id", "a", "b"]
    series = {"r": {"id_testset": "id", "accuracy": dict(zip(names, acc_series)), "balanced_margin": dict(zip(names, bm_series)),
                    "yes_rate": dict(zip(names, yes)),
                    "yes_share_gold": {n: float(g.mean()) for n, g in zip(names, st["gold"])}}}
    diag = diagnose(series, {"r": {"model": "m", "seed": 0}}, "balanced_margin")
    flag = pair_flags(bm, acc, bm, diag, series)
    assert bool(flag[0]) is fires
    if fires:  # the bias drives accuracy's residuals, not balanced_margin's
        assert acc["r"].iloc[0] > 0.5 and abs(bm["r"].iloc[0]) < acc["r"].iloc[0] - 0.3
        assert (diag.loc[diag["role"] == "ood", "r2_accuracy"] > 0.5).all()
        assert (diag.loc[diag["role"] == "ood", "r2_bias_free"] < 0.3).all()
