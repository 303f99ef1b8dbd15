"""RunSettings (one run's resolved settings) and Project (the params folder and study section), resolved once."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from oodcorr.core.errors import UserError
from oodcorr.settings.project import Project
from oodcorr.settings.run_settings import LoraSettings, RunSettings


def _params(run: dict, train: dict | None = None) -> dict:
    return {"train": train or {}, "runs": {"r": run}, "_root": "/proj"}


def test_record_keeps_the_train_defaults_first_then_the_run_entry_in_params_order():
    run = {"seed": 3, "model": "tiny-opt", "optim": "adamw", "shots": 4, "train_set": "a", "id_testset": "b"}
    config = RunSettings.from_params(_params(run, {"lr": 0.01, "lora": {"target_modules": ["q_proj"]}}), "r").as_dict()
    assert list(config) == [
        "revision",
        "pattern",
        "verbalizer",
        "loss",
        "sampling",
        "lora",
        "finetune",
        "quantization",
        "dtype",
        "gradient_checkpointing",
        "lr",
        "weight_decay",
        "warmup_ratio",
        "max_grad_norm",
        "batch_size",
        "grad_accum",
        "epochs",
        "max_steps",
        "max_length",
        "checkpoints",
        "quiet",
        "seed",
        "model",
        "optim",
        "shots",
        "train_set",
        "id_testset",
        "data_seed",
        "run",
    ]
    assert config["lora"] == {"r": 8, "alpha": 32, "dropout": 0.1, "target_modules": ["q_proj"]}
    assert (config["lr"], config["seed"], config["data_seed"], config["run"]) == (0.01, 3, 0, "r")
    # what run.json stores reads back as the same identity (lists stay lists)
    assert json.loads(json.dumps(config)) == config


def test_optim_is_recorded_only_when_set_and_defaults_to_adamw():
    base = {"model": "tiny-opt", "shots": 4, "train_set": "a", "id_testset": "a"}
    unset = RunSettings.from_params(_params(base), "r")
    assert "optim" not in unset.as_dict() and unset.optimizer == "adamw"
    paged = RunSettings.from_params(_params({**base, "optim": "paged_adamw_8bit"}), "r")
    assert paged.as_dict()["optim"] == paged.optimizer == "paged_adamw_8bit"


def test_nested_sections_merge_over_the_defaults_and_the_object_is_frozen():
    base = {
        "model": "tiny-opt",
        "shots": 4,
        "train_set": "a",
        "id_testset": "a",
        "verbalizer": {"non_entailment": " no"},
        "checkpoints": {"every": 3},
    }
    s = RunSettings.from_params(_params(base, {"lora": {"r": 4}}), "r")
    assert s.verbalizer == {"entailment": " Yes", "non_entailment": " no"}
    assert (s.checkpoints.every, s.checkpoints.log_spaced) == (3, 10)
    assert s.lora == LoraSettings(r=4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.lr = 1.0
    # a direct construction runs the same checks as params do
    with pytest.raises(UserError, match=r"params: runs\.x\.shots: balanced sampling needs an even number"):
        RunSettings(run="x", model="m", train_set="a", id_testset="a", shots=3)


def test_project_resolves_paths_tracking_and_threads_once():
    p = Project.from_params(
        {"_root": "/proj", "study": {"name": "s", "tracking": "none", "threads": 2}, "data": {"out": "prep"}}
    )
    assert (p.root, p.name, p.tracking_enabled, p.threads) == (Path("/proj"), "s", False, 2)
    assert p.path("runs") == Path("/proj/runs") and p.path("/abs") == Path("/abs")
    assert Project.of(p) is p
    from oodcorr.records.prepared import prepared_dir
    from oodcorr.records.rundir import run_dir
    from oodcorr.tracking.store import experiment_name

    assert prepared_dir(p) == Path("/proj/prep") and run_dir(p, "r") == Path("/proj/runs/r")
    assert experiment_name(p) == "oodcorr/s"
    assert prepared_dir({"_root": "/proj"}) == Path("/proj/data/prepared")  # data.out's default
    with pytest.raises(UserError, match="params: study.tracking: expected mlflow or none, got 'wandb'"):
        Project.from_params({"study": {"tracking": "wandb"}})


def test_prepare_and_evaluate_read_evaluate_testsets_through_one_check():
    from oodcorr.data.prepare import referenced_names
    from oodcorr.evaluate.settings import EvaluateSettings

    params = {
        "runs": {"r": {"train_set": "a_train", "id_testset": "a"}},
        "evaluate": {"testsets": ["b", "a"]},
        "data": {"prepare": ["c"]},
    }
    assert referenced_names(params) == ["a_train", "a", "b", "c"]
    assert EvaluateSettings.from_params(params).testsets == ("b", "a")
    params["evaluate"]["testsets"] = ["b", 3]
    for read in (referenced_names, EvaluateSettings.from_params):
        with pytest.raises(UserError, match=r"params: evaluate.testsets\[1\]: expected a testset name, got 3"):
            read(params)
