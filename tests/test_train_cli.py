"""`oodcorr train` from the command line: bad input -> one `error:` line, exit 2, nothing written;
`--dry-run` prints sizes and the memory estimate and writes nothing; the memory rule itself."""

from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from test_train_helpers import make_project


@pytest.fixture
def project(tmp_path, mlflow_uri, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _invoke(params, *args):
    from oodcorr.cli import cli

    return CliRunner().invoke(cli, ["train", "--params", str(params), *args])


def _files(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize(
    "run, override, message",
    [
        ("nope", {}, "unknown run 'nope'"),
        ("x", {"shots": 100}, "shots=100 but the training pool has only 64"),
        ("x", {"verbalizer": {"entailment": " Antidisestablishmentarianism"}}, "verbalizer.entailment"),
        ("x", {"pattern": "{premise} Yes or No?"}, "no {hypothesis} placeholder"),
        ("x", {"lora": {"target_modules": ["qq_proj"]}}, "lora.target_modules"),
        ("x", {"lr": "fast"}, "runs.x.lr: expected"),
        ("x", {"loss": "hinge"}, "runs.x.loss: expected one of"),
        ("x", {"model": "no-such-org/no-such-model"}, "not in the Hugging Face cache"),
        ("x", {"model": "gpt-17"}, "unknown model 'gpt-17'"),
        ("x", {"train_set": "missing_set"}, "unknown testset 'missing_set'"),
        ("x", {"train_set": "synth_id"}, "synth_id was not prepared"),
    ],
)
def test_bad_input(project, run, override, message):
    params = make_project(project, {"x": override})
    before = _files(project)
    result = _invoke(params, "--run", run)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.stderr
    assert _files(project) == before


def test_dry_run_writes_nothing(project):
    params = make_project(project, {"x": {"max_steps": None, "epochs": 2, "batch_size": 4}})
    before = _files(project)
    result = _invoke(params, "--run", "x", "--dry-run")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "optimizer steps: 16" in out and "checkpoints at [0, 4, 8, 12, 16]" in out
    assert "trainable" in out and "fits in 24 GB: yes" in out and "QLoRA" in out and "full FT" in out
    assert _files(project) == before


def test_dry_run_counts_match_real_model(project):
    from oodcorr.settings.config import load_params
    from oodcorr.settings.run_settings import RunSettings
    from oodcorr.train.model import prepare_model
    from oodcorr.train.sizing import dry_run_info

    params = load_params(make_project(project, {"x": {}}))
    run = RunSettings.from_params(params, "x")
    info = dry_run_info(run)
    model = prepare_model(run)[0]
    assert info["params_trainable"] == sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert info["params_total"] == sum(
        p.numel() for n, p in model.base_model.model.named_parameters() if "lora_" not in n
    )


def test_estimate_memory_olmo2_13b():
    from oodcorr.train.sizing import estimate_memory

    cfg = SimpleNamespace(
        hidden_size=5120, num_hidden_layers=40, vocab_size=100352, intermediate_size=13824, tie_word_embeddings=False
    )
    mem = estimate_memory(cfg, batch_size=8, seq_len=128, lora_r=8)
    assert 12e9 < mem["n_params"] < 15e9
    assert mem["fits"]["qlora"] and not mem["fits"]["lora"] and not mem["fits"]["full"]
    assert mem["qlora"] < mem["lora"] < mem["full"]
    ckpt = estimate_memory(cfg, batch_size=8, seq_len=128, lora_r=8, gradient_checkpointing=True)
    assert ckpt["qlora"] < mem["qlora"]
