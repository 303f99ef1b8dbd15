"""The real-NLI subsets shipped in the demo DVC remote (data/raw/real): scripts/make_real_subsets.py
reproduces them byte for byte from ../shared/data/nli, they are stratified, and `oodcorr data prepare`
reads them offline as built-in testset names (the registry's local-file entries)."""

import json
from collections import Counter
from pathlib import Path

import pytest
import yaml

from study_helpers import load_script

REPO = Path(__file__).resolve().parents[1]
REAL = REPO / "data" / "raw" / "real"
SOURCES = [
    REPO.parent / "shared" / "data" / "nli",
    REPO.parents[1] / "shared" / "data" / "nli",
    Path("/work/shared/data/nli"),
]


def _script():
    return load_script(REPO / "scripts" / "make_real_subsets.py")


@pytest.fixture
def committed() -> Path:
    if not (REAL / "SOURCES.md").exists():
        pytest.skip("data/raw/real not pulled (make setup runs `dvc pull -r demo data.dvc`)")
    return REAL


@pytest.fixture
def nli_src() -> Path:
    for p in SOURCES:
        if (p / "SOURCES.md").exists():
            return p
    pytest.skip("real NLI source folder ../shared/data/nli not found")


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_script_reproduces_committed_files(tmp_path, committed, nli_src):
    mod = _script()
    mod.build(nli_src, tmp_path / "real")
    made = sorted(p.name for p in (tmp_path / "real").iterdir())
    assert made == sorted(p.name for p in committed.iterdir())
    assert len(made) == len(mod.SUBSETS) + 1  # + SOURCES.md
    for name in made:
        assert (tmp_path / "real" / name).read_bytes() == (committed / name).read_bytes(), name


def test_stratified_and_capped(committed, nli_src):
    mod = _script()
    for name, (rel, fmt, *_rest) in mod.SUBSETS.items():
        strat = mod.SUBSETS[name][6]
        rows = _rows(committed / f"{name}.jsonl")
        source = mod.read_rows(nli_src / rel, fmt)
        assert len(rows) == min(2000, len(source)), name
        assert len({r["id"] for r in rows}) == len(rows), name
        lcol = mod.SUBSETS[name][4]
        got = Counter("|".join(str(r["label"] if c == lcol else r[c]) for c in strat) for r in rows)
        full = Counter("|".join(str(r[c]) for c in strat) for r in source)
        assert set(got) == set(full), name
        for k in full:  # proportional allocation: within one row of the exact share
            assert abs(got[k] - len(rows) * full[k] / len(source)) < 1, (name, k)
    hans = Counter((r["heuristic"], r["label"]) for r in _rows(committed / "hans_real.jsonl"))
    assert len(hans) == 6 and max(hans.values()) - min(hans.values()) <= 1


def test_sources_md_names_licences(committed):
    text = (committed / "SOURCES.md").read_text()
    assert "CC BY-NC 4.0" in text and "CC BY-NC-SA" in text
    for name in ("mnli_real", "hans_real", "anli_r1_real", "wnli_real", "paws_qqp_real", "mnli_real_train"):
        assert f"{name}.jsonl" in text


def test_prepare_offline_with_real_preset(tmp_path, committed, monkeypatch):
    from click.testing import CliRunner

    from oodcorr.cli import cli
    from oodcorr.study import load_preset

    tree = load_preset("real")
    assert "testsets" not in tree["data"]  # built-in names: the registry holds their files and fields
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "raw").symlink_to(REPO / "data" / "raw")  # a project's data/raw, as `make setup` pulls it
    tree["data"]["max_examples"] = 40
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tree, sort_keys=False))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    res = CliRunner().invoke(cli, ["data", "prepare", "--params", str(tmp_path / "params.yaml")])
    assert res.exit_code == 0, res.output
    manifest = json.loads((tmp_path / "data" / "prepared" / "manifest.json").read_text())["testsets"]
    assert set(tree["data"]["prepare"]) <= set(manifest)
    assert manifest["mnli_real_train"]["rows"] == 1337  # neutral dropped from 2,000; pool not capped
    for name in tree["evaluate"]["testsets"]:
        assert manifest[name]["rows"] == 40
        lc = manifest[name]["label_counts"]
        assert lc["entailment"] > 0 and lc["non_entailment"] > 0, name
    hans = [json.loads(x) for x in (tmp_path / "data" / "prepared" / "hans_real.jsonl").read_text().splitlines()]
    assert {r["slice"].split("/")[0] for r in hans} == {"constituent", "lexical_overlap", "subsequence"}


@pytest.mark.parametrize("preset", ["real", "cpu"])
def test_real_presets_are_consistent(preset):
    from oodcorr.settings.config import check_references
    from oodcorr.study import load_preset

    tree = load_preset(preset)
    check_references(tree)  # every run's model / testsets known (declared locally)
    assert {r["model"] for r in tree["runs"].values()} == {"smollm2-135m", "gemma3-270m"}
    assert len({r["seed"] for r in tree["runs"].values()}) >= 2
    assert {r["id_testset"] for r in tree["runs"].values()} == {"mnli_real"}
    assert len(tree["evaluate"]["testsets"]) == 8 and tree["evaluate"]["testsets"][0] == "mnli_real"
    from oodcorr.settings.registry import resolve

    for name in tree["evaluate"]["testsets"] + [r["train_set"] for r in tree["runs"].values()]:
        spec = resolve(tree, name)
        assert spec["kind"] == "local" and spec["path"] == f"data/raw/real/{name}.jsonl", name
        assert (REPO / spec["path"]).exists() or not (REAL / "SOURCES.md").exists(), name
