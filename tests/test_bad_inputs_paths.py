"""Bad input and hostile files, next layer: names that become paths, fields `study check` shares with the stages,
the results folder's marker, and the inputs that ended in a traceback, were accepted though wrong, or were
misreported. Each ends in one `error: ...` line naming the field or file, exit 2, nothing written outside the
project and no user file changed."""

from __future__ import annotations

import json
import os

import pytest
import yaml
from click.testing import CliRunner

from oodcorr.cli import cli

SYNTH = {
    "synthetic": "id",
    "premise": "premise",
    "hypothesis": "hypothesis",
    "label": "label",
    "label_map": {"entailment": "entailment", "non_entailment": "non_entailment"},
}


def params(tmp_path, **sections) -> dict:
    p = {
        "study": {"name": "t", "tracking": "none"},
        "data": {"out": "data/prepared", "max_examples": 24, "seed": 0, "prepare": [], "testsets": {}},
        "runs": {"a": {"model": "tiny-olmo2", "train_set": "synth_train", "id_testset": "synth_id", "shots": 16}},
        "evaluate": {"testsets": ["synth_id", "synth_overlap"]},
        "analyze": {"methods": ["linear"]},
    }
    for key, value in sections.items():
        p.setdefault(key, {}).update(value)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    return p


def one_error(args, cwd, monkeypatch, **env) -> str:
    monkeypatch.chdir(cwd)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    return lines[0]


def test_a_testset_name_leading_outside_the_project_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    project, theirs = tmp_path / "p", tmp_path / "x" / "notes.jsonl"
    project.mkdir()
    theirs.parent.mkdir()
    theirs.write_text("my notes\n")
    params(project, data={"testsets": {"../../../x/notes": SYNTH}, "prepare": ["../../../x/notes"]})
    for args in (["study", "check"], ["data", "prepare"]):
        assert "params: data.testsets: testset '../../../x/notes' is not allowed" in one_error(
            args, project, monkeypatch
        )
    assert theirs.read_text() == "my notes\n" and not (project / "data").exists()


def test_prepare_removes_only_files_it_recorded_and_refuses_planted_manifest_keys(tmp_path, monkeypatch):
    project, theirs = tmp_path / "p", tmp_path / "x" / "notes.jsonl"
    project.mkdir()
    theirs.parent.mkdir()
    theirs.write_text("my notes\n")
    params(project, data={"prepare": ["synth_vocab", "synth_negation"]})
    monkeypatch.chdir(project)
    assert CliRunner().invoke(cli, ["data", "prepare"]).exit_code == 0
    prepared = project / "data" / "prepared"
    (prepared / "synth_vocab.jsonl").write_text("my own rows\n")  # no longer the file prepare wrote
    params(project)  # neither is used any more: both are stale
    assert CliRunner().invoke(cli, ["data", "prepare"]).exit_code == 0
    manifest = json.loads((prepared / "manifest.json").read_text())
    assert not (prepared / "synth_negation.jsonl").exists()  # its own, unchanged: removed
    assert (prepared / "synth_vocab.jsonl").read_text() == "my own rows\n"  # changed since: left alone
    assert set(manifest["testsets"]) == {"synth_train", "synth_id", "synth_overlap"}
    manifest["testsets"]["../../../x/notes"] = manifest["testsets"]["synth_id"]
    (prepared / "manifest.json").write_text(json.dumps(manifest))
    msg = one_error(["data", "prepare"], project, monkeypatch)
    assert "manifest.json: testsets: testset '../../../x/notes' is not allowed" in msg
    assert theirs.read_text() == "my notes\n"


@pytest.mark.parametrize(
    "section, value, expected",
    [
        ("evaluate", {"dtype": "float8"}, "params: evaluate.dtype: expected one of auto, float32, bfloat16, float16"),
        ("analyze", {"scatter_pair": ["foo", "bar"]}, "analyze.scatter_pair: unknown OOD testset 'foo'"),
        (
            "analyze",
            {"scatter_pair": ["synth_id", "synth_overlap"]},
            "analyze.scatter_pair: unknown OOD testset 'synth_id'",
        ),
        ("study", {"threads": 1000000000}, "params: study.threads: expected a positive integer or 'auto' (at most"),
        (
            "study",
            {"tracking_uri": "not a uri ;rm -rf /"},
            "params: study.tracking_uri: 'not a uri ;rm -rf /' is not a",
        ),
        ("data", {"out": "../elsewhere"}, "params: data.out: '../elsewhere' must be a folder inside the project"),
        ("analyze", {"out": "/tmp/results"}, "params: analyze.out: '/tmp/results' must be a folder inside the project"),
        ("data", {"max_examples": 0}, "testset synth_train: max_examples must be positive, got 0"),
    ],
)
def test_study_check_refuses_what_a_stage_would(tmp_path, monkeypatch, section, value, expected):
    """A value `dvc repro` used to reject only after DVC had deleted the stage's outputs (evaluate, analyze) is
    refused by `study check`, the pipeline's first stage, with the stage's own words."""
    params(tmp_path, **{section: value})
    assert one_error(["study", "check"], tmp_path, monkeypatch).startswith(f"error: {expected}")


def test_a_run_key_yaml_reads_as_a_number_says_to_quote_it(tmp_path, monkeypatch):
    p = params(tmp_path)
    p["runs"] = {123: p["runs"]["a"]}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    msg = one_error(["study", "check"], tmp_path, monkeypatch)
    assert "run key 123 is read as a number, not a name; quote it ('123')" in msg and "use only" not in msg
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False).replace("  123:", "  '123':"))
    assert CliRunner().invoke(cli, ["study", "check"]).exit_code == 0


def test_inputs_that_ended_in_a_traceback(tmp_path, monkeypatch):
    params(tmp_path)
    text = (tmp_path / "params.yaml").read_text()
    (tmp_path / "params.yaml").write_text(text + "x: " + "[" * 5000 + "]" * 5000 + "\n")  # RecursionError
    assert "params.yaml: nested too deeply" in one_error(["study", "check"], tmp_path, monkeypatch)
    long = "t" * 300  # a testset name of 300 characters was ENAMETOOLONG from prepare
    params(tmp_path, data={"testsets": {long: SYNTH}, "prepare": [long]})
    assert "is 300 characters long; at most 128" in one_error(["data", "prepare"], tmp_path, monkeypatch)


def test_analyze_out_is_ours_only_by_the_manifest_it_wrote(tmp_path, monkeypatch):
    from oodcorr.core.io import write_json, write_jsonl
    from oodcorr.stats.simulate import metrics_rows

    for model, rho in (("m1", 0.7), ("m2", 0.6)):
        write_jsonl(
            tmp_path / "runs" / f"{model}-s0" / "eval" / "metrics.jsonl",
            metrics_rows(model, 0, 12, rho, ["hans", "anli", "wnli"], run=f"{model}-s0"),
        )
        write_json(tmp_path / "runs" / f"{model}-s0" / "run.json", {"run": f"{model}-s0"})
    (tmp_path / "params.yaml").write_text("study: {name: t, tracking: none}\nanalyze: {methods: [linear]}\n")
    mine = tmp_path / "paper" / "summary.json"
    mine.parent.mkdir()
    mine.write_text('{"n_runs": 3, "my": "numbers"}\n')  # shaped like the tool's summary.json: still the user's
    msg = one_error(["analyze", "--out", "paper", "--no-plots"], tmp_path, monkeypatch)
    assert msg.startswith("error: --out paper: holds files oodcorr did not write (summary.json)")
    assert mine.read_text() == '{"n_runs": 3, "my": "numbers"}\n'
    assert "--out /proc/x: not writable" in one_error(["analyze", "--out", "/proc/x"], tmp_path, monkeypatch)
    assert "name too long" in one_error(["analyze", "--out", "r" * 300], tmp_path, monkeypatch)
    assert CliRunner().invoke(cli, ["analyze", "--out", "res", "--no-plots"]).exit_code == 0
    marker = json.loads((tmp_path / "res" / ".oodcorr-outputs.json").read_text())
    assert marker["tool"] == "oodcorr" and marker["version"] and marker["written_by"] == "oodcorr analyze"
    assert CliRunner().invoke(cli, ["analyze", "--out", "res", "--no-plots"]).exit_code == 0  # its own: replaced


@pytest.mark.parametrize("kind", ["fifo", "folder", "symlink-to-a-secret", "dangling-symlink"])
def test_a_testset_path_that_is_no_data_file_says_what_it_is_and_never_prints_its_content(tmp_path, monkeypatch, kind):
    project = tmp_path / "p"
    project.mkdir()
    path = project / "mine.csv"
    secret = tmp_path / "secret"
    secret.write_text("root:TOPSECRET:20228:0:99999:7:::\nbin:*:20228:0:99999:7:::\n")
    secret.chmod(0o600)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        path.symlink_to(secret if kind == "symlink-to-a-secret" else tmp_path / "gone")
    params(
        project,
        data={
            "testsets": {
                "mine": {
                    "path": "mine.csv",
                    "premise": "p",
                    "hypothesis": "h",
                    "label": "y",
                    "label_map": {"yes": "entailment", "no": "non_entailment"},
                }
            },
            "prepare": ["mine"],
        },
    )
    for args in (["study", "check"], ["data", "prepare"]):
        msg = one_error(args, project, monkeypatch)
        assert "TOPSECRET" not in msg and "mine.csv" in msg and "file not found" not in msg, msg
        assert {
            "fifo": "is a named pipe (FIFO), not a data file",
            "folder": "is a folder, not a data file",
            "symlink-to-a-secret": "no column 'p', 'h', 'y'",
            "dangling-symlink": f"is a symlink to {tmp_path / 'gone'}, which is missing",
        }[kind] in msg, msg
    assert not (project / "data").exists()


def test_a_bad_store_busy_timeout_is_one_line_when_a_store_is_opened(monkeypatch):
    """OODCORR_STORE_BUSY_TIMEOUT_S=abc was a ValueError at import (every command that imports the store)."""
    from oodcorr.core.errors import UserError
    from oodcorr.tracking import store

    monkeypatch.setenv("OODCORR_STORE_BUSY_TIMEOUT_S", "abc")
    with pytest.raises(UserError, match="OODCORR_STORE_BUSY_TIMEOUT_S: expected a number of seconds >= 0, got 'abc'"):
        store.busy_timeout_s()
    monkeypatch.setenv("OODCORR_STORE_BUSY_TIMEOUT_S", "2.5")
    assert store.busy_timeout_s() == 2.5
    monkeypatch.setattr(store, "BUSY_TIMEOUT_S", 0.5)  # what tests set
    assert store.busy_timeout_s() == 0.5


def test_an_analysis_out_folder_that_is_a_symlink_is_one_line(tmp_path):
    """Replacing a linked --out would drop the link and leave the folder it points to stale: refused, named."""
    from oodcorr.analysis.outputs import check_out_dir
    from oodcorr.core.errors import UserError

    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "results").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UserError, match=r"--out .*results: is a symbolic link \(to .*elsewhere\)"):
        check_out_dir(tmp_path / "results")
