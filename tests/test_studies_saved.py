"""Saved studies (docs/studies.md): `oodcorr study save` keeps a study's predictions in the repository's own
DVC remote, and a fresh clone's `oodcorr study reanalyze NAME --check` rebuilds its committed tables byte for
byte from them, running only `dvc pull` and the analysis: no DVC stage, and no model library importable."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import yaml

from oodcorr.core.io import write_json, write_jsonl
from oodcorr.records.simulated_runs import write_predictions
from oodcorr.stats.simulate import irt_metrics_rows, irt_study
from study_helpers import BIN, new_repo, sh

OOD = ["hans", "anli", "wnli"]
SIGMA = np.array([[1, 0.5, 0.0], [0.5, 1, 0.0], [0.0, 0.0, 1]])
RUNS = {"a-s0": "smollm2-135m", "b-s0": "gemma3-270m", "c-s0": "smollm2-135m"}  # c: never evaluated


def lock_entries(root: Path, key: str) -> dict:
    """dvc.lock's train@<key> and evaluate@<key> as `dvc repro` records them: every output with its md5 (a
    folder's as DVC names it)."""
    from oodcorr.launch.verify import file_md5, folder_md5, listing

    def out(rel):
        p = root / "runs" / key / rel
        return {"path": f"runs/{key}/{rel}", "md5": folder_md5(listing(p)) if p.is_dir() else file_md5(p)}

    return {
        f"train@{key}": {"cmd": f"oodcorr train --run {key}", "outs": [out("run.json")]},
        f"evaluate@{key}": {
            "cmd": f"oodcorr evaluate --run {key}",
            "outs": [out(r) for r in ("eval/metrics.jsonl", "eval/predictions", "eval/summary.json")],
        },
    }


def source_project(root: Path) -> Path:
    """A project whose runs a and b finished evaluation (recorded in its dvc.lock); c has only started."""
    runs, stages = {}, {}
    for i, (key, model) in enumerate(RUNS.items()):
        runs[key] = {
            "model": model,
            "train_set": "mnli_real_train",
            "id_testset": "mnli_real",
            "shots": 16,
            "data_seed": 0,
            "seed": 0,
        }
        rdir = root / "runs" / key
        write_json(rdir / "run.json", {"run": key, "model": model})
        (rdir / "checkpoints" / "checkpoint-0").mkdir(parents=True)  # never saved
        if key == "c-s0":
            continue
        st = irt_study(10, [40, 40, 40], SIGMA, tau=0.04, n_id_items=80, rng=np.random.default_rng(i))
        steps, ev = list(range(0, 100, 10)), rdir / "eval"
        write_predictions(ev, st, steps, "mnli", OOD)
        write_jsonl(ev / "metrics.jsonl", irt_metrics_rows(st, key, key[0], 0, steps, "mnli", OOD))
        write_json(ev / "summary.json", {"step": 90})
        stages.update(lock_entries(root, key))
    params = {
        "study": {"name": "demo", "tracking": "none"},
        "runs": runs,
        "analyze": {"out": "results", "methods": ["linear"], "bootstrap": 20, "seed": 0},
    }
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (root / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": stages}, sort_keys=False))
    return root


def no_models_env(tmp: Path) -> dict:
    """PATH with a `dvc` that logs its arguments before running the real one, and a sitecustomize that makes
    torch, transformers and peft unimportable in every Python process started below."""
    shim, block = tmp / "shim", tmp / "block"
    shim.mkdir()
    block.mkdir()
    (shim / "dvc").write_text(f'#!/bin/sh\necho "$*" >> {tmp / "dvc.log"}\nexec {BIN / "dvc"} "$@"\n')
    (shim / "dvc").chmod(0o755)
    (block / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('torch', 'transformers', 'peft'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, _Block())\n"
    )
    return {
        "PATH": f"{shim}{os.pathsep}{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(block), os.environ.get("PYTHONPATH")])),
    }


UP_TO_DATE = "Data and pipelines are up to date."


@pytest.mark.slow  # two analyses and three DVC repositories: about 30 s of CPU
def test_a_fresh_clone_with_a_saved_study_reads_up_to_date_and_still_reanalyses_it(tmp_path):
    """The project's `dvc status` in a fresh clone (a pipeline output built, deleted and rebuilt by `dvc repro`):
    up to date, the saved study's runs/*.dvc (outputs never pulled) not listed, since studies/ is a DVC subrepo;
    `study reanalyze --check` still pulls and checks the study, and the status stays up to date after that."""
    src = source_project(tmp_path / "ran")
    repo = new_repo(tmp_path / "repo")
    (repo / "in.txt").write_text("pipeline input\n")
    stage = {"stages": {"copy": {"cmd": "cp in.txt out.txt", "deps": ["in.txt"], "outs": ["out.txt"]}}}
    (repo / "dvc.yaml").write_text(yaml.safe_dump(stage))
    sh(["dvc", "repro", "-q"], repo)
    sh(["git", "add", "-A"], repo)
    sh(["git", "commit", "-qm", "pipeline"], repo)
    res = sh([BIN / "oodcorr", "study", "save", "demo", "--from", src], repo)
    line = [x for x in res.stdout.splitlines() if x.startswith("commit: git add ")][0]
    assert "studies/.dvc/config " in line and "config.local" not in line, line
    sh(["bash", "-c", line[len("commit: ") :]], repo)  # the printed line commits all the save wrote
    assert sh(["git", "status", "--porcelain"], repo).stdout == ""
    assert (repo / "studies" / ".dvc" / "cache").is_dir()  # the subrepo's own cache, ignored by git:
    ignored = sh(["git", "check-ignore", "studies/.dvc/cache", "studies/.dvc/config.local"], repo).stdout.split()
    assert ignored == ["studies/.dvc/cache", "studies/.dvc/config.local"], ignored
    tracked = sh(["git", "ls-files", "studies/.dvc", "studies/.dvcignore"], repo).stdout.split()
    assert tracked == ["studies/.dvc/.gitignore", "studies/.dvc/config", "studies/.dvcignore"], tracked

    clone = tmp_path / "clone"
    sh(["git", "clone", "-q", repo, clone], tmp_path)
    sh(["dvc", "repro", "-q"], clone)  # the quickstart's step: the pipeline's outputs built
    assert sh(["dvc", "status"], clone).stdout.strip() == UP_TO_DATE
    (clone / "out.txt").unlink()  # an output deleted (as a checkpoint folder), rebuilt by `dvc repro`
    sh(["dvc", "repro", "-q"], clone)
    assert sh(["dvc", "status"], clone).stdout.strip() == UP_TO_DATE
    assert "not in cache" in sh(["dvc", "--cd", "studies", "status"], clone).stdout  # the subrepo sees the study

    res = sh([BIN / "oodcorr", "study", "reanalyze", "demo", "--check"], clone, **no_models_env(tmp_path))
    assert "2 run(s) analysed" in res.stdout and " differ" not in res.stdout, res.stdout
    assert (clone / "studies" / "demo" / "runs" / "a-s0" / "eval" / "metrics.jsonl").is_file()  # pulled
    assert (clone / "studies" / ".dvc" / "cache").is_dir() and not any((clone / ".dvc" / "cache").rglob("*.dir"))
    assert sh(["dvc", "status"], clone).stdout.strip() == UP_TO_DATE
    assert sh(["dvc", "--cd", "studies", "status"], clone).stdout.strip() == UP_TO_DATE
    assert sh(["git", "status", "--porcelain"], clone).stdout == ""


@pytest.mark.slow  # three analyses and a DVC repository: about 45 s of CPU
def test_a_saved_study_is_reanalysed_from_a_fresh_clone_without_scoring(tmp_path):
    src = source_project(tmp_path / "ran")
    repo = tmp_path / "repo"
    repo.mkdir()
    sh(["git", "init", "-q"], repo)
    sh(["dvc", "init", "-q"], repo)
    sh(["git", "commit", "-qm", "init"], repo)

    res = sh([BIN / "oodcorr", "study", "save", "demo", "--from", src], repo)
    assert "c-s0: skipped, not evaluated yet" in res.stderr
    sdir = repo / "studies" / "demo"
    assert sorted(p.name for p in (sdir / "runs").glob("*.dvc")) == ["a-s0.dvc", "b-s0.dvc"]
    assert not (sdir / "runs" / "a-s0" / "checkpoints").exists()  # predictions, never checkpoints
    assert yaml.safe_load((sdir / "runs" / "a-s0.dvc").read_text())["outs"][0]["remote"] == "studies"
    assert (sdir / "dvc.lock").read_text() == (src / "dvc.lock").read_text()
    assert (sdir / "results" / "partial_correlations.csv").is_file()
    assert "../../.dvc/studies-remote" in (repo / "studies" / ".dvc" / "config").read_text()  # the subrepo's
    assert any((repo / ".dvc" / "studies-remote").rglob("*"))  # pushed inside the repository
    sh(["git", "add", "-A"], repo)
    sh(["git", "commit", "-qm", "study demo"], repo)
    committed = sh(["git", "ls-files", "studies/demo/results"], repo).stdout.split()
    assert "studies/demo/results/partial_correlations.csv" in committed
    assert not [f for f in committed if "figures/" in f or f.endswith("report.html")]

    clone = tmp_path / "clone"
    sh(["git", "clone", "-q", repo, clone], tmp_path)
    assert not (clone / "studies" / "demo" / "runs" / "a-s0").exists()
    env = no_models_env(tmp_path)
    res = sh([BIN / "oodcorr", "study", "reanalyze", "demo", "--check"], clone, **env)
    assert "2 run(s) analysed" in res.stdout and " differ" not in res.stdout and "one side" not in res.stdout, (
        res.stdout
    )
    assert (clone / "studies" / "demo" / "runs" / "b-s0" / "eval" / "predictions").is_dir()
    # the only DVC command was the pull of the saved runs: no stage ran (not -q: DVC's ERROR lines are reported)
    assert (tmp_path / "dvc.log").read_text().splitlines() == [
        "--wait-for-lock pull -r studies demo/runs/a-s0.dvc demo/runs/b-s0.dvc"  # in the studies subrepo
    ]
    assert sh(["git", "status", "--porcelain"], clone).stdout == ""

    # a changed table is named, and --check exits 1
    table = clone / "studies" / "demo" / "results" / "reliability.csv"
    table.write_text(table.read_text().replace("0", "1", 1))
    res = sh([BIN / "oodcorr", "study", "reanalyze", "demo", "--check", "--no-pull"], clone, check=False, **env)
    assert res.returncode == 1 and "differ: " in res.stdout and "reliability.csv" in res.stdout, res.stdout + res.stderr
    # without --check the tables are rebuilt in place, equal to the committed ones again
    sh([BIN / "oodcorr", "study", "reanalyze", "demo", "--no-pull"], clone, **env)
    assert sh(["git", "status", "--porcelain"], clone).stdout == ""


def test_save_keeps_only_recorded_runs_and_one_params_file(tmp_path, monkeypatch):
    """A run whose metrics.jsonl the project's dvc.lock does not name (still scoring, or scored under older
    params) is not saved; a study whose params changed is refused before anything is written."""
    from click.testing import CliRunner

    from oodcorr.cli import cli
    from oodcorr.core.errors import UserError
    from oodcorr.launch.saved import finished_runs
    from oodcorr.settings.config import load_params

    src = source_project(tmp_path / "ran")
    params = load_params(src / "params.yaml")
    state = finished_runs(src, params)
    assert state["a-s0"] == state["b-s0"] == "" and state["c-s0"].startswith("not evaluated yet")
    with open(src / "runs" / "a-s0" / "eval" / "metrics.jsonl", "a") as f:
        f.write("\n")
    assert "evaluate@a-s0 not recorded" in finished_runs(src, params)["a-s0"]
    lock = (src / "dvc.lock").read_text()
    (src / "dvc.lock").write_text("stages: [unclosed\n")
    with pytest.raises(UserError, match=r"dvc\.lock: not a readable dvc\.lock"):
        finished_runs(src, params)
    (src / "dvc.lock").write_text(lock)

    repo = tmp_path / "repo"
    (repo / ".dvc").mkdir(parents=True)
    (repo / "studies" / "demo").mkdir(parents=True)
    (repo / "studies" / "demo" / "params.yaml").write_text("study: {name: other}\n")
    monkeypatch.chdir(repo)
    res = CliRunner().invoke(cli, ["study", "save", "demo", "--from", str(src)])
    assert res.exit_code == 2 and "differs from" in res.output and "another name" in res.output, res.output
    assert sorted(p.name for p in (repo / "studies" / "demo").iterdir()) == ["params.yaml"]


def test_the_check_tells_rounding_from_a_change_and_names_the_cell(tmp_path):
    """Another machine's numerical libraries move the last digits of a float: such a table is reported as equal
    within the tolerances, while a change beyond a column's tolerance is named with its column and first cell; the
    words compare their numbers to the precision they are written with, counts exactly."""
    from oodcorr.launch.compare import compare

    new, old = tmp_path / "new", tmp_path / "old"
    for d in (new, old):
        d.mkdir()
    (old / "a.csv").write_text("pair,r,rel\nx~y,0.7635798109916538,0.5\n")
    (new / "a.csv").write_text("pair,r,rel\nx~y,0.7635798109916524,0.5\n")
    (old / "b.csv").write_text("pair,r,rel\nx~y,0.76,0.5\nx~z,0.1,0.9\n")
    (new / "b.csv").write_text("pair,r,rel\nx~y,0.76,0.6\nx~z,0.1,0.8\n")
    (old / "s.json").write_text('{"m": {"r": 0.8311553554546439, "n": 3}}')
    (new / "s.json").write_text('{"m": {"r": 0.8311553554546243, "n": 3}}')
    (old / "same.csv").write_text("a\n1\n")
    (new / "same.csv").write_text("a\n1\n")
    # a reliability within its tolerance (1e-6), a GAM row's r within its row's, words with a number in its last
    # digit: equal; the same words with another count of seeds: a change
    (old / "w.csv").write_text(
        "method,reliability,r,why,models\nlinear,0.91,0.5,about 14 over 1 seed,+0.566 [+0.345]\ngam,0.9,0.2,,\n"
    )
    (new / "w.csv").write_text(
        "method,reliability,r,why,models\nlinear,0.9100004,0.5,about 14 over 1 seed,"
        "+0.567 [+0.345]\ngam,0.9,0.2000001,,\n"
    )
    (old / "x.csv").write_text("method,why\nlinear,suggests 4 seeds\n")
    (new / "x.csv").write_text("method,why\nlinear,suggests 3 seeds\n")
    same, within, differ, missing = compare(new, old)
    assert same == ["same.csv"] and sorted(within) == ["a.csv", "s.json", "w.csv"] and missing == []
    assert differ == [
        "b.csv (rel: 2 cell(s); line 2 rel: 0.6 here, 0.5 committed (tolerance 1e-09))",
        "x.csv (why: 1 cell(s); line 2 (linear) why: suggests 3 seeds here, suggests 4 seeds committed (words))",
    ]


def test_a_save_streams_each_remote_object_once_and_a_later_verify_reads_them_afresh(tmp_path, monkeypatch):
    """`study save` checks every object on the remote after its push and again in its final check: through
    one Remote, so each object's bytes are streamed once. What was read is kept by that Remote only: an object
    altered after the save is caught by a `study verify` in the same process."""
    from click.testing import CliRunner

    from oodcorr.cli import cli
    from oodcorr.launch import remote as remote_mod

    src = source_project(tmp_path / "ran")
    repo = new_repo(tmp_path / "repo")
    opened: list[str] = []
    init = remote_mod.Remote.__init__

    def counting_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        fs = self.fs

        class Counting:
            def __getattr__(self, name):
                return getattr(fs, name)

            def open(self, path, *a, **k):
                opened.append(path)
                return fs.open(path, *a, **k)

        self.fs = Counting()

    monkeypatch.setattr(remote_mod.Remote, "__init__", counting_init)
    monkeypatch.chdir(repo)
    res = CliRunner().invoke(cli, ["study", "save", "demo", "--from", str(src)])
    assert res.exit_code == 0, res.output
    objects = [p for p in (repo / ".dvc" / "studies-remote").rglob("*") if p.is_file()]
    assert len(objects) > 20 and sorted(opened) == sorted(set(opened))  # each once
    assert {str(p) for p in objects if not p.name.endswith(".dir")} <= {str(Path(p)) for p in opened}

    victim = next(p for p in objects if not p.name.endswith(".dir"))
    victim.chmod(0o644)
    victim.write_bytes(victim.read_bytes() + b"x")
    res = CliRunner().invoke(cli, ["study", "verify", "demo"])
    assert res.exit_code != 0 and "does not match its name" in res.output, res.output


def test_runs_saved_from_two_clones_keep_both_records_in_the_study_lock(tmp_path):
    """A study saved run by run from two clones (or two sessions) keeps every saved run's train@/evaluate@ record:
    each clone's dvc.lock holds only its own runs, and the study's lock is what `study verify` checks them against.
    A run saved before keeps the record it was saved with; one saved again takes the new one; a shared stage
    (prepare) with other outputs means other data: refused before anything is written, naming the stage."""
    from oodcorr.core.errors import UserError
    from oodcorr.launch.save_runs import merged_lock
    from oodcorr.launch.verify import lock_outputs

    def lock(path, stages):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump({"schema": "2.0", "stages": stages}, sort_keys=False))
        return path

    def run(key, md5):
        return {
            f"train@{key}": {
                "cmd": f"oodcorr train --run {key}",
                "outs": [{"path": f"runs/{key}/run.json", "md5": md5}],
            },
            f"evaluate@{key}": {"outs": [{"path": f"runs/{key}/eval/metrics.jsonl", "md5": md5 + "e"}]},
        }

    prep = {"prepare": {"outs": [{"path": "data/prepared", "md5": "p0.dir"}]}}
    study = lock(tmp_path / "study" / "dvc.lock", {**prep, **run("a", "a0")})
    clone = lock(tmp_path / "clone" / "dvc.lock", {**prep, **run("b", "b0"), **run("a", "a1")})  # a: re-trained there
    merged = tmp_path / "merged.lock"
    merged.write_text(merged_lock(study, clone, ["b"], ["a"]))
    files = ("run.json", "eval/metrics.jsonl")
    assert lock_outputs(merged, "a", files) == {
        "run.json": ("train@a", "a0"),
        "eval/metrics.jsonl": ("evaluate@a", "a0e"),
    }
    assert lock_outputs(merged, "b", files) == {
        "run.json": ("train@b", "b0"),
        "eval/metrics.jsonl": ("evaluate@b", "b0e"),
    }
    merged.write_text(merged_lock(study, clone, ["a", "b"], ["a"]))  # a saved again: its new record
    assert lock_outputs(merged, "a", files)["run.json"] == ("train@a", "a1")
    # no study lock yet: the clone's, as DVC wrote it; no clone lock: the study's is kept
    assert merged_lock(tmp_path / "none.lock", clone, ["b"], []) == clone.read_text()
    assert merged_lock(study, tmp_path / "none.lock", ["b"], ["a"]) is None
    other = lock(tmp_path / "other" / "dvc.lock", {"prepare": {"outs": [{"path": "data/prepared", "md5": "p1.dir"}]}})
    with pytest.raises(UserError, match=r"stage prepare made other outputs .* another study name"):
        merged_lock(study, other, ["c"], ["a"])
