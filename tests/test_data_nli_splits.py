"""The built-in testsets read in place from ../shared/data/nli (the larger official splits the paper's code scored):
each with its official row and label counts (../shared/data/nli/SOURCES.md), neutral dropped and merged."""

import shutil
from pathlib import Path

import pytest

from oodcorr.core.errors import UserError
from oodcorr.data.prepare import build
from oodcorr.settings.registry import NLI_SPLITS, describe_source, resolve

REPO = Path(__file__).resolve().parents[1]

# name -> {neutral: (rows, entailment, non_entailment)}; merge keeps every row of the files (SOURCES.md's counts)
OFFICIAL = {
    "rte_full": {"drop": (2767, 1395, 1372)},  # train 2,490 (1,249 / 1,241) + dev 277 (146 / 131)
    "wnli_full": {"drop": (706, 343, 363)},  # train 635 (312 / 323) + dev 71 (31 / 40)
    # R1 1,000 + R2 1,000 + R3 1,198: entailment 334 + 334 + 402, neutral 333 + 333 + 400, contradiction 333+333+396
    "anli_dev": {"drop": (2132, 1070, 1062), "merge": (3198, 1070, 2128)},
    "paws_qqp_full": {"drop": (677, 191, 486)},  # 1 = paraphrase = entailment
    # all SemEval sets: entailment 2,821, contradiction 1,424, neutral 5,595
    "sick_full": {"drop": (4245, 2821, 1424), "merge": (9840, 2821, 7019)},
    "mnli_mm_gold": {"drop": (680, 345, 335), "merge": (999, 345, 654)},  # entailment 345, neutral 319, contra 335
}


def _params(root: Path, neutral: str) -> dict:
    return {"_root": str(root), "_path": None, "data": {"neutral": neutral}}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A project folder beside a `shared` folder, as the paths expect (../shared/data/nli from the project root)."""
    src = REPO.parent / "shared" / "data" / "nli"
    if not src.is_dir():
        pytest.skip(f"real NLI data not found at {src}")
    base = tmp_path_factory.mktemp("beside")
    (base / "shared" / "data").mkdir(parents=True)
    (base / "shared" / "data" / "nli").symlink_to(src)
    (base / "project").mkdir()
    return base / "project"


@pytest.mark.parametrize("name", sorted(OFFICIAL))
def test_official_counts(project, name):
    assert set(OFFICIAL) == set(NLI_SPLITS)
    for neutral, (rows, ent, non) in OFFICIAL[name].items():
        out, entry = build(_params(project, neutral), name)
        assert (entry["rows"], entry["label_counts"]["entailment"], entry["label_counts"]["non_entailment"]) == (
            rows,
            ent,
            non,
        ), (name, neutral)
        assert len({r["id"] for r in out}) == rows  # ids unique across the files of one testset
        assert {r["label"] for r in out} == {"entailment", "non_entailment"}


def test_files_of_one_testset_keep_their_ids_apart(project):
    rows, entry = build(_params(project, "drop"), "rte_full")
    assert rows[0]["id"] == "rte_train:0" and rows[-1]["id"] == "rte_dev:276"
    assert sum(r["id"].startswith("rte_dev:") for r in rows) == 277
    assert entry["source"].startswith("file:../shared/data/nli/rte/rte_train.csv + ")
    anli, _ = build(_params(project, "drop"), "anli_dev")
    assert {r["id"].split(":")[0] for r in anli} == {"anli_r1_dev", "anli_r2_dev", "anli_r3_dev"}


def test_max_examples_samples_across_the_files(project):
    params = _params(project, "drop")
    params["data"]["max_examples"] = 512
    rows, entry = build(params, "rte_full")
    assert entry["rows"] == 512 and abs(entry["label_counts"]["entailment"] - 258) <= 1  # the label share kept


def test_a_missing_file_of_a_list_is_one_line(tmp_path):
    beside = tmp_path / "shared" / "data" / "nli" / "rte"
    beside.mkdir(parents=True)
    shutil.copy(REPO / "tests" / "fixtures" / "shared_nli_params.yaml", beside / "unused.yaml")
    (beside / "rte_train.csv").write_text("premise,hypothesis,label\nA man.,A person.,entailment\n")
    (tmp_path / "p").mkdir()
    with pytest.raises(UserError, match=r"testset rte_full: file not found: .*rte_dev\.csv"):
        build(_params(tmp_path / "p", "drop"), "rte_full")


def test_a_path_list_must_name_files():
    params = {"_root": ".", "_path": None, "data": {"testsets": {"rte_full": {"path": []}}}}
    with pytest.raises(UserError, match=r"data\.testsets\.rte_full: no source"):
        resolve(params, "rte_full")
    params["data"]["testsets"]["rte_full"]["path"] = ["a.csv", 3]
    with pytest.raises(UserError, match=r"data\.testsets\.rte_full\.path: a file, or a list of files"):
        resolve(params, "rte_full")
    assert describe_source(resolve({"_root": "."}, "wnli_full")).count(" + ") == 1
