"""Loading a causal LM for training or scoring: dtype and quantisation policy, tokenizer, attention
implementation, the base model (optionally NF4), its meta-device copy for sizing, and (Q)LoRA wrapping.
Which folder a model name means (aliases, GGUF conversion, availability checks) is oodcorr.modeling.models.

Every model goes through `load_base_model`, so the quickstart, the tests and the paper's setup share
one code path; only the name changes.
"""

from __future__ import annotations

from oodcorr.core.errors import UserError
from oodcorr.modeling.models import check_available, local_revision, model_config, model_path
from oodcorr.modeling.precision import resolve_dtype
from oodcorr.settings.run_settings import LoraSettings

LORA_TARGETS = {
    "opt": ["q_proj", "k_proj", "v_proj", "out_proj"],
    "llama": ["q_proj", "k_proj", "v_proj", "o_proj"],
    "olmo2": ["q_proj", "k_proj", "v_proj", "o_proj"],
    "olmo": ["q_proj", "k_proj", "v_proj", "o_proj"],
    "mistral": ["q_proj", "k_proj", "v_proj", "o_proj"],
    "qwen2": ["q_proj", "k_proj", "v_proj", "o_proj"],
    "gemma3_text": ["q_proj", "k_proj", "v_proj", "o_proj"],
    "gemma3": ["q_proj", "k_proj", "v_proj", "o_proj"],
    "gpt2": ["c_attn", "c_proj"],
    "gpt_neox": ["query_key_value", "dense"],
}


def resolve_quantization(quantization: str = "auto") -> str:
    import torch

    if quantization not in ("auto", "nf4", "none"):
        raise UserError(f"params: quantization: expected auto, nf4 or none, got {quantization!r}")
    if quantization == "auto":
        return "nf4" if torch.cuda.is_available() else "none"
    return quantization


def disable_cpu_repack(model) -> int:
    """bitsandbytes on CPU repacks 4-bit weights after an eval-mode forward, after which LoRA training
    silently stops or crashes; switching the avx512-bf16 path off on every Linear4bit avoids it."""
    try:
        import bitsandbytes as bnb
    except ImportError:
        return 0
    n = 0
    for module in model.modules():
        if isinstance(module, bnb.nn.Linear4bit):
            module.support_avx512bf16_for_cpu = False
            n += 1
    return n


def load_tokenizer(name: str, revision: str | None = None):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_path(name), revision=revision)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "right"  # scores are read at the last non-pad position (attention_mask.sum - 1)
    return tok


def attention_implementation(device: str, torch_dtype) -> str | None:
    """On CUDA: flash_attention_2 when the flash-attn package is installed and the dtype is 16-bit, else
    PyTorch's fused SDPA kernels. None (transformers' own default) on CPU, so CPU results do not change."""
    import importlib.util

    import torch

    if not str(device).startswith("cuda"):
        return None
    if torch_dtype in (torch.bfloat16, torch.float16) and importlib.util.find_spec("flash_attn") is not None:
        return "flash_attention_2"
    return "sdpa"


def nf4_config(compute_dtype):
    """The QLoRA quantization (Dettmers et al., 2023): NF4 weights, double-quantised scales."""
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=compute_dtype,
    )


def load_base_model(
    name: str, revision: str | None = None, quantization: str = "auto", dtype: str = "auto", device: str | None = None
):
    """-> (model, tokenizer, info). `quantization` auto = nf4 (QLoRA) on CUDA, none on CPU. On CUDA the
    attention runs in flash-attention 2 when installed, else SDPA (see attention_implementation)."""
    import torch
    from transformers import AutoModelForCausalLM

    path = check_available(name, revision)
    quant = resolve_quantization(quantization)
    torch_dtype = resolve_dtype(dtype)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    kwargs = {"revision": revision, "dtype": torch_dtype}
    if quant == "nf4":
        compute = torch.bfloat16 if device != "cpu" or torch_dtype == torch.bfloat16 else torch.float32
        kwargs["quantization_config"] = nf4_config(compute)
        kwargs["device_map"] = {"": device if device != "cuda" else torch.cuda.current_device()}
    attn = attention_implementation(device, torch_dtype)
    try:
        model = AutoModelForCausalLM.from_pretrained(path, **kwargs, **({"attn_implementation": attn} if attn else {}))
    except (ImportError, ValueError):
        if attn != "flash_attention_2":  # flash-attn installed but unusable here (GPU too old, model unsupported)
            raise
        attn = "sdpa"
        model = AutoModelForCausalLM.from_pretrained(path, **kwargs, attn_implementation=attn)
    if quant == "nf4":
        disable_cpu_repack(model)
    else:
        model.to(device)
    tok = load_tokenizer(name, revision)
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tok.pad_token_id
    info = {
        "model": name,
        "path": path,
        "revision": revision or local_revision(path),
        "quantization": quant,
        "dtype": str(torch_dtype).replace("torch.", ""),
        "device": device,
        "model_type": model.config.model_type,
        "attn_implementation": getattr(model.config, "_attn_implementation", None),
    }
    return model, tok, info


def meta_model(model_path, revision: str | None = None):
    """The architecture on the meta device (no weights read, no memory used); `model_path` may be a config."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig

    config = (
        model_path
        if isinstance(model_path, PretrainedConfig)
        else AutoConfig.from_pretrained(model_path, revision=revision)
    )
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return model


# Evaluation keeps a 16-bit copy of the base on the GPU (LoRA merged per checkpoint) when its weights take
# at most this share of the card; the rest is for activations (the token budget is sized from what is free).
BF16_FIT_FRACTION = 0.8


def eval_quantization(quantization: str, name: str, revision: str | None = None, device_index: int = 0) -> str:
    """The quantization `evaluate` loads the base with: an explicit setting as given; `auto` on CUDA is none
    (16-bit weights, adapters merged) when they fit in BF16_FIT_FRACTION of the card's total memory, else
    nf4. Decided from the card's total (not free) memory, so every process and rerun gets the same cache key."""
    import torch

    quant = resolve_quantization(quantization)
    if quantization != "auto" or not torch.cuda.is_available():
        return quant
    n_params = sum(p.numel() for p in meta_model(model_config(name, revision)).parameters())
    total = torch.cuda.get_device_properties(device_index).total_memory
    return "none" if 2 * n_params <= BF16_FIT_FRACTION * total else "nf4"


def lora_targets(model, target_modules="auto") -> list[str]:
    """Per-architecture defaults; user-given names are checked against the model's module names."""
    model_type = model.config.model_type
    names = {n.rsplit(".", 1)[-1] for n, _ in model.named_modules()}
    if target_modules in ("auto", None):
        if model_type not in LORA_TARGETS:
            from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as M

            if model_type not in M:
                raise UserError(f"params: lora.target_modules: no default for model type {model_type!r}; list them")
            return list(M[model_type])
        return LORA_TARGETS[model_type]
    targets = [target_modules] if isinstance(target_modules, str) else list(target_modules)
    unknown = [t for t in targets if t not in names]
    if unknown:
        linear = sorted(
            {n.rsplit(".", 1)[-1] for n, m in model.named_modules() if m.__class__.__name__.startswith("Linear")}
        )
        raise UserError(
            f"params: lora.target_modules: {unknown} not in model {model_type!r} (modules: {', '.join(linear)})"
        )
    return targets


def add_lora(
    model, lora: LoraSettings | dict | None = None, quantized: bool = False, gradient_checkpointing: bool = False
):
    """Wrap `model` in a peft LoRA model (QLoRA when `quantized`); `lora`: a run's LoRA settings, or some of
    them as a mapping (the rest: LoraSettings' defaults)."""
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    lora = LoraSettings.of(lora)
    if quantized:  # non-reentrant checkpointing: torch's recommended mode, gradients reach the LoRA inputs
        model = prepare_model_for_kbit_training(
            model,
            use_gradient_checkpointing=gradient_checkpointing,
            gradient_checkpointing_kwargs={"use_reentrant": False},
        )
        disable_cpu_repack(model)
    elif gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    config = LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora_targets(model, lora.target_modules),
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config)
