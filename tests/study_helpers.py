"""Helpers for end-to-end tests: a throw-away oodcorr project (git + DVC) with a tiny study."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def tiny_params(out: Path, **study) -> dict:
    """Two tiny models (a cross-model comparison), synthetic suite, seconds per stage."""
    from oodcorr.study import load_preset

    params = load_preset("synthetic")
    params["study"]["name"] = study.get("name", "tiny")
    params["data"]["max_examples"] = 24
    params["train"].update(
        {"lr": 0.005, "batch_size": 4, "max_steps": 16, "max_length": 64, "checkpoints": {"log_spaced": 9}}
    )
    params["runs"] = {
        "tiny-olmo2_synth_16_s0": {
            "model": "tiny-olmo2",
            "train_set": "synth_train",
            "id_testset": "synth_id",
            "shots": 16,
            "data_seed": 0,
            "seed": 0,
        },
        "tiny-opt_synth_16_s0": {
            "model": "tiny-opt",
            "train_set": "synth_train",
            "id_testset": "synth_id",
            "shots": 16,
            "data_seed": 0,
            "seed": 0,
        },
    }
    params["evaluate"]["batch_size"] = 16
    params["evaluate"]["max_length"] = 64
    params["analyze"]["bootstrap"] = 20
    return params


def quickstart_text() -> str:
    """The quickstart preset's text: what this repository's params.yaml ships as. Tests start from this, never
    from the top-level params.yaml, which is the user's to edit (conftest.py fails a test that opens it)."""
    from oodcorr.study import PRESETS_DIR

    return (PRESETS_DIR / "quickstart.yaml").read_text()


def load_script(path: Path):
    """A script under scripts/ or bench/ (not a package) imported as a module, for its functions."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses (and pickling) look their module up there
    spec.loader.exec_module(mod)
    return mod


def env(**extra) -> dict:
    e = dict(os.environ)
    e.update(
        {
            "PATH": f"{BIN}{os.pathsep}{e.get('PATH', '')}",
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "DVC_NO_ANALYTICS": "1",
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
            "OMP_NUM_THREADS": "1",
        }
    )
    e.pop("MLFLOW_TRACKING_URI", None)
    # one torch thread in every stage process: results then do not depend on the load when a stage starts
    # (the auto policy is tested on its own in test_io_crashsafe.py)
    e.setdefault("OODCORR_THREADS", "1")
    e.update({k: str(v) for k, v in extra.items() if v is not None})
    for k in [k for k, v in extra.items() if v is None]:  # None: unset it
        e.pop(k, None)
    return e


def sh(cmd: list, cwd: Path, check: bool = True, **extra) -> subprocess.CompletedProcess:
    res = subprocess.run(
        [str(c) for c in cmd],
        cwd=cwd,
        env=env(**extra),
        capture_output=True,
        text=True,
        timeout=int(os.environ.get("OODCORR_TEST_TIMEOUT", 900)),
    )  # raise on a loaded machine
    if check and res.returncode != 0:
        raise AssertionError(f"{cmd} failed ({res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    return res


def new_repo(root: Path) -> Path:
    """A new git + DVC repository at `root` (autostage on, as the project's), one commit."""
    root.mkdir(parents=True)
    sh(["git", "init", "-q"], root)
    sh(["dvc", "init", "-q"], root)
    sh(["dvc", "config", "core.autostage", "true"], root)
    sh(["git", "commit", "-qm", "init"], root)
    return root


def make_project(root: Path, params: dict) -> Path:
    """A new git + DVC project laid out like this repository, with `params`."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "dvc.yaml", root / "dvc.yaml")
    shutil.copytree(REPO / "src", root / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copytree(REPO / "data" / "raw", root / "data" / "raw")
    shutil.copy(REPO / "data" / "items.json", root / "data" / "items.json")  # prepare's dep: no items chosen
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (root / ".gitignore").write_text((REPO / ".gitignore").read_text())
    (root / "mlruns").mkdir()
    sh(["git", "init", "-q"], root)
    sh(["dvc", "init", "-q"], root)
    shutil.copy(REPO / ".dvcignore", root / ".dvcignore")
    shutil.copytree(REPO / ".dvc" / "plots", root / ".dvc" / "plots")
    sh(["dvc", "config", "core.autostage", "true"], root)
    sh(["dvc", "add", "-q", "data/raw"], root)
    sh(["git", "add", "-A"], root)
    sh(["git", "commit", "-qm", "tiny study"], root)
    return root


def as_this_repo(root: Path) -> Path:
    """Track data/raw as this repository does (data.dvc at the top), so README commands apply as written."""
    tracked = yaml.safe_load((root / "data" / "raw.dvc").read_text())
    tracked["outs"][0]["path"] = "data/raw"
    (root / "data.dvc").write_text(yaml.safe_dump(tracked, sort_keys=False))
    sh(["git", "rm", "-q", "data/raw.dvc"], root)
    sh(["git", "add", "-A"], root)
    sh(["git", "commit", "-qm", "data.dvc at the top"], root)
    return root


def mlflow_runs(root: Path, experiment: str = "oodcorr/tiny"):
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{root / 'mlruns' / 'mlflow.db'}")
    exp = client.get_experiment_by_name(experiment)
    return client, client.search_runs([exp.experiment_id], max_results=1000)


# `oodcorr plan` inputs stated instead of measured or read from a pilot (the planner's tests)
PLAN_STATED = [
    "--examples-per-s",
    "20",
    "--train-hours",
    "0.1",
    "--ell",
    "0.2",
    "--signal-sd",
    "0.04",
    "--item-sd",
    "0.5",
    "--id-slope",
    "0.5",
    "--ood-testsets",
    "4",
    "--max-items",
    "1024",
]


def leave_one_seed_out(repo: Path, name: str):
    """(CSV, saved run keys) of bench/studies/leave_one_seed_out.py for studies/NAME, after checking that its
    every-run rows are the study's committed verdicts (so it was built from these tables) and that each leave-out
    dropped one saved run."""
    import pandas as pd

    study = repo / "studies" / name
    df = pd.read_csv(repo / "bench" / "studies" / "results" / f"leave_one_seed_out_{name}.csv").fillna({"left_out": ""})
    cons = pd.read_csv(study / "results" / "consistency.csv")
    full = df[df["left_out"] == ""].merge(cons, on=["method", "testset_a", "testset_b"], suffixes=("", "_table"))
    assert len(full) == len(cons) and (full["verdict"] == full["verdict_table"]).all()
    runs = sorted(p.name[: -len(".dvc")] for p in (study / "runs").glob("*.dvc"))
    assert sorted(set(df["left_out"]) - {""}) == runs
    return df, runs
