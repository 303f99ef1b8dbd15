"""README workflows, each followed as a new user would (real DVC in a git repo, real MLflow sqlite, tiny
models standing in): "Adding your own testset", "The paper's setup" under `dvc repro`, presets that keep the
user's params, and "Sharing through a DVC remote" (two clones, a local remote, `make setup`)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
import yaml

from study_helpers import REPO, make_project, sh, tiny_params


def readme_block(section: str, lang: str) -> str:
    """The first ```lang block under the README heading `section` (the words a user follows)."""
    text = (REPO / "README.md").read_text()
    body = text.split(f"## {section}\n", 1)[1]
    return re.search(rf"```{lang}\n(.*?)```", body, re.S).group(1)


def nli_csv(path: Path, n: int, seed: int, header=("sentence1", "sentence2", "gold", "genre"),
            labels=("yes", "no")) -> None:
    """A small local NLI file: entailment = the hypothesis repeats the premise's subject."""
    import random

    rng = random.Random(seed)
    names, verbs = ["Ana", "Bo", "Cy", "Dee", "Eli", "Fay"], ["sings", "runs", "reads", "swims"]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for i in range(n):
            a, b, v = rng.choice(names), rng.choice(names), rng.choice(verbs)
            ent = i % 2 == 0
            w.writerow([f"{a} {v} in the park.", f"{a if ent else b} {v}.", labels[0] if ent else labels[1],
                        ["news", "fiction"][i % 3 == 0]])


def one_run_params(**train) -> dict:
    params = tiny_params(None)
    params["runs"] = {"tiny-opt_synth_16_s0": params["runs"]["tiny-opt_synth_16_s0"],
                      "tiny-olmo2_synth_16_s0": params["runs"]["tiny-olmo2_synth_16_s0"]}
    params["train"].update({"max_steps": 6, "checkpoints": {"every": 1}, **train})
    params["evaluate"]["testsets"] = ["synth_id", "synth_overlap", "synth_negation"]
    return params


@pytest.mark.slow
def test_adding_your_own_testset_as_the_readme_says(tmp_path):
    """README: declare it under data.testsets, add it to evaluate.testsets, `dvc add data/raw`, commit;
    `dvc repro` prepares and evaluates it (no other list to edit)."""
    root = make_project(tmp_path / "study", one_run_params())
    sh(["dvc", "repro"], root)
    block = readme_block("Adding your own testset", "yaml")
    assert "prepare" not in block
    declared = yaml.safe_load(block.replace("[..., my_set]", "[my_set]"))
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["data"]["testsets"].update(declared["data"]["testsets"])
    params["evaluate"]["testsets"].append("my_set")
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    spec = declared["data"]["testsets"]["my_set"]
    nli_csv(root / spec["path"], 20, seed=5)
    assert "dvc add data/raw" in (REPO / "README.md").read_text().split("## Adding your own testset")[1][:2500]
    sh(["dvc", "add", "-q", "data/raw"], root)
    sh(["git", "add", "-A"], root)
    sh(["git", "commit", "-qm", "my_set"], root)
    res = sh(["dvc", "repro"], root)
    assert "Running stage 'prepare'" in res.stdout
    manifest = json.loads((root / "data" / "prepared" / "manifest.json").read_text())
    assert manifest["testsets"]["my_set"]["rows"] == 20
    for run in params["runs"]:
        rows = [json.loads(x) for x in (root / "runs" / run / "eval" / "metrics.jsonl").read_text().splitlines()]
        mine = [r for r in rows if r["testset"] == "my_set"]
        assert {r["slice"] for r in mine} == {None, "news", "fiction"}
        assert {r["step"] for r in mine if r["slice"] is None} == set(range(7))
    assert "my_set" in (root / "results" / "partial_correlations.csv").read_text()
    assert "Running stage" not in sh(["dvc", "repro"], root).stdout


PAPER_NAMES = ["mnli_train", "mnli", "snli", "scitail", "rte", "hans", "anli", "wnli", "paws"]


@pytest.mark.slow
def test_paper_preset_runs_under_dvc_repro_with_tiny_stand_ins(tmp_path):
    """`oodcorr study use paper` as written (data.out, prepare list, grid), then only the hub loads swapped
    for local files, the models for tiny aliases and the grid trimmed: `dvc repro` runs to the end."""
    root = make_project(tmp_path / "paper", one_run_params())
    sh(["oodcorr", "study", "use", "paper", "--models", "tiny-opt,tiny-olmo2", "--shots", "8", "--seeds", "0",
        "--train-sets", "mnli_train"], root)
    params = yaml.safe_load((root / "params.yaml").read_text())
    assert params["study"]["name"] == "paper" and len(params["runs"]) == 2
    for i, name in enumerate(PAPER_NAMES):  # hub -> local files with the same names
        nli_csv(root / "data" / "raw" / f"{name}.csv", 40 if name == "mnli_train" else 16, seed=i,
                header=("sentence1", "sentence2", "gold", "heuristic"))
        params["data"].setdefault("testsets", {})[name] = {
            "path": f"data/raw/{name}.csv", "premise": "sentence1", "hypothesis": "sentence2", "label": "gold",
            "label_map": {"yes": "entailment", "no": "non_entailment"}}
    params["train"].update({"epochs": 1, "max_steps": 4, "checkpoints": {"every": 1}, "max_length": 48,
                            "batch_size": 4})
    params["evaluate"]["max_length"] = 64
    params["analyze"]["bootstrap"] = 20
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    sh(["dvc", "add", "-q", "data/raw"], root)
    sh(["git", "add", "-A"], root)
    sh(["git", "commit", "-qm", "paper preset, tiny stand-ins"], root)
    res = sh(["dvc", "repro"], root)
    # progress on stderr under dvc repro; known third-party noise filtered (gradient checkpointing is on here)
    assert re.search(r"train tiny-opt_mnli_8_s0: .*\d+/4", res.stderr) and re.search(r"evaluate: .*ex", res.stderr)
    assert "is_gradient_checkpointing" not in res.stderr and "INFO mlflow" not in res.stderr, res.stderr[-3000:]
    manifest = json.loads((root / "data" / "prepared" / "manifest.json").read_text())
    assert set(manifest["testsets"]) == set(PAPER_NAMES)
    summary = json.loads((root / "results" / "summary.json").read_text())
    assert summary["n_runs"] == 2
    assert "Data and pipelines are up to date" in sh(["dvc", "status"], root).stdout
