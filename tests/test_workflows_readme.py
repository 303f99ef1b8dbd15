"""README workflows, each followed as a new user would, with the README's own commands (real DVC in a git
repo, real MLflow sqlite, tiny models standing in): "Add a testset" (and its file:line error), "Presets"
(switching and back, the paper preset under `dvc repro`), `oodcorr plan --pilot` with the quickstart's run
key, and a 3-way testset's neutral convention as `oodcorr testsets` shows it. Sharing through a DVC remote:
test_workflows_sharing.py."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
import yaml

from oodcorr.study import load_preset
from study_helpers import REPO, as_this_repo, make_project, quickstart_text, sh, tiny_params


def readme_section(section: str) -> str:
    text = (REPO / "README.md").read_text()
    return text.split(f"## {section}\n", 1)[1].split("\n## ")[0]


def readme_block(section: str, lang: str, index: int = 0) -> str:
    """The index-th ```lang block under the README heading `section` (the words a user follows)."""
    return re.findall(rf"```{lang}\n(.*?)```", readme_section(section), re.S)[index]


def commands(block: str) -> list[str]:
    """Shell lines of a ```bash block, comments cut."""
    return [ln.split("  #")[0].strip() for ln in block.splitlines() if ln.strip()]


def nli_csv(
    path: Path, n: int, seed: int, header=("sentence1", "sentence2", "gold", "genre"), labels=("yes", "no")
) -> None:
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
            w.writerow(
                [
                    f"{a} {v} in the park.",
                    f"{a if ent else b} {v}.",
                    labels[0] if ent else labels[1],
                    ["news", "fiction"][i % 3 == 0],
                ]
            )


def one_run_params(**train) -> dict:
    params = tiny_params(None)
    params["runs"] = {
        "tiny-opt_synth_16_s0": params["runs"]["tiny-opt_synth_16_s0"],
        "tiny-olmo2_synth_16_s0": params["runs"]["tiny-olmo2_synth_16_s0"],
    }
    params["train"].update({"max_steps": 6, "checkpoints": {"every": 1}, **train})
    params["evaluate"]["testsets"] = ["synth_id", "synth_overlap", "synth_negation"]
    return params


def declared_testset() -> dict:
    """The README's declaration of my_set (data.testsets.my_set)."""
    return yaml.safe_load(readme_block("Add a testset", "yaml"))["data"]["testsets"]


@pytest.mark.slow
def test_adding_your_own_testset_as_the_readme_says(tmp_path):
    """README "Add a testset": declare it, list it in evaluate.testsets, then the bash block as written
    (`dvc add data/raw`, `git add ... && git commit`, `dvc repro`): it is prepared (cut to data.max_examples,
    as the README says) and every checkpoint is scored on it, nothing else recomputed; `oodcorr plan --pilot`
    as the README writes it runs on the study's own run."""
    root = as_this_repo(make_project(tmp_path / "study", one_run_params()))
    sh(["dvc", "repro"], root)
    sh(["git", "add", "-A"], root)
    sh(["git", "commit", "-qm", "the study, committed"], root)
    block = readme_block("Add a testset", "yaml")
    assert "prepare" not in block
    spec = declared_testset()["my_set"]
    readme_eval = yaml.safe_load(block)["evaluate"]["testsets"]
    assert readme_eval[:-1] == load_preset("quickstart")["evaluate"]["testsets"] and readme_eval[-1] == "my_set"
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["data"]["testsets"]["my_set"] = spec
    params["evaluate"]["testsets"].append("my_set")
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    nli_csv(root / spec["path"], 40, seed=5)
    cut = params["data"]["max_examples"]
    assert cut < 40 and "`data.max_examples`" in readme_section("Add a testset")
    steps = commands(readme_block("Add a testset", "bash"))
    assert steps[0] == "dvc add data/raw" and steps[-1] == "dvc repro"
    for step in steps[:-1]:
        sh(["bash", "-c", step], root)
    assert sh(["git", "status", "--porcelain"], root).stdout.strip() == ""  # the README's `git add` names them all
    res = sh(["dvc", "repro"], root)
    assert "Running stage 'prepare'" in res.stdout and "Running stage 'train@" not in res.stdout
    manifest = json.loads((root / "data" / "prepared" / "manifest.json").read_text())
    assert manifest["testsets"]["my_set"]["rows"] == cut  # 40 rows cut to data.max_examples
    for run in params["runs"]:
        rows = [json.loads(x) for x in (root / "runs" / run / "eval" / "metrics.jsonl").read_text().splitlines()]
        mine = [r for r in rows if r["testset"] == "my_set"]
        assert {r["slice"] for r in mine} == {None, "news", "fiction"}
        assert {r["step"] for r in mine if r["slice"] is None} == set(range(7))
    assert "my_set" in (root / "results" / "partial_correlations.csv").read_text()
    assert "Running stage" not in sh(["dvc", "repro"], root).stdout
    plans = commands(readme_block("Plan a study", "bash"))
    assert "examples" in sh(["bash", "-c", plans[0]], root).stdout  # from assumptions
    # this study's runs have 7 checkpoints (the quickstart's 5): too few for a pilot, one line says so (the README's
    # pilot lines plan from studies/pilot: test_plan_pilot_readme.py types them)
    pilot = f"oodcorr plan --pilot runs/{next(iter(params['runs']))}/eval/metrics.jsonl --budget 5"
    res = sh(["bash", "-c", pilot], root, check=False)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and ">= 10" in res.stderr, res.stderr


def test_a_label_outside_the_map_names_file_and_line(tmp_path):
    """README: a label not in label_map stops with one line naming file:line of the first such row, and what to do."""
    assert "`file:line`" in readme_section("Add a testset")
    params = one_run_params()
    params["data"]["testsets"]["my_set"] = declared_testset()["my_set"]
    params["evaluate"]["testsets"].append("my_set")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    nli_csv(tmp_path / "data" / "raw" / "my_set.csv", 8, seed=1)
    lines = (tmp_path / "data" / "raw" / "my_set.csv").read_text().splitlines()
    lines[4] = lines[4].rsplit(",", 2)[0] + ",unsure," + lines[4].rsplit(",", 1)[1]  # line 5: label outside the map
    lines[6] = lines[6].rsplit(",", 2)[0] + ",perhaps," + lines[6].rsplit(",", 1)[1]
    (tmp_path / "data" / "raw" / "my_set.csv").write_text("\n".join(lines) + "\n")
    res = sh(["oodcorr", "data", "prepare", "--only", "my_set"], tmp_path, check=False)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        "error: data/raw/my_set.csv:5: testset my_set: label 'unsure' not in label_map (values outside it: "
        "'unsure' (1), 'perhaps' (1)); label_map keys: 'yes', 'no', 'maybe', '-'. Fix: add each value to "
        "data.testsets.my_set.label_map in params.yaml, mapped to entailment, non_entailment, neutral or drop "
        "(e.g. 'unsure': drop)"
    ], res.stderr
    assert not (tmp_path / "data" / "prepared").exists()


def test_study_check_reads_the_readmes_testset_as_prepare_would(tmp_path):
    """README "Add a testset" declares `slice: genre`: a file without that column passed `oodcorr study check` (the
    pipeline's first stage) and then broke `prepare`; the check now builds local testsets as prepare does."""
    params = one_run_params()
    params["data"]["testsets"]["my_set"] = declared_testset()["my_set"]
    params["evaluate"]["testsets"].append("my_set")
    assert params["data"]["testsets"]["my_set"]["slice"] == "genre"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    nli_csv(tmp_path / "data" / "raw" / "my_set.csv", 8, seed=1, header=("sentence1", "sentence2", "gold", "kind"))
    demo = "data/raw/synth_local_demo.csv"  # the synthetic preset's own local testset (data.prepare)
    (tmp_path / demo).write_bytes((REPO / demo).read_bytes())
    res = sh(["oodcorr", "study", "check"], tmp_path, check=False)
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        "error: data/raw/my_set.csv: testset my_set: no column 'genre' (the file has 4 columns); set premise, "
        "hypothesis, label (and slice, id, filter) to column names of the file"
    ], res.stderr
    nli_csv(tmp_path / "data" / "raw" / "my_set.csv", 8, seed=1)  # with its genre column
    assert sh(["oodcorr", "study", "check"], tmp_path).stdout.startswith("ok: ")
    assert not (tmp_path / "data" / "prepared").exists()


@pytest.mark.slow
def test_a_rejected_data_file_leaves_data_dvc_as_committed(tmp_path):
    """`dvc repro` saves an edited data/raw into data.dvc before any stage runs; when prepare then rejects the
    edit (a label outside the map), data.dvc is put back as committed: git sees no change, the one error line
    says so, and once the file is fixed `dvc repro` proceeds as usual."""
    root = as_this_repo(make_project(tmp_path / "study", one_run_params()))
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["data"]["testsets"]["my_set"] = declared_testset()["my_set"]
    params["evaluate"]["testsets"].append("my_set")
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    nli_csv(root / "data" / "raw" / "my_set.csv", 12, seed=2)
    sh(["dvc", "add", "-q", "data/raw"], root)
    sh(["git", "add", "-A"], root)
    sh(["git", "commit", "-qm", "my_set"], root)
    sh(["dvc", "repro", "prepare"], root)
    sh(["git", "add", "-A"], root)
    sh(["git", "commit", "-qm", "prepared"], root)
    committed = (root / "data.dvc").read_bytes()
    good = (root / "data" / "raw" / "my_set.csv").read_text()
    lines = good.splitlines()
    lines[3] = lines[3].rsplit(",", 2)[0] + ",unsure," + lines[3].rsplit(",", 1)[1]  # line 4: a label outside the map
    (root / "data" / "raw" / "my_set.csv").write_text("\n".join(lines) + "\n")
    res = sh(["dvc", "repro", "prepare"], root, check=False)
    assert res.returncode != 0
    errors = [x for x in res.stdout.splitlines() + res.stderr.splitlines() if x.startswith("error: ")]
    assert (
        len(errors) == 1
        and errors[0].startswith("error: data/raw/my_set.csv:4: testset my_set: label 'unsure'")
        and errors[0].endswith(
            "; data.dvc put back as committed (DVC had recorded the rejected data; fix the file, "
            "then `dvc repro` again)"
        )
    ), res.stdout + res.stderr
    assert (root / "data.dvc").read_bytes() == committed
    assert sh(["git", "status", "--porcelain"], root).stdout.strip() == ""
    (root / "data" / "raw" / "my_set.csv").write_text(good.replace("Ana", "Ann"))  # fixed (and edited)
    sh(["dvc", "repro", "prepare"], root)
    assert (root / "data.dvc").read_bytes() != committed  # the accepted edit is recorded as DVC does


def test_presets_switch_and_back_keep_the_users_testset(tmp_path):
    """README "Presets": the block as written, in order, on a project whose params.yaml declares the user's
    testset (with comments) and a comment of the user's elsewhere: the paper slice keeps both, `dvc repro --dry
    --force` lists every stage, `study use --restore` gives back the file exactly as it was, with one backup (the
    paper slice) beside it; `study use quickstart` from the paper gives the quickstart plus the user's testset."""
    params_text = quickstart_text().replace(
        "  prepare: []",
        "  testsets:\n    my_set:                       # from the lab\n"
        "      path: data/raw/my_set.csv   # tsv | csv | jsonl\n      premise: sentence1\n      hypothesis: sentence2\n"
        "      label: gold\n      label_map: {\"yes\": entailment, \"no\": non_entailment}\n  prepare: []",
    )
    params_text = params_text.replace("rte_real]", "rte_real, my_set]")
    params_text = params_text.replace("analyze:\n", "# analysis settings agreed with the lab\nanalyze:\n")
    assert params_text.count("my_set") == 3  # declared, its file, evaluated
    root = make_project(tmp_path / "study", yaml.safe_load(params_text))
    (root / "params.yaml").write_text(params_text)
    steps = commands(readme_block("Presets: paper, cpu, synthetic", "bash"))
    assert steps[-1] == "oodcorr study use --restore"
    diff = sh(["bash", "-c", steps[0]], root).stdout
    assert "+  name: paper" in diff and (root / "params.yaml").read_text() == params_text
    sh(["bash", "-c", steps[1]], root)
    paper_text = (root / "params.yaml").read_text()
    paper = yaml.safe_load(paper_text)
    assert paper["study"]["name"] == "paper" and list(paper["runs"]) == ["olmo2-7b_mnli_64_s0", "olmo2-7b_snli_64_s0"]
    assert "my_set" in paper["data"]["testsets"] and paper["evaluate"]["testsets"][-1] == "my_set"
    assert "# from the lab" in paper_text and "# analysis settings agreed with the lab" in paper_text
    dry = sh(["bash", "-c", steps[2]], root)
    for stage in ("prepare", "train@olmo2-7b_mnli_64_s0", "evaluate@olmo2-7b_snli_64_s0", "analyze"):
        assert f"Running stage '{stage}'" in dry.stdout, dry.stdout[-2000:]
    assert "Errno" not in dry.stdout + dry.stderr
    assert steps[3].startswith("oodcorr train --run olmo2-7b_mnli_64_s0 --dry-run")  # while the paper slice is active
    dry_train = sh(["bash", "-c", steps[3]], root).stdout
    assert "QLoRA" in dry_train and "checkpoints at" in dry_train
    sh(["bash", "-c", steps[4]], root)  # back: the file as it was, the paper slice as the one backup
    assert (root / "params.yaml").read_text() == params_text
    assert sorted(p.name for p in root.glob("params.yaml*")) == ["params.yaml", "params.yaml.bak"]
    assert (root / "params.yaml.bak").read_text() == paper_text
    sh(["bash", "-c", steps[1]], root)  # paper again, then the other way back: the quickstart preset
    sh(["oodcorr", "study", "use", "quickstart"], root)
    back_text = (root / "params.yaml").read_text()
    back = yaml.safe_load(back_text)
    expected = load_preset("quickstart")
    expected["data"]["testsets"] = {"my_set": yaml.safe_load(params_text)["data"]["testsets"]["my_set"]}
    expected["evaluate"]["testsets"].append("my_set")
    assert back == expected
    assert "# from the lab" in back_text and "# analysis settings agreed with the lab" in back_text
    assert "# per testset, stratified and seeded" in back_text  # the preset's comments


def test_a_three_way_testset_declared_as_the_readme_says_shows_its_neutral_convention(tmp_path):
    """README "Add a testset": the declared testset maps a label to `neutral`, and its `neutral:` key decides what
    becomes of those rows; `oodcorr testsets` names it: dropped as the built-in 3-way sets, or merged into
    non-entailment; a map that sends the neutral label to non_entailment itself is binary."""
    from click.testing import CliRunner

    from oodcorr.cli import cli

    spec = declared_testset()["my_set"]
    assert "neutral" in spec["label_map"].values() and spec["neutral"] == "drop"
    section = " ".join(readme_section("Add a testset").split())
    assert "`3-way, neutral dropped`" in section and "`merge` counts them as non-entailment" in section

    def shown(my_set: dict) -> str:
        params = yaml.safe_load(quickstart_text())
        params["data"]["testsets"] = {"my_set": my_set}
        path = tmp_path / "params.yaml"
        path.write_text(yaml.safe_dump(params))
        res = CliRunner().invoke(cli, ["testsets", "--params", str(path)])
        assert res.exit_code == 0, res.output
        rows = {ln.split()[0]: ln for ln in res.output.splitlines()}
        assert "3-way, neutral dropped" in rows["mnli"]  # the built-in 3-way sets drop neutral
        return rows["my_set"]

    assert "3-way, neutral dropped" in shown(spec)
    assert "3-way, neutral merged" in shown({**spec, "neutral": "merge"})
    by_hand = {
        **spec,
        "label_map": {k: ("non_entailment" if v == "neutral" else v) for k, v in spec["label_map"].items()},
    }
    assert "binary" in shown(by_hand)


PAPER_NAMES = ["mnli_train", "mnli", "snli", "scitail", "rte", "hans", "anli", "wnli", "paws"]


@pytest.mark.slow
def test_paper_preset_runs_under_dvc_repro_with_tiny_stand_ins(tmp_path):
    """`oodcorr study use paper` as written (data.out, prepare list, grid), then only the hub loads swapped
    for local files, the models for tiny aliases and the grid trimmed: `dvc repro` runs to the end."""
    root = make_project(tmp_path / "paper", one_run_params())
    sh(
        [
            "oodcorr",
            "study",
            "use",
            "paper",
            "--models",
            "tiny-opt,tiny-olmo2",
            "--shots",
            "8",
            "--seeds",
            "0",
            "--train-sets",
            "mnli_train",
        ],
        root,
    )
    params = yaml.safe_load((root / "params.yaml").read_text())
    assert params["study"]["name"] == "paper" and len(params["runs"]) == 2
    for i, name in enumerate(PAPER_NAMES):  # hub -> local files with the same names
        nli_csv(
            root / "data" / "raw" / f"{name}.csv",
            40 if name == "mnli_train" else 16,
            seed=i,
            header=("sentence1", "sentence2", "gold", "heuristic"),
        )
        params["data"].setdefault("testsets", {})[name] = {
            "path": f"data/raw/{name}.csv",
            "premise": "sentence1",
            "hypothesis": "sentence2",
            "label": "gold",
            "label_map": {"yes": "entailment", "no": "non_entailment"},
        }
    params["train"].update(
        {"epochs": 1, "max_steps": 4, "checkpoints": {"every": 1}, "max_length": 48, "batch_size": 4}
    )
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


def test_hub_offline_prepare_leaves_the_prepared_data_in_place(tmp_path):
    """A study that names a hub testset, offline: `dvc repro` stops with one line naming the testset, and DVC has
    not deleted data/prepared first (the output is persistent; prepare replaces it only when all is well)."""
    root = make_project(tmp_path / "study", one_run_params())
    sh(["dvc", "repro", "prepare"], root)
    before = {p.name: p.read_bytes() for p in (root / "data" / "prepared").iterdir()}
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["evaluate"]["testsets"].append("hans")  # built-in, from the hub
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    res = sh(["dvc", "repro", "prepare"], root, check=False)
    assert res.returncode != 0
    errors = [ln for ln in (res.stdout + res.stderr).splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "testset hans" in errors[0] and "offline" in errors[0], res.stderr[-2000:]
    assert {p.name: p.read_bytes() for p in (root / "data" / "prepared").iterdir()} == before
