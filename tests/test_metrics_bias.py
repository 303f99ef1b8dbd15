"""Answer bias: class-balanced metrics from the stored log-probs, gold-stratified reliability halves, the
answer_bias diagnosis. Values are checked against independent computations (explicit pair loops, pandas
groupby) and against the simulator with a shared "Yes" bias whose true partial r is 0."""

import math

import numpy as np
import pandas as pd
import pytest

from oodcorr.core.errors import UserError
from oodcorr.stats.aggregate import stratified_halves, values
from oodcorr.stats.metrics import ANALYSABLE, METRICS, check_metric, table_metrics, value_of
from oodcorr.stats.simulate import answer_bias_study, prediction_table


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
    from oodcorr.stats.partial import analyse_matrix

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
    series = {
        "r": {
            "id_testset": "id",
            "accuracy": dict(zip(names, acc_series)),
            "balanced_margin": dict(zip(names, bm_series)),
            "yes_rate": dict(zip(names, yes)),
            "yes_share_gold": {n: float(g.mean()) for n, g in zip(names, st["gold"])},
        }
    }
    diag = diagnose(series, {"r": {"model": "m", "seed": 0}}, "balanced_margin")
    flag = pair_flags(bm, acc, bm, diag, series)
    assert bool(flag[0]) is fires
    if fires:  # the bias drives accuracy's residuals, not balanced_margin's
        assert acc["r"].iloc[0] > 0.5 and abs(bm["r"].iloc[0]) < acc["r"].iloc[0] - 0.3
        assert (diag.loc[diag["role"] == "ood", "r2_accuracy"] > 0.5).all()
        assert (diag.loc[diag["role"] == "ood", "r2_bias_free"] < 0.3).all()


def _bias_project(root, bias_sd, runs=(("m1", 0), ("m2", 0)), shares=(0.28, 0.40), n_items=200):
    from oodcorr.records.simulated_runs import write_bias_study

    files = []
    for k, (model, seed) in enumerate(runs):
        st = answer_bias_study(16, n_items, shares, bias_sd, n_id_items=n_items, rng=np.random.default_rng(11 + k))
        ev = root / "runs" / f"{model}-s{seed}" / "eval"
        write_bias_study(ev, st, f"{model}-s{seed}", model, seed, range(0, 160, 10), ["mnli", "paws", "scitail"])
        files.append(ev / "metrics.jsonl")
    return files


def test_analysis_defaults_to_balanced_margin_with_accuracy_beside_it_and_flags_answer_bias(tmp_path):
    from oodcorr.analysis.pipeline import run_analysis

    files = _bias_project(tmp_path, 2.5)
    out = tmp_path / "results"
    summary = run_analysis(files, out, methods=("linear",), plots=True)
    assert summary["metric"] == "balanced_margin" and summary["noise"]["metric"] == "balanced_margin"
    p = pd.read_csv(out / "partial_correlations.csv")
    lin = p[p["method"] == "linear"]
    assert {"r_accuracy", "ci_low_accuracy", "ci_high_accuracy", "ci2_low_accuracy", "answer_bias"} <= set(p.columns)
    assert (lin["r_accuracy"] > 0.5).all() and lin["answer_bias"].all()  # accuracy: the shared bias
    assert (lin["r"].abs() < lin["r_accuracy"] - 0.3).all()  # balanced_margin: not
    # r_accuracy is accuracy's own partial r (independent: pingouin on the metrics.jsonl accuracies)
    from oodcorr.stats.partial import pingouin_partial

    rows = pd.read_json(files[0], lines=True)
    wide = rows.pivot(index="step", columns="testset", values="accuracy")
    first = lin[lin["run"] == "m1-s0"].iloc[0]
    assert first["r_accuracy"] == pytest.approx(pingouin_partial(wide, "paws", "scitail", "mnli")["r"], abs=1e-9)
    wide_bm = rows.pivot(index="step", columns="testset", values="balanced_margin")
    assert first["r"] == pytest.approx(pingouin_partial(wide_bm, "paws", "scitail", "mnli")["r"], abs=1e-9)
    pooled = pd.read_csv(out / "pooled_seeds.csv")
    assert {"r_accuracy", "answer_bias"} <= set(pooled.columns)
    assert pooled[pooled["method"] == "linear"]["answer_bias"].all()
    cons = pd.read_csv(out / "consistency.csv")
    assert {"verdict_accuracy", "answer_bias"} <= set(cons.columns)
    bias = pd.read_csv(out / "answer_bias.csv")
    ood = bias[bias["role"] == "ood"]
    assert len(ood) == 4 and ood["r2_accuracy"].median() > 0.7 and (ood["r2_bias_free"] < 0.3).all()
    assert ood.set_index("testset")["yes_share_gold"].to_dict() == {"paws": 0.28, "scitail": 0.4}
    rel = pd.read_csv(out / "reliability.csv")
    assert set(rel["metric"]) == set(METRICS)
    html = (out / "report.html").read_text()
    assert "<h2>Answer bias</h2>" in html and "yes_rate_m1-s0.png" in html
    assert (out / "figures" / "yes_rate_m1-s0.png").is_file()
    assert "accuracy" in summary and summary["answer_bias"]["pairs_flagged"]["linear"] == 2
    curves = pd.read_csv(out / "plots" / "accuracy_vs_step.csv")
    assert {"accuracy", "balanced_margin", "yes_rate"} <= set(curves.columns)


def test_clean_study_raises_no_answer_bias_flag(tmp_path):
    from oodcorr.analysis.pipeline import run_analysis

    files = _bias_project(tmp_path, 0.0)
    run_analysis(files, tmp_path / "results", methods=("linear",), plots=False)
    p = pd.read_csv(tmp_path / "results" / "partial_correlations.csv")
    assert not p["answer_bias"].any()


def test_a_one_class_testset_is_flagged_not_a_crash(tmp_path):
    from oodcorr.analysis.pipeline import run_analysis

    files = _bias_project(tmp_path, 1.0, runs=(("m1", 0),), shares=(1.0, 0.4))  # paws: every gold label "Yes"
    rows = pd.read_json(files[0], lines=True)
    assert rows[rows["testset"] == "paws"]["balanced_margin"].isna().all()
    summary = run_analysis(files, tmp_path / "results", methods=("linear",), plots=True)
    assert summary["flags"] == ["one_class:paws"]
    p = pd.read_csv(tmp_path / "results" / "partial_correlations.csv")
    row = p[(p["method"] == "linear")].iloc[0]
    assert math.isnan(row["r"]) and row["flag"] == "one_class:paws" and np.isfinite(row["r_accuracy"])
    assert "one_class:paws" in (tmp_path / "results" / "report.html").read_text()


def test_outputs_without_log_probs_name_the_evaluate_command(tmp_path):
    import pyarrow.parquet as pq

    from oodcorr.analysis.pipeline import run_analysis

    files = _bias_project(tmp_path, 1.0, runs=(("m1", 0),))
    keep = ["run", "model", "train_set", "id_testset", "shots", "seed", "step", "testset", "slice", "accuracy", "n"]
    old = pd.read_json(files[0], lines=True)[keep]  # an older version: accuracy only, predictions without log-probs
    files[0].write_text(old.to_json(orient="records", lines=True))
    for f in (tmp_path / "runs").rglob("*.parquet"):
        pq.write_table(pq.read_table(f).drop(["logp_entailment", "logp_non_entailment"]), f)
    with pytest.raises(UserError) as e:
        run_analysis(files, tmp_path / "results", methods=("linear",), plots=False)
    msg = str(e.value)
    assert "\n" not in msg and "run `oodcorr evaluate --run m1-s0`" in msg and "no column logp_entailment" in msg
    assert not (tmp_path / "results").exists()


def test_each_metric_is_residualised_on_its_own_id_series_over_stratified_halves():
    from oodcorr.analysis.reliability import analyse_run_noise

    st = answer_bias_study(12, 60, (0.3,), 1.0, n_id_items=60, rng=np.random.default_rng(2))
    tables = [prediction_table(g, m) for g, m in zip(st["gold"], st["log_odds"])]
    mats = {
        m: {"id": METRICS[m].score(tables[0]), "a": METRICS[m].score(tables[1])}
        for m in ("accuracy", "balanced_margin")
    }
    gold = {"id": st["gold"][0], "a": st["gold"][1]}
    acc_id = mats["accuracy"]["id"].mean(axis=1)
    rows = analyse_run_noise(
        acc_id,
        mats["accuracy"]["a"].mean(axis=1)[:, None],
        ["a"],
        ["linear"],
        9,
        np.random.default_rng(4),
        {"balanced_margin": mats["balanced_margin"], "accuracy": mats["accuracy"]},
        gold=gold,
        id_name="id",
    )
    got = {r["metric"]: r["reliability"] for r in rows}
    A, B = stratified_halves(gold["a"], 9, np.random.default_rng(4))  # the same draw: the first testset's halves
    df = pd.DataFrame({"gold": gold["a"]})

    def half_value(scores, keep):  # balanced margin of a half, by pandas: mean of the two class means
        return df[keep].assign(s=scores[keep]).groupby("gold")["s"].mean().mean()

    x = pd.DataFrame(mats["balanced_margin"]["id"].T).assign(gold=gold["id"]).groupby("gold").mean().mean().to_numpy()
    X = np.column_stack([np.ones(12), x])  # balanced_margin's own ID series, not ID accuracy
    cs = []
    for a, b in zip(A, B):
        ya = np.array([half_value(row, a) for row in mats["balanced_margin"]["a"]])
        yb = np.array([half_value(row, b) for row in mats["balanced_margin"]["a"]])
        ra, rb = (y - X @ np.linalg.lstsq(X, y, rcond=None)[0] for y in (ya, yb))
        cs.append(np.corrcoef(ra, rb)[0, 1])
    c = np.mean(cs)
    assert got["balanced_margin"] == pytest.approx(2 * c / (1 + c), abs=1e-9)


def test_stratified_halves_keep_a_swinging_model_reliable_where_random_halves_anticorrelate():
    """A model swinging between all-"Yes" and all-"No" on a balanced testset: random halves differ in their
    gold "Yes" share, so their residuals move in opposite directions (negative reliability); stratified halves
    do not."""
    from oodcorr.stats.noise import linear_operator, reliabilities

    st = answer_bias_study(12, 64, (0.5,), 6.0, n_id_items=64, rng=np.random.default_rng(0))
    tables = [prediction_table(g, m) for g, m in zip(st["gold"], st["log_odds"])]
    yes = tables[1]["prediction"] == "entailment"
    assert yes.mean(axis=1).min() < 0.1 and yes.mean(axis=1).max() > 0.9
    for metric in ("accuracy", "balanced_margin"):
        spec = METRICS[metric]
        items, x = spec.score(tables[1]), values(spec.aggregate, spec.score(tables[0]), st["gold"][0])
        ops = {"linear": linear_operator(x)}
        random_halves = reliabilities(items, x, ops, 200, np.random.default_rng(1))["linear"][0]
        stratified = reliabilities(
            items, x, ops, 200, np.random.default_rng(1), gold=st["gold"][1], aggregate=spec.aggregate
        )["linear"][0]
        assert random_halves < 0 < stratified and stratified - random_halves > 0.7, (metric, random_halves, stratified)
