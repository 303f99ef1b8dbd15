"""Hub path: rows shaped like the hub's parquet go through the same `to_binary` as local files;
an offline / unreachable hub fails fast with one line naming the local alternative."""

import time

import pytest

from oodcorr.core.errors import UserError
from oodcorr.data.loaders import load_hub, load_testset, to_binary
from oodcorr.data.settings import PrepareSettings
from oodcorr.settings.project import Project
from oodcorr.settings.registry import resolve

datasets = pytest.importorskip("datasets")


def _glue_mnli():
    feats = datasets.Features(
        {
            "premise": datasets.Value("string"),
            "hypothesis": datasets.Value("string"),
            "label": datasets.ClassLabel(names=["entailment", "neutral", "contradiction"]),
            "idx": datasets.Value("int32"),
        }
    )
    return datasets.Dataset.from_dict(
        {
            "premise": ["p0", "p1", "p2", "p3"],
            "hypothesis": ["h0", "h1", "h2", "h3"],
            "label": [0, 1, 2, -1],
            "idx": [0, 1, 2, 3],
        },
        features=feats,
    )


def test_glue_mnli_ints_with_minus_one():
    rows = to_binary(_glue_mnli(), resolve({}, "mnli"))
    assert [(r["id"], r["label"], r["original_label"]) for r in rows] == [
        ("0", "entailment", "0"),
        ("2", "non_entailment", "2"),
    ]
    merged = to_binary(_glue_mnli(), resolve({"data": {"neutral": "merge"}}, "mnli"))
    assert [r["label"] for r in merged] == ["entailment", "non_entailment", "non_entailment"]


def test_hans_hub_schema_slices():
    ds = datasets.Dataset.from_dict(
        {
            "premise": ["The doctor saw the actor .", "The actor saw the doctor ."],
            "hypothesis": ["The actor saw the doctor .", "The actor saw ."],
            "label": [1, 0],
            "parse_premise": ["", ""],
            "heuristic": ["lexical_overlap", "subsequence"],
            "subcase": ["ln_subject/object_swap", "sn_NP/S"],
            "template": ["temp1", "temp2"],
        }
    )
    rows = to_binary(ds, resolve({}, "hans"))
    assert [r["slice"] for r in rows] == ["lexical_overlap/non_entailment", "subsequence/entailment"]


def test_paws_and_dataframe_input():
    import pandas as pd

    df = pd.DataFrame({"id": [7, 8], "sentence1": ["a", "b"], "sentence2": ["c", "d"], "label": [1, 0]})
    rows = to_binary(df, resolve({}, "paws"))
    assert [r["label"] for r in rows] == ["entailment", "non_entailment"]
    rte = to_binary(
        datasets.Dataset.from_dict({"sentence1": ["a"], "sentence2": ["b"], "label": [1], "idx": [0]}),
        resolve({}, "rte"),
    )
    assert rte[0]["label"] == "non_entailment"


def test_scitail_dgem_labels():
    ds = datasets.Dataset.from_dict(
        {
            "premise": ["a", "b"],
            "hypothesis": ["c", "d"],
            "label": ["entails", "neutral"],
            "hypothesis_graph_structure": ["", ""],
        }
    )
    assert [r["label"] for r in to_binary(ds, resolve({}, "scitail"))] == ["entailment", "non_entailment"]


def test_offline_fails_immediately(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t = time.time()
    with pytest.raises(UserError) as e:
        load_testset(resolve({}, "mnli"), Project(), PrepareSettings())
    assert time.time() - t < 2
    msg = str(e.value)
    assert "offline" in msg and "data.testsets.mnli" in msg and "path" in msg and "\n" not in msg


def test_unreachable_hub_fails_fast(monkeypatch):
    for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: connection refused
    t = time.time()
    with pytest.raises(UserError) as e:
        load_hub(resolve({}, "hans"))
    assert time.time() - t < 5
    assert "unreachable" in str(e.value) and "data.testsets.hans" in str(e.value)


def test_sick_needs_a_path():
    with pytest.raises(UserError, match="path"):
        resolve({}, "sick")


def test_a_label_outside_a_built_in_map_says_how_to_map_it():
    """A built-in testset pointed at a file with another label spelling: the error names the params key to give,
    that a label_map there replaces the built-in one, and the values a label may map to."""
    rows = [{"premise": "a", "hypothesis": "b", "label": x} for x in ("entails", "yes")]
    spec = resolve({"data": {"testsets": {"snli": {"path": "snli.jsonl"}}}}, "snli")
    with pytest.raises(UserError) as e:
        to_binary(rows, spec, "snli.jsonl", [1, 2])
    msg = str(e.value)
    assert msg.startswith("snli.jsonl:1: testset snli: label 'entails' not in label_map"), msg
    assert msg.endswith(
        "Fix: give data.testsets.snli.label_map in params.yaml with every value of the file (it "
        "replaces the built-in map), mapped to entailment, non_entailment, neutral or drop "
        "(e.g. 'entails': drop)"
    ), msg
    spec = resolve(
        {"data": {"testsets": {"snli": {"path": "snli.jsonl", "label_map": {"entails": "entailment"}}}}}, "snli"
    )
    fix = r"Fix: add each value to data\.testsets\.snli\.label_map in params\.yaml, mapped to entailment, "
    with pytest.raises(UserError, match=fix + r"non_entailment, neutral or drop \(e\.g\. 'yes': drop\)$"):
        to_binary(rows, spec, "snli.jsonl", [1, 2])
