"""bench/gpu/gpu_check.py on the CPU (`--cpu-smoke`: the same code with tiny shapes): every field of the JSON is
there, the OOM back-off runs, nothing absent on a bare GPU machine (mlflow, dvc, pandas, ...) is loaded,
and the random-weight builder gives the architecture it claims (tied heads, same weights nf4 / 16-bit)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from study_helpers import load_script

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "gpu" / "gpu_check.py"
bnb = pytest.importorskip("bitsandbytes")

TRAIN_FIELDS = {
    "batch_size",
    "seq_len",
    "lora_r",
    "optim",
    "gradient_checkpointing",
    "lora_targets",
    "params_total",
    "params_trainable",
    "params_trainable_estimated",
    "build_s",
    "steps",
    "seconds_per_step",
    "seconds_first_step",
    "losses",
    "dry_run_estimate_gib",
    "dry_run_activations_gib",
    "peak_allocated_gib",
    "peak_reserved_gib",
    "cuda_context_gib",
    "peak_measured_gib",
    "dry_run_rel_error",
}
EVAL_MODE_FIELDS = {
    "examples",
    "seconds",
    "examples_per_s",
    "tflops_conventional",
    "matmul_fraction_conventional",
    "matmul_fraction_executed",
}
OOM_FIELDS = {
    "how",
    "forced_budget",
    "oom_retries",
    "final_budget",
    "batches",
    "error",
    "seconds",
    "prediction_agreement",
    "prediction_agreement_clear_margin",
    "max_abs_logp_diff",
    "works",
}


def _gpu_check():
    return load_script(SCRIPT)


@pytest.mark.slow
def test_cpu_smoke_writes_every_field(tmp_path):
    out = tmp_path / "gpu_check.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--cpu-smoke", "--shapes", "olmo2-7b,opt-6.7b", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(out.read_text())
    assert res["cpu_smoke"] and res["device"] == "cpu" and res["loaded_packages_absent_on_bare_gpu"] == []
    assert set(res["shapes"]) == {"olmo2-7b", "opt-6.7b"}
    for name, shape in res["shapes"].items():
        train, ev = shape["train"], shape["eval"]
        assert TRAIN_FIELDS <= set(train), TRAIN_FIELDS - set(train)
        assert train["params_trainable"] == train["params_trainable_estimated"] > 0
        assert train["dry_run_estimate_gib"] > 0 and len(train["losses"]) == train["steps"]
        for mode in ("merged_bf16", "unmerged_nf4", "baseline_hf_padded"):
            assert EVAL_MODE_FIELDS <= set(ev[mode]), (name, mode)
            assert ev[mode]["examples_per_s"] > 0
        assert ev["speedup_vs_baseline"] > 0
        assert OOM_FIELDS <= set(ev["oom_backoff"])
        assert ev["oom_backoff"]["works"] and ev["oom_backoff"]["oom_retries"] > 0, ev["oom_backoff"]
        assert ev["oom_backoff"]["prediction_agreement"] == 1.0  # float32 on CPU: batch shapes change nothing
        assert set(res["targets_met"][name]) == {
            "qlora_fits_24gb",
            "dry_run_within_15pct",
            "eval_3x_baseline",
            "eval_40pct_matmul",
            "oom_backoff_works",
        }
    assert "OOM back-off" in proc.stdout and "olmo2-7b" in proc.stdout


@pytest.mark.parametrize("shape", ["opt-6.7b", "olmo2-7b"])
def test_random_model_is_the_claimed_architecture(shape):
    import torch

    from oodcorr.modeling.model_loading import meta_model

    gc = _gpu_check()
    config = gc.shape_config(shape, smoke=True)
    plain = gc.random_model(config, "cpu", torch.float32, nf4=False, seed=3)
    quant = gc.random_model(config, "cpu", torch.float32, nf4=True, seed=3)
    n_meta = sum(p.numel() for p in meta_model(config).parameters())
    assert sum(p.numel() for p in plain.parameters()) == n_meta
    if config.tie_word_embeddings:
        assert plain.get_output_embeddings().weight is plain.get_input_embeddings().weight
    lin4 = {n: m for n, m in quant.named_modules() if isinstance(m, bnb.nn.Linear4bit)}
    assert lin4 and all("lm_head" not in n for n in lin4)
    plain_mods = dict(plain.named_modules())
    for name, m in lin4.items():  # the same weights before quantisation: nf4 error only
        w = bnb.functional.dequantize_4bit(m.weight.data, m.weight.quant_state).float()
        ref = plain_mods[name].weight.float()
        assert torch.nn.functional.cosine_similarity(w.flatten(), ref.flatten(), dim=0) > 0.98
    ids = torch.randint(3, config.vocab_size, (2, 9))
    with torch.no_grad():
        assert torch.isfinite(plain(input_ids=ids).logits).all() and torch.isfinite(quant(input_ids=ids).logits).all()
