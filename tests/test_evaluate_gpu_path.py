"""The CUDA evaluation path, exercised on CPU: LoRA merged into the base per checkpoint with the original
weights restored exactly between checkpoints, the token budget sized from free memory, and the
out-of-memory back-off driven through scoring's SIMULATED_OOM_TOKENS seam."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from test_evaluate import _rows, make_checkpoint, reference_scores


def _seqs(tok, rows):
    from oodcorr.modeling.prompts import Prompter

    return Prompter(tok, max_length=48).encode([r["premise"] for r in rows], [r["hypothesis"] for r in rows])


@pytest.mark.slow
def test_merged_adapters_score_like_unmerged_and_restore_weights(tmp_path):
    import numpy as np
    import torch

    from oodcorr.evaluate.scorer import Adapters
    from oodcorr.evaluate.scoring import score
    from oodcorr.modeling.model_loading import load_base_model
    from oodcorr.modeling.prompts import Prompter

    cks = {s: make_checkpoint(tmp_path, "r", s) for s in (3, 7)}
    rows = _rows("x", 9, seed=1)
    base, tok, _ = load_base_model("tiny-olmo2", quantization="none", dtype="float32")
    before = {n: p.detach().clone() for n, p in base.named_parameters()}
    adapters = Adapters(base, merge=True)
    vids = Prompter(tok).verbalizer_ids
    refs = {s: reference_scores("tiny-olmo2", ck, rows) for s, ck in cks.items()}
    for step in (3, 7, 3):  # back to the first: merge, restore, merge again gives the same scores
        model = adapters.activate(cks[step], f"step{step}")
        assert all(m.merged for m in model.modules() if hasattr(m, "merged_adapters"))
        logp, pred = score(model, _seqs(tok, rows), vids, tok.pad_token_id)
        ref_logp, ref_pred = refs[step]
        np.testing.assert_allclose(logp, ref_logp, atol=1e-4)
        assert (pred == ref_pred).all()
    model.unmerge_adapter()
    from oodcorr.evaluate.scorer import _restore_weights

    _restore_weights(model, adapters._pristine)
    after = {
        n.replace("base_model.model.", "").replace(".base_layer", ""): p
        for n, p in model.named_parameters()
        if "lora_" not in n
    }
    assert set(after) == set(before)
    assert all(torch.equal(before[n], after[n]) for n in before)  # bit-exact, no drift


def test_gpu_token_budget_from_free_memory():
    from oodcorr.evaluate.scoring import GPU_TOKEN_BUDGET, activation_bytes_per_token, gpu_token_budget

    olmo2_7b = SimpleNamespace(hidden_size=4096, intermediate_size=11008)
    per_token = activation_bytes_per_token(olmo2_7b)
    assert per_token == 2 * 2 * (6 * 4096 + 3 * 11008)
    assert gpu_token_budget(olmo2_7b, 8 * 1024**3) == int(0.7 * 8 * 1024**3 // per_token)
    assert gpu_token_budget(olmo2_7b, 10**15) == GPU_TOKEN_BUDGET
    assert gpu_token_budget(olmo2_7b, 0) == 256


def test_simulated_oom_backs_off_and_scores_the_same(monkeypatch):
    import numpy as np

    import oodcorr.evaluate.scoring as scoring
    from oodcorr.modeling.model_loading import load_base_model
    from oodcorr.modeling.prompts import Prompter

    model, tok, _ = load_base_model("tiny-opt", quantization="none", dtype="float32")
    seqs = _seqs(tok, _rows("y", 20, seed=4))
    vids = Prompter(tok).verbalizer_ids
    ref = scoring.score(model, seqs, vids, tok.pad_token_id)
    monkeypatch.setattr(scoring, "SIMULATED_OOM_TOKENS", 100)
    stats = {}
    got = scoring.score(model, seqs, vids, tok.pad_token_id, token_budget=1 << 20, stats=stats)
    assert stats["oom_retries"] > 0 and stats["final_budget"] < stats["initial_budget"] == 1 << 20
    assert stats["max_batch_tokens"] <= 100
    np.testing.assert_allclose(got[0], ref[0], atol=1e-5)
    assert (got[1] == ref[1]).all()


def test_eval_quantization_on_cpu():
    from oodcorr.modeling.model_loading import eval_quantization

    assert eval_quantization("auto", "tiny-opt") == "none"
    assert eval_quantization("nf4", "tiny-opt") == "nf4"


def test_gradient_checkpointing_and_optimizer_choices():
    import torch

    from oodcorr.core.errors import UserError
    from oodcorr.settings.run_settings import RunSettings, resolve_gradient_checkpointing
    from oodcorr.train.loop import make_optimizer

    assert resolve_gradient_checkpointing("auto", "cuda:1") is True
    assert resolve_gradient_checkpointing("auto", "cpu") is False
    assert resolve_gradient_checkpointing(True, "cpu") is True
    p = [torch.nn.Parameter(torch.zeros(2))]
    run = RunSettings(run="x", model="tiny-opt", train_set="t", id_testset="t", shots=2, lr=1e-3)
    assert isinstance(make_optimizer(p, run, "cpu"), torch.optim.AdamW)
    with pytest.raises(UserError, match="paged_adamw_8bit needs a CUDA GPU"):
        make_optimizer(p, replace(run, optim="paged_adamw_8bit"), "cpu")
