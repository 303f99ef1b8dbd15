"""MLflow experiments are classic ML experiments (the UI lands on the runs table, not the GenAI view), also
for a store made before the tag existed; the analysis run's description links its report; checkpoint metric
names fit a chart title."""

import mlflow

from oodcorr.settings.registry import BUILTINS
from oodcorr.stats.metrics import METRICS
from oodcorr.study import load_preset
from oodcorr.tracking import store as tracking
from oodcorr.tracking.analysis_run import report_note
from oodcorr.tracking.run_records import EVAL_NAMES, eval_records, metric_name, short_metric, short_testsets


def test_experiment_is_created_and_retagged_as_custom_model_development(tmp_path, mlflow_uri):
    params = {"study": {"name": "kind"}, "_root": str(tmp_path)}
    exp_id = tracking.setup(params)
    client = mlflow.MlflowClient(mlflow_uri)
    assert client.get_experiment(exp_id).tags["mlflow.experimentKind"] == "custom_model_development"
    old = client.create_experiment("oodcorr/old")  # an untagged experiment from an earlier version
    assert "mlflow.experimentKind" not in client.get_experiment(old).tags
    tracking.setup({"study": {"name": "old"}, "_root": str(tmp_path)})
    assert client.get_experiment(old).tags["mlflow.experimentKind"] == "custom_model_development"


def test_analysis_note_links_the_report_in_the_artifact_view():
    note = report_note("abc123", "7")  # MLflow shows an .html artifact there; get-artifact would download it
    assert "(#/experiments/7/runs/abc123/artifacts/report.html)" in note and "get-artifact" not in note


def test_run_names_name_the_model_and_seed_and_only_what_else_differs_in_the_study():
    cfg = {"model": "smollm2-135m", "train_set": "mnli_real_train", "shots": 64, "seed": 1}
    key = "smollm2-135m_mnli_real_64_s1"
    same = {key: cfg, "gemma3-270m_mnli_real_64_s0": {**cfg, "model": "gemma3-270m", "seed": 0}}
    assert tracking.run_name(key, cfg, same) == "smollm2-135m s1"  # fits the UI's run column
    shots = {**same, "x": {**cfg, "shots": 1024}}
    assert tracking.run_name(key, cfg, shots) == "smollm2-135m s1 · 64"
    sets = {**shots, "y": {**cfg, "train_set": "snli_real_train"}}
    assert tracking.run_name(key, cfg, sets) == "smollm2-135m s1 · mnli_real 64"
    assert tracking.run_name(key, cfg) == "smollm2-135m s1 · mnli_real 64"  # no study to compare with
    assert tracking.run_name("my-run", cfg, same) == "my-run"  # a key of another form is kept


def test_the_chart_view_link_fills_the_search_box_with_the_training_runs_filter():
    from urllib.parse import parse_qs, urlsplit

    from oodcorr.tracking.ui_links import FILTERS, links

    urls = links("http://127.0.0.1:5000", "3")
    chart = parse_qs(urlsplit(urls["chart view"].split("#", 1)[1]).query)
    assert chart["compareRunsMode"] == ["CHART"] and chart["searchFilter"] == [FILTERS["chart view"]]
    assert "searchFilter" not in urls["runs table"]  # the table shows the analysis run (it links the report)


# The chart view's title box is 122 px wide at a 1400 px window (scripts/mlflow_screenshot.py --titles); its
# 13 px font takes about 6 px a character, so a title of up to 20 characters is shown whole.
TITLE_CHARS = 16


def _rows(testsets) -> list[dict]:
    return [
        {"testset": t, "step": s, "slice": None, **{m: 0.5 for m in (*EVAL_NAMES, *METRICS)}}
        for t in testsets
        for s in (0, 4)
    ]


def test_checkpoint_metric_names_are_short_and_distinct():
    """The quickstart's keys: `acc/scitail`, `bm/scitail`, ... each at most TITLE_CHARS long, one key per
    metric x testset (no two share a name), for every step."""
    testsets = load_preset("quickstart")["evaluate"]["testsets"]
    records = eval_records(_rows(testsets), {0: 1000, 4: 2000})
    keys = {r["key"] for r in records}
    assert {"acc/scitail", "bm/scitail", "bacc/mnli", "yes/hans", "f1/rte", "f1_non/snli"} <= keys
    assert len(keys) == len(testsets) * len(set(EVAL_NAMES) | set(METRICS))
    assert max(map(len, keys)) <= TITLE_CHARS, max(keys, key=len)
    assert sorted({r["step"] for r in records if r["key"] == "acc/scitail"}) == [0, 4]
    assert len({short_metric(m) for m in (*EVAL_NAMES, *METRICS)}) == len(set(EVAL_NAMES) | set(METRICS))
    assert metric_name("accuracy", "hans", "lexical_overlap/entailment") == "slices/hans/lexical_overlap/entailment/acc"


def test_a_local_copy_keeps_its_full_name_beside_the_hub_testset():
    """`scitail_real` is `scitail` in keys unless the study also evaluates the hub's `scitail`; every built-in
    testset evaluated together still gives one name each."""
    assert short_testsets(["scitail", "scitail_real", "rte_real"]) == {
        "scitail": "scitail",
        "scitail_real": "scitail_real",
        "rte_real": "rte",
    }
    keys = {r["key"] for r in eval_records(_rows(["scitail", "scitail_real"]), {0: 1, 4: 2})}
    assert {"acc/scitail", "acc/scitail_real"} <= keys
    names = [n for n in BUILTINS if not n.endswith("_train")]
    assert len(set(short_testsets(names).values())) == len(names)
