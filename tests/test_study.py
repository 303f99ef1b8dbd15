"""The study layer: presets, params validation before any stage runs, `--help` everywhere."""

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from oodcorr.cli import COMMANDS, cli
from oodcorr.study import load_preset
from study_helpers import quickstart_text

REPO = Path(__file__).resolve().parents[1]


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_help_on_every_subcommand():
    assert run("--help").exit_code == 0
    groups = {"data": ["prepare"], "study": ["use", "check", "runs"]}
    for name in COMMANDS:
        res = run(name, "--help")
        assert res.exit_code == 0, (name, res.output)
        assert "Usage:" in res.output
        for sub in groups.get(name, []):
            res = run(name, sub, "--help")
            assert res.exit_code == 0 and "Usage:" in res.output, (name, sub, res.output)


def test_params_yaml_ships_as_the_quickstart_preset():
    """params.yaml is the quickstart preset in the commit that last changed the preset (read from git): the
    user's own edits to params.yaml, committed or not, never fail this."""
    import subprocess

    from oodcorr.study import PRESETS_DIR

    def git(*args):
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)

    preset = (PRESETS_DIR / "quickstart.yaml").resolve()
    if not preset.is_relative_to(REPO):
        pytest.skip(f"oodcorr is imported from {PRESETS_DIR.parent}, not from this checkout")
    preset = preset.relative_to(REPO).as_posix()
    commit = git("log", "-1", "--format=%H", "--", preset).stdout.strip()
    if not commit:
        pytest.skip("not a git checkout with history (the check needs the commit that changed the preset)")
    shipped, written = (git("show", f"{commit}:{path}") for path in ("params.yaml", preset))
    assert shipped.returncode == 0 and written.returncode == 0, shipped.stderr + written.stderr
    assert yaml.safe_load(shipped.stdout) == yaml.safe_load(written.stdout)


def test_paper_preset_expands_grid_with_readable_keys():
    tree = load_preset("paper")
    runs = tree["runs"]
    assert len(runs) == 5 * 2 * 4 * 3
    assert runs["olmo2-13b_mnli_64_s0"] == {
        "model": "olmo2-13b",
        "train_set": "mnli_train",
        "id_testset": "mnli",
        "shots": 64,
        "data_seed": 0,
        "seed": 0,
    }
    assert tree["evaluate"]["testsets"] == ["mnli", "snli", "scitail", "rte", "hans", "anli", "wnli", "paws"]
    small = load_preset("paper", models=["opt-2.7b"], shots=[16], seeds=[1])
    assert list(small["runs"]) == ["opt-2.7b_mnli_16_s1", "opt-2.7b_snli_16_s1"]


def test_real_presets_carry_the_measured_recipe_per_model_family():
    from oodcorr.settings.run_settings import RunSettings

    for name in ("real", "cpu"):
        tree = load_preset(name)
        assert sorted(tree["runs"]) == [
            "gemma3-270m_mnli_real_1024_s0",
            "gemma3-270m_mnli_real_1024_s1",
            "smollm2-135m_mnli_real_1024_s0",
            "smollm2-135m_mnli_real_1024_s1",
        ]
        cfg = {k: RunSettings.from_params(tree, k) for k in tree["runs"]}
        # docs/recipe-sweep.md configs F (SmolLM2) and GF (Gemma)
        assert (cfg["smollm2-135m_mnli_real_1024_s0"].lr, cfg["smollm2-135m_mnli_real_1024_s0"].warmup_ratio) == (
            2e-3,
            0.1,
        )
        assert (cfg["gemma3-270m_mnli_real_1024_s1"].lr, cfg["gemma3-270m_mnli_real_1024_s1"].warmup_ratio) == (
            1e-3,
            0.2,
        )
        for c in cfg.values():
            assert (c.batch_size, c.max_steps, c.loss, c.shots) == (16, 64, "verbalizer", 1024)


def test_misspelled_model_under_train_by_model_is_one_line_naming_the_key(tmp_path, monkeypatch):
    import oodcorr.study as study

    text = (study.PRESETS_DIR / "real.yaml").read_text().replace("    gemma3-270m: {lr:", "    gemma3-270: {lr:")
    (tmp_path / "typo.yaml").write_text(text)
    monkeypatch.setattr(study, "PRESETS_DIR", tmp_path)
    res = run("study", "use", "typo", "--params", tmp_path / "params.yaml")
    assert res.exit_code != 0
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1, res.output
    assert "grid.train_by_model.gemma3-270 " in lines[0] and "did you mean 'gemma3-270m'" in lines[0]
    assert not (tmp_path / "params.yaml").exists()
    monkeypatch.undo()
    # narrowing the models on the command line is not a typo: Gemma's settings are simply unused
    assert list(load_preset("real", models=["smollm2-135m"])["runs"]) == [
        "smollm2-135m_mnli_real_1024_s0",
        "smollm2-135m_mnli_real_1024_s1",
    ]


def test_quickstart_is_real_data_and_both_model_families():
    tree = load_preset("quickstart")
    assert sorted(r["model"] for r in tree["runs"].values()) == ["gemma3-270m", "smollm2-135m"]
    names = {r["train_set"] for r in tree["runs"].values()} | set(tree["evaluate"]["testsets"])
    assert names and all(n.endswith(("_real", "_real_train")) for n in names), names
    assert load_preset("synthetic")["evaluate"]["testsets"][0] == "synth_id"  # the teaching suite stays


def test_study_use_switches_and_keeps_backup(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text(quickstart_text())
    res = run("study", "use", "paper", "--params", params, "--models", "opt-2.7b,olmo2-7b", "--shots", "16")
    assert res.exit_code == 0, res.output
    backup = tmp_path / "params.yaml.bak"
    assert backup.read_text() == quickstart_text() and backup.name in res.output
    assert run("study", "check", "--params", params).exit_code == 0
    keys = run("study", "runs", "--params", params).output.split()
    assert keys[0] == "opt-2.7b_mnli_16_s0" and len(keys) == 2 * 2 * 3
    assert run("study", "use", "quickstart", "--params", params).exit_code == 0
    assert yaml.safe_load(params.read_text()) == load_preset("quickstart")


def test_study_use_keeps_one_backup_restore_swaps_and_diff_writes_nothing(tmp_path):
    """Every switch replaces the one backup (params.yaml.bak) with the file it replaced; --restore swaps the two,
    so a second --restore undoes the first; `--diff` only prints."""
    params = tmp_path / "params.yaml"
    edited = quickstart_text().replace("max_examples: 24", "max_examples: 48  # my edit")
    params.write_text(edited)
    diff = run("study", "use", "paper", "--params", params, "--diff")
    assert diff.exit_code == 0 and params.read_text() == edited and not list(tmp_path.glob("*.bak"))
    assert "-  max_examples: 48  # my edit" in diff.output and "+  max_examples: null" in diff.output
    assert run("study", "use", "paper", "--params", params).exit_code == 0
    mine = params.read_text().replace("bootstrap: 1000", "bootstrap: 500  # tuned")
    params.write_text(mine)
    for preset in ("quickstart", "synthetic", "quickstart"):
        assert run("study", "use", preset, "--params", params).exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml", "params.yaml.bak"]  # one backup
    now = params.read_text()
    res = run("study", "use", "--restore", "--params", params)
    assert res.exit_code == 0 and "restored from params.yaml.bak" in res.output, res.output
    synthetic = params.read_text()
    assert yaml.safe_load(synthetic)["study"]["name"] == "synthetic"
    assert run("study", "use", "--restore", "--params", params).exit_code == 0
    assert params.read_text() == now and (tmp_path / "params.yaml.bak").read_text() == synthetic
    same = run("study", "use", "quickstart", "--params", params, "--diff")
    assert "nothing would change" in same.output
    (tmp_path / "params.yaml.bak").unlink()
    res = run("study", "use", "--restore", "--params", params)
    assert res.exit_code == 2 and "no backup to restore" in res.output and params.read_text() == now


def test_study_use_keeps_the_users_comments_beside_their_keys(tmp_path):
    """A comment no preset file holds is the user's: it stays beside the same key (a full-line comment above it,
    an end-of-line one on its line while the value is unchanged), at the top of the file, and inside a testset of
    the user's; the preset's own comments are the new preset's. A comment on a value the preset changes cannot
    stay (it described the old value): the message counts it and the backup keeps it."""
    params = tmp_path / "params.yaml"
    text = quickstart_text().replace("study:\n", "# lab study, ask Ana before changing the seeds\nstudy:\n", 1)
    text = text.replace("  seed: 0\n", "  seed: 0                     # fixed with Ana\n", 1)
    text = text.replace(
        "  methods: [linear, rank, gam]", "  # the three the paper reports\n  methods: [linear, rank, gam]"
    )
    text = text.replace("  bootstrap: 200", "  bootstrap: 200             # enough for a CI")
    text = text.replace(
        "  prepare: []",
        "  testsets:\n    my_set:                     # from the lab\n"
        "      path: data/raw/my_set.csv # tsv | csv | jsonl\n      premise: s1\n      hypothesis: s2\n"
        "      label: gold\n      label_map: {\"yes\": entailment, \"no\": non_entailment}\n"
        "  prepare: []",
    )
    params.write_text(text)
    mine = [
        "# lab study, ask Ana before changing the seeds",
        "  seed: 0                     # fixed with Ana",
        "  # the three the paper reports",
        "    my_set:                     # from the lab",
        "      path: data/raw/my_set.csv # tsv | csv | jsonl",
    ]
    res = run("study", "use", "paper", "--params", params, "--models", "olmo2-7b", "--shots", "64", "--seeds", "0")
    assert res.exit_code == 0, res.output
    paper = params.read_text()
    assert all(line in paper.splitlines() for line in mine), paper
    assert "# enough for a CI" not in paper and "1 of your comments" in res.output  # paper bootstraps 1000
    assert "# The paper's setup" in paper and "# oodcorr quickstart" not in paper
    assert "# enough for a CI" in (tmp_path / "params.yaml.bak").read_text()
    res = run("study", "use", "quickstart", "--params", params)
    assert res.exit_code == 0 and "of your comments" not in res.output, res.output
    back = params.read_text()
    assert all(line in back.splitlines() for line in mine), back
    assert "# The paper's setup" not in back and back.count("# lab study") == 1
    tree = yaml.safe_load(back)
    assert tree["data"].pop("testsets") == yaml.safe_load(text)["data"]["testsets"]
    assert tree == load_preset("quickstart")


@pytest.mark.parametrize(
    "edit, expected",
    [
        (lambda p: p["train"].__setitem__("lr", "fast"), "params: train.lr: expected int or number, got str 'fast'"),
        (lambda p: p["train"].__setitem__("learning_rate", 0.1), "params: unknown key 'train.learning_rate'"),
        (
            lambda p: p["runs"]["smollm2-135m_mnli_real_64_s0"].__setitem__("model", "smolm2-135m"),
            "params: runs.smollm2-135m_mnli_real_64_s0.model: unknown model 'smolm2-135m' "
            "(did you mean 'smollm2-135m'?)",
        ),
        (
            lambda p: p["runs"]["smollm2-135m_mnli_real_64_s0"].__setitem__("train_set", "mnli_real_trian"),
            "params: runs.smollm2-135m_mnli_real_64_s0.train_set: unknown testset 'mnli_real_trian' "
            "(did you mean 'mnli_real_train'?)",
        ),
        (lambda p: p["evaluate"]["testsets"].append("hanz"), "params: evaluate.testsets[5]: unknown testset 'hanz'"),
        (
            lambda p: p["runs"]["smollm2-135m_mnli_real_64_s0"].__setitem__("shots", 3.5),
            "params: runs.smollm2-135m_mnli_real_64_s0.shots: expected int, got float 3.5",
        ),
    ],
)
def test_bad_params_one_line_before_any_stage(tmp_path, edit, expected):
    tree = load_preset("quickstart")
    edit(tree)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(tree))
    for args in (["study", "check", "--params", params], ["data", "prepare", "--params", params]):
        res = run(*args)
        assert res.exit_code == 2, res.output
        lines = res.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: " + expected), res.output
        assert "Traceback" not in res.output
    assert not (tmp_path / "data").exists()


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("train:\n  lr: [1\n")
    res = run("study", "check", "--params", params)
    assert res.exit_code == 2 and f"{params}:" in res.output and "invalid YAML" in res.output


def test_scientific_notation_reads_as_float_like_dvc(tmp_path):
    from oodcorr.settings.config import load_params

    params = tmp_path / "params.yaml"
    params.write_text("train:\n  lr: 1e-4\n  weight_decay: 1.5E-2\n")
    assert load_params(params)["train"] == {"lr": 1e-4, "weight_decay": 0.015}


def test_paper_dry_run_sizes_the_hub_models_offline(tmp_path):
    """The paper's models are sized from built-in configs before anything is downloaded."""
    params = tmp_path / "params.yaml"
    assert (
        run(
            "study",
            "use",
            "paper",
            "--params",
            params,
            "--models",
            "olmo2-13b,opt-2.7b",
            "--shots",
            "64",
            "--seeds",
            "0",
        ).exit_code
        == 0
    )
    res = run("train", "--run", "olmo2-13b_mnli_64_s0", "--params", params, "--dry-run")
    assert res.exit_code == 0, res.output
    assert "13,716,198,400 total" in res.output
    lines = {line.split()[0]: line for line in res.output.splitlines() if "fits in 24 GB" in line}
    assert lines["QLoRA"].endswith("yes") and lines["full"].endswith("no")
    res = run("train", "--run", "opt-2.7b_snli_64_s0", "--params", params, "--dry-run")
    assert res.exit_code == 0 and "out_proj" in res.output
    assert not (tmp_path / "runs").exists()


def test_params_read_yes_and_no_as_strings_like_dvc():
    """YAML 1.2 booleans (DVC's): a label_map key `yes` stays the string 'yes' even when DVC rewrites params.yaml
    without quotes (`dvc exp run -S`); true/false are still booleans."""
    from oodcorr.settings.yaml_dialect import read_yaml

    assert read_yaml("label_map: {yes: entailment, no: non_entailment}\nslices: true\nm: on\n") == {
        "label_map": {"yes": "entailment", "no": "non_entailment"},
        "slices": True,
        "m": "on",
    }


def test_put_back_never_reads_the_dvc_folder(tmp_path, monkeypatch):
    """`*.dvc` also matches the project's .dvc folder: put_back skips anything that is not a file."""
    import subprocess

    from oodcorr.data import dvc_sources

    (tmp_path / ".dvc").mkdir()
    (tmp_path / ".dvc" / "config").write_text("[core]\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "x"]):
        subprocess.run(git + cmd, cwd=tmp_path, check=True, capture_output=True)
    monkeypatch.setenv("DVC_STAGE", next(iter(dvc_sources.STAGES)))
    monkeypatch.setattr(dvc_sources, "_dvc_started", lambda: 0.0)
    assert dvc_sources.put_back(tmp_path) == []


def test_a_global_train_override_that_runs_shadow_is_named(tmp_path):
    """`dvc exp run -S train.lr=...` rewrites params.yaml's train.lr; a run whose entry sets its own lr keeps it, so
    its stages have nothing to do. `oodcorr study check` (dvc.yaml's first stage) compares with git's HEAD and names
    the runs the change does not reach and how to change theirs; an unchanged file, or a changed key no run sets,
    says nothing."""
    import subprocess

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    if not (REPO / "data" / "raw" / "real").is_dir():
        pytest.skip("needs data/raw (make setup)")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "raw").symlink_to(REPO / "data" / "raw")
    params = tmp_path / "params.yaml"
    params.write_text(quickstart_text())
    git("init", "-q")
    git("add", "params.yaml")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "baseline")
    tree = yaml.safe_load(params.read_text())
    own = [k for k, r in tree["runs"].items() if "lr" in r]
    assert own and len(own) < len(tree["runs"]), "the quickstart has a run with its own lr and one without"
    res = run("study", "check", "--params", params)
    assert res.exit_code == 0 and "warning" not in res.output, res.output
    for key, value in (("lr", 0.005), ("batch_size", 4)):
        tree = yaml.safe_load(quickstart_text())
        tree["train"][key] = value
        params.write_text(yaml.safe_dump(tree))
        res = run("study", "check", "--params", params)
        assert res.exit_code == 0, res.output
        warned = [line for line in res.output.splitlines() if line.startswith("warning: train.")]
        if key == "lr":
            assert len(warned) == 1 and warned[0].startswith("warning: train.lr = 0.005 does not reach 1 run(s)")
            assert own[0] in warned[0] and "-S 'runs.<run>.lr=...'" in warned[0]
            others = set(tree["runs"]) - set(own)
            assert not any(k in warned[0] for k in others)
        else:  # no run sets its own batch_size: the override reaches every run
            assert not warned, res.output
    tree = yaml.safe_load(quickstart_text())  # train.lr and the run's own lr both changed: nothing shadowed
    tree["train"]["lr"] = 0.005
    tree["runs"][own[0]]["lr"] = 0.0005
    params.write_text(yaml.safe_dump(tree))
    res = run("study", "check", "--params", params)
    assert res.exit_code == 0 and "warning" not in res.output, res.output
