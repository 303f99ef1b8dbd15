"""QLoRA (nf4) on CPU with bitsandbytes: an eval-mode forward must not repack the 4-bit weights
(bitsandbytes >= 0.48 does so when the CPU has AVX512-BF16, after which the packed gemv path carries no
gradient to earlier layers), so every adapter still trains afterwards."""

import pytest
import torch

bnb = pytest.importorskip("bitsandbytes")


def _qlora(name):
    from oodcorr.modeling.model_loading import add_lora, load_base_model

    model, tok, info = load_base_model(name, quantization="nf4", dtype="float32", device="cpu")
    assert info["quantization"] == "nf4"
    torch.manual_seed(0)
    return add_lora(model, {"r": 4, "dropout": 0.0}, quantized=True), tok


def _linear4bit(model):
    return [m for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]


@pytest.mark.parametrize("name", ["tiny-opt", "tiny-olmo2"])
def test_adapters_train_after_eval_forward(name):
    model, tok = _qlora(name)
    layers = _linear4bit(model)
    assert layers and all(m.support_avx512bf16_for_cpu is False for m in layers)
    ids = torch.tensor([tok.encode("Ann walked to the park. Question: Ann was at the zoo. Yes or No?")] * 2)
    model.eval()
    with torch.no_grad():
        model(input_ids=ids)
    assert not any(getattr(m.weight.quant_state, "packing_format_for_cpu", False) for m in layers)
    model.train()
    lora = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    assert lora and all("lora_" in n for n in lora)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(3):
        opt.zero_grad()
        logits = model(input_ids=ids).logits[:, -1].float()
        torch.nn.functional.cross_entropy(logits, torch.tensor([0, 1])).backward()
        opt.step()
    after = dict(model.named_parameters())
    unchanged = [n for n, p in lora.items() if torch.equal(p, after[n].detach())]
    assert not unchanged  # includes layer 0's adapters: gradients flow through the 4-bit layers above


def test_repack_attribute_matters():
    """The attribute disable_cpu_repack sets is what bitsandbytes 0.50 checks before repacking."""
    from bitsandbytes.functional import has_avx512bf16

    if not has_avx512bf16():
        pytest.skip("CPU without AVX512-BF16: bitsandbytes never repacks here")
    model, tok = _qlora("tiny-olmo2")
    layers = _linear4bit(model)
    for m in layers:
        m.support_avx512bf16_for_cpu = True  # what bitsandbytes sets by default on this CPU
    model.eval()
    try:  # tiny layers (in_features 32 < blocksize 64) make the repack itself fail
        with torch.no_grad():
            model(input_ids=torch.tensor([tok.encode("a b c")]))
    except RuntimeError:
        return
    assert any(getattr(m.weight.quant_state, "packing_format_for_cpu", False) for m in layers)
