"""`oodcorr data prepare` / `oodcorr testsets` through click's CliRunner on the real CLI group."""

import json

import pytest
import yaml
from click.testing import CliRunner

from oodcorr.cli import cli


def _run(*args):
    return CliRunner().invoke(cli, list(args))


def _stderr(result):
    try:
        return result.stderr
    except ValueError:  # older click without separate stderr
        return result.output


def test_help():
    r = _run("data", "prepare", "--help")
    assert r.exit_code == 0 and "--only" in r.output and "--out" in r.output


@pytest.fixture
def project(tmp_path, monkeypatch):
    params = {
        "data": {
            "out": "prep",
            "prepare": ["synth_train", "synth_id", "synth_overlap"],
            "max_examples": 100,
            "testsets": {
                "bad": {
                    "path": "bad.tsv",
                    "premise": "p",
                    "hypothesis": "h",
                    "label": "y",
                    "label_map": {"yes": "entailment"},
                }
            },
        }
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    (tmp_path / "bad.tsv").write_text("p\th\ty\na\tb\tyes\nc\td\tno\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_prepare_then_testsets_shows_counts(project):
    r = _run("data", "prepare")
    assert r.exit_code == 0, r.output
    manifest = json.loads((project / "prep" / "manifest.json").read_text())
    assert set(manifest["testsets"]) == {"synth_train", "synth_id", "synth_overlap"}
    assert manifest["testsets"]["synth_id"]["label_counts"] == {"entailment": 50, "non_entailment": 50}
    for name, entry in manifest["testsets"].items():
        from oodcorr.core.io import sha256_file

        assert entry["sha256"] == sha256_file(project / "prep" / f"{name}.jsonl")
    r = _run("testsets")
    assert r.exit_code == 0
    line = next(ln for ln in r.output.splitlines() if ln.startswith("synth_id "))
    assert line.split()[-1] == "100"
    assert next(ln for ln in r.output.splitlines() if ln.startswith("hans ")).split()[-1] == "-"
    # --only merges into the manifest
    r = _run("data", "prepare", "--only", "synth_vocab")
    assert r.exit_code == 0
    manifest = json.loads((project / "prep" / "manifest.json").read_text())
    assert set(manifest["testsets"]) == {"synth_train", "synth_id", "synth_overlap", "synth_vocab"}


@pytest.mark.parametrize(
    "args, expect",
    [
        (["--only", "synth_idd"], "did you mean 'synth_id'"),
        (["--only", "synth_id", "--only", "bad"], "bad.tsv:3: testset bad: label 'no' not in label_map"),
        (["--params", "missing.yaml"], "params file not found"),
        (["--only", "mnli"], "offline"),
    ],
)
def test_bad_input_one_line_nothing_written(project, monkeypatch, args, expect):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    r = _run("data", "prepare", "--out", "out", *args)
    assert r.exit_code == 2, r.output
    err = _stderr(r).strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1 and expect in err, err
    assert "Traceback" not in r.output
    assert not (project / "out").exists()


def test_failed_prepare_keeps_previous_outputs(project):
    assert _run("data", "prepare", "--only", "synth_id").exit_code == 0
    before = (project / "prep" / "manifest.json").read_bytes()
    rows_before = (project / "prep" / "synth_id.jsonl").read_bytes()
    r = _run("data", "prepare", "--only", "synth_id", "--only", "bad")
    assert r.exit_code == 2
    assert (project / "prep" / "manifest.json").read_bytes() == before
    assert (project / "prep" / "synth_id.jsonl").read_bytes() == rows_before
    assert not [p for p in (project / "prep").iterdir() if p.name.endswith(".tmp")]


def test_load_prepared_missing(project):
    from oodcorr.core.errors import UserError
    from oodcorr.records.prepared import load_prepared

    with pytest.raises(UserError, match=r"testset synth_id was not prepared; run `oodcorr data prepare`"):
        load_prepared(project / "prep", "synth_id")
