"""`oodcorr study check` (dvc.yaml's first stage) refuses whatever a stage would refuse, before any stage runs:
every OODCORR_* environment variable a stage reads (settings.environment: one parser per variable, used by the
stages and by the check), and a run key YAML reads as a number beside named ones, which DVC itself failed on
("'<' not supported between instances of 'int' and 'str'") before the check stage could name it."""

from __future__ import annotations

import re
import shutil
import sys

import pytest
import yaml
from click.testing import CliRunner

from oodcorr.cli import cli
from oodcorr.settings import environment
from study_helpers import REPO, sh, tiny_params

# a value each variable's stage refuses
BAD = {
    "OODCORR_STORE_BUSY_TIMEOUT_S": "abc",
    "OODCORR_THREADS": "0",
    "OODCORR_CACHE": "params.yaml",
    "OODCORR_TEST_KILL_AT_STEP": "four",
    "OODCORR_MEASURE_S": "0",
    "WORLD_SIZE": "abc",
    "RANK": "-1",
    "LOCAL_RANK": "x",
}
WRITTEN_ONLY = {"OODCORR_LAUNCH"}  # set by the launcher for its jobs (a stamp); no stage reads it


def test_every_oodcorr_variable_in_the_source_has_a_parser():
    found = set()
    for path in (REPO / "src" / "oodcorr").rglob("*.py"):
        found |= set(re.findall(r"\bOODCORR_[A-Z0-9_]+\b", path.read_text()))
    assert found - WRITTEN_ONLY == {n for n in environment.PARSERS if n.startswith("OODCORR_")}, found
    assert set(environment.PARSERS) == set(BAD)
    for name in WRITTEN_ONLY:  # written only: nothing reads it
        assert not any(
            re.search(rf"environ(\.get)?\W+{name}", p.read_text()) for p in (REPO / "src" / "oodcorr").rglob("*.py")
        ), name


@pytest.fixture
def project(tmp_path, monkeypatch):
    params = tiny_params(None)
    params["study"]["tracking"] = "none"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    shutil.copytree(REPO / "data" / "raw", tmp_path / "data" / "raw")  # the study's local testsets
    monkeypatch.chdir(tmp_path)
    for name in environment.PARSERS:
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.mark.parametrize("name", sorted(BAD))
def test_study_check_refuses_a_bad_variable_as_the_stage_does(project, monkeypatch, name):
    assert CliRunner().invoke(cli, ["study", "check"]).exit_code == 0
    monkeypatch.setenv(name, BAD[name])
    for args in (["study", "check"], ["analyze", "--no-plots"]):
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 2 and res.output.startswith(f"error: {name}: "), (args, res.output)
        assert res.output.count("\n") == 1
    monkeypatch.setenv(name, "")  # an empty variable is unset
    assert CliRunner().invoke(cli, ["study", "check"]).exit_code == 0


def test_the_store_and_the_check_read_the_busy_timeout_alike(monkeypatch):
    from oodcorr.tracking import store

    monkeypatch.setattr(store, "BUSY_TIMEOUT_S", None)
    monkeypatch.setenv("OODCORR_STORE_BUSY_TIMEOUT_S", "2.5")
    assert store.busy_timeout_s() == 2.5 == environment.read("OODCORR_STORE_BUSY_TIMEOUT_S")
    monkeypatch.delenv("OODCORR_STORE_BUSY_TIMEOUT_S")
    assert store.busy_timeout_s() == environment.BUSY_TIMEOUT_DEFAULT_S


@pytest.mark.slow
def test_dvc_repro_names_a_numeric_run_key_beside_named_ones(tmp_path):
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"check": stages["check"]}}, sort_keys=False))
    params = tiny_params(None)
    first = next(iter(params["runs"]))
    params["runs"][123] = dict(params["runs"][first])
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    shutil.copytree(REPO / "data" / "raw", tmp_path / "data" / "raw")
    sh(["git", "init", "-q"], tmp_path)
    sh([sys.executable, "-m", "dvc", "init", "-q"], tmp_path)
    res = sh([sys.executable, "-m", "dvc", "repro"], tmp_path, check=False, PYTHONPATH=REPO / "src")
    out = res.stdout + res.stderr
    errors = [x for x in out.splitlines() if x.startswith("error: ")]
    assert res.returncode != 0 and "not supported between instances" not in out, out[-2000:]
    assert len(errors) == 1 and "runs: run key 123 is read as a number" in errors[0], out[-2000:]
    assert not (tmp_path / ".oodcorr" / "params.ok").exists()


@pytest.mark.parametrize(
    "edit, said",
    [
        (lambda p: p["analyze"].update(seed=-1), "analyze.seed: must be an integer in [0, 4294967295], got -1"),
        (lambda p: p["runs"][next(iter(p["runs"]))].update(seed=-1), ".seed: must be an integer in [0, 4294967295]"),
        (lambda p: p["runs"][next(iter(p["runs"]))].update(seed=2**32), ".seed: must be an integer in [0, 4294967295]"),
        (lambda p: p["analyze"].update(bootstrap=10**9), "analyze.bootstrap: must be in [0, 100000]"),
        (lambda p: p["analyze"].update(reliability_splits=10**7), "analyze.reliability_splits: must be in [1, 100000]"),
    ],
)
def test_seeds_and_resample_counts_numpy_refuses_are_refused_by_the_check(project, edit, said):
    # a negative seed was numpy's ValueError in training (np.random.seed) or in the analysis (default_rng);
    # 1e9 bootstrap resamples an array of 1e9 rows
    params = yaml.safe_load((project / "params.yaml").read_text())
    edit(params)
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    res = CliRunner().invoke(cli, ["study", "check"])
    assert res.exit_code == 2 and res.output.startswith("error: ") and said in res.output, res.output
