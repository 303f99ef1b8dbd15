"""Local testsets: the real files in ../shared/data/nli (official counts) and bad-input errors."""

from pathlib import Path

import pytest
import yaml

from oodcorr.core.errors import UserError
from oodcorr.data.loaders import subsample
from oodcorr.data.prepare import build, prepare
from oodcorr.records.prepared import load_prepared, read_manifest
from oodcorr.settings.config import load_params
from oodcorr.settings.registry import resolve

FIXTURE = Path(__file__).parent / "fixtures" / "shared_nli_params.yaml"
SHARED_NLI = Path(__file__).resolve().parents[2] / "shared" / "data" / "nli"

# name -> (rows, entailment, non_entailment): official numbers (SOURCES.md / dataset papers).
OFFICIAL = {
    "mnli": (6692, 3479, 3213),  # 9,815 dev-matched minus 3,123 neutral
    "hans": (30000, 15000, 15000),
    "snli": (6605, 3368, 3237),  # 9,824 test minus 3,219 neutral
    "rte_dev": (277, 146, 131),
    "wnli": (635, 312, 323),
    "scitail": (2126, 842, 1284),
    "paws_qqp": (677, 191, 486),
    "anli_r1_dev": (667, 334, 333),
    "mnli_train": (6686, 3408, 3278),
    "snli_train": (6677, 3327, 3350),
    "sick": (2116, 1404, 712),  # SemEval TEST 4,906 minus 2,790 neutral
}


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    if not SHARED_NLI.is_dir():
        pytest.skip(f"real NLI data not found at {SHARED_NLI}")
    params = load_params(FIXTURE)
    out = tmp_path_factory.mktemp("prepared")
    return params, out, prepare(params, out)


def test_official_counts(real):
    _, out, manifest = real
    for name, (rows, ent, non) in OFFICIAL.items():
        entry = manifest["testsets"][name]
        assert (entry["rows"], entry["label_counts"]["entailment"], entry["label_counts"]["non_entailment"]) == (
            rows,
            ent,
            non,
        ), name
        assert len(load_prepared(out, name)) == rows
    assert read_manifest(out) == manifest


def test_rows_follow_the_contract(real):
    _, out, _ = real
    for name in OFFICIAL:
        rows = load_prepared(out, name)
        assert set(rows[0]) == {"id", "premise", "hypothesis", "label", "original_label", "slice"}
        assert {r["label"] for r in rows} == {"entailment", "non_entailment"}
        assert len({r["id"] for r in rows}) == len(rows), name


def test_hans_slices_and_ids(real):
    _, out, _ = real
    hans = load_prepared(out, "hans")
    from collections import Counter

    slices = Counter(r["slice"] for r in hans)
    assert len(slices) == 6 and set(slices.values()) == {5000}
    assert "lexical_overlap/non_entailment" in slices
    mnli = load_prepared(out, "mnli")
    assert mnli[0]["id"] == "1"  # MNLI `index` column; row 0 is neutral (dropped)
    assert load_prepared(out, "paws_qqp")[0]["id"] == "1"
    assert mnli[0]["original_label"] == "contradiction"


def test_neutral_merge_and_max_examples(real):
    params, _, _ = real
    merged = {**params, "data": {**params["data"], "neutral": "merge", "max_examples": 300}}
    rows, entry = build(merged, "mnli")
    assert entry["rows"] == 300
    # 9,815 rows: 3,479 entailment / 6,336 non-entailment -> stratified 106 / 194 (rounded)
    assert abs(entry["label_counts"]["entailment"] - 300 * 3479 / 9815) <= 1
    again, _ = build(merged, "mnli")
    assert [r["id"] for r in rows] == [r["id"] for r in again]
    other, _ = build({**merged, "data": {**merged["data"], "seed": 1}}, "mnli")
    assert [r["id"] for r in rows] != [r["id"] for r in other]
    hans, _ = build({**params, "data": {**params["data"], "max_examples": 600}}, "hans")
    from collections import Counter

    assert set(Counter(r["slice"] for r in hans).values()) == {100}


def test_subsample_stratified_and_ordered():
    rows = [
        {"id": str(i), "label": "entailment" if i % 4 == 0 else "non_entailment", "slice": None} for i in range(1000)
    ]
    s = subsample(rows, 100, 0, "x")
    assert len(s) == 100 and sum(r["label"] == "entailment" for r in s) == 25
    assert [int(r["id"]) for r in s] == sorted(int(r["id"]) for r in s)
    assert subsample(rows, None, 0, "x") is rows


# ------------------------------------------------------------------ bad input
def _project(tmp_path, testsets, text=None, name="t.tsv"):
    if text is not None:
        (tmp_path / name).write_text(text)
    p = tmp_path / "params.yaml"
    p.write_text(yaml.safe_dump({"data": {"testsets": testsets}}))
    return load_params(p)


def _spec(**kw):
    return {
        "path": "t.tsv",
        "premise": "p",
        "hypothesis": "h",
        "label": "y",
        "label_map": {"yes": "entailment", "no": "non_entailment"},
        **kw,
    }


def _error(params, names, tmp_path):
    with pytest.raises(UserError) as e:
        prepare(params, tmp_path / "out", names)
    assert not (tmp_path / "out").exists(), "nothing may be written on error"
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_malformed_row_names_file_and_line(tmp_path):
    params = _project(tmp_path, {"t": _spec()}, "p\th\ty\na\tb\tyes\nc\td\n")
    assert "t.tsv:3: malformed row" in _error(params, ["t"], tmp_path)


def test_label_outside_map_lists_values(tmp_path):
    params = _project(tmp_path, {"t": _spec()}, "p\th\ty\na\tb\tyes\nc\td\tmaybe\ne\tf\tperhaps\n")
    msg = _error(params, ["t"], tmp_path)
    assert "'maybe'" in msg and "'perhaps'" in msg and "label_map" in msg


def test_int_label_map_keys_compare_as_strings(tmp_path):
    params = _project(
        tmp_path, {"t": _spec(label_map={1: "entailment", 0: "non_entailment"})}, "p\th\ty\na\tb\t1\nc\td\t0\n"
    )
    rows, entry = build(params, "t")
    assert entry["label_counts"] == {"entailment": 1, "non_entailment": 1}
    assert rows[0]["original_label"] == "1"


def test_empty_after_filtering(tmp_path):
    params = _project(tmp_path, {"t": _spec(label_map={"yes": "drop", "no": "drop"})}, "p\th\ty\na\tb\tyes\n")
    assert "empty" in _error(params, ["t"], tmp_path)


def test_missing_file_and_missing_column(tmp_path):
    params = _project(tmp_path, {"t": _spec(path="nope.tsv")})
    assert "file not found" in _error(params, ["t"], tmp_path)
    params = _project(tmp_path, {"t": _spec()}, "p\thyp\ty\na\tb\tyes\n")
    assert "no column 'h'" in _error(params, ["t"], tmp_path)


def test_unknown_name_suggests_closest(tmp_path):
    params = _project(tmp_path, {})
    assert "did you mean 'hans'" in _error(params, ["hanz"], tmp_path)


def test_one_bad_testset_writes_nothing(tmp_path):
    params = _project(tmp_path, {"t": _spec(path="nope.tsv")})
    _error(params, ["synth_id", "t"], tmp_path)


def test_override_builtin_keeps_its_label_map(tmp_path):
    params = _project(
        tmp_path, {"wnli": {"path": "w.csv"}}, "sentence1,sentence2,label\n\"a, b\",c,1\nd,e,0\n", name="w.csv"
    )
    spec = resolve(params, "wnli")
    assert spec["kind"] == "local" and spec["label_map"]["1"] == "entailment"
    rows, entry = build(params, "wnli")
    assert rows[0]["premise"] == "a, b" and entry["label_counts"] == {"entailment": 1, "non_entailment": 1}


def test_jsonl_bad_line(tmp_path):
    params = _project(
        tmp_path, {"t": _spec(path="t.jsonl")}, '{"p": "a", "h": "b", "y": "yes"}\n{oops\n', name="t.jsonl"
    )
    assert "t.jsonl:2: malformed row: invalid JSON" in _error(params, ["t"], tmp_path)
