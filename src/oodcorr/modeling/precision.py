"""Which floating-point format each stage computes in, decided from what the hardware runs natively.

`dtype: auto` means:
  - CUDA with bf16 support: bfloat16 for training (the base weights; LoRA weights stay float32) and scoring.
  - A CPU with native bf16 matrix instructions (AMX, AVX512-BF16, Arm BF16): bfloat16 for scoring
    (resolve_scoring_dtype; 2.2-3.6x faster than float32 there, issue 61), float32 for training (bf16 training's
    ID gain on these recipes is not measured yet). On a real study's checkpoints bf16 scoring flipped 1 % of the
    predictions and moved per-run partial r by up to 0.29 (docs/cpu-speed.md): a study that must check equal on
    any CPU names its dtype (`evaluate.dtype: float32`, as the quickstart and every saved study do).
  - Any other CPU: float32 for training and scoring. There bf16 is emulated and many times slower, so an
    explicit `dtype: bfloat16` runs but prints one warning saying so.

Every score is cached under its dtype, so float32 and bfloat16 results never mix.
"""

from __future__ import annotations

import functools
import platform
import sys

DTYPES = ("auto", "float32", "bfloat16", "float16")
# /proc/cpuinfo flags of native bf16 matrix instructions -> the name used in messages.
X86_BF16_FLAGS = {"amx_bf16": "AMX-BF16", "avx512_bf16": "AVX512-BF16"}
_warned: set[str] = set()


def _cpuinfo_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):  # x86 | arm64
                    return set(value.split())
    except OSError:
        pass
    return set()


@functools.cache
def native_bf16_cpu() -> str | None:
    """The CPU's native bf16 matrix instructions ("AMX-BF16", "AVX512-BF16", "Arm BF16"), or None when bf16
    would be emulated. torch's own cpuinfo checks first (they also see whether the OS enabled AMX), else the
    kernel's CPU flags."""
    import torch

    probes = (("AMX-BF16", "_is_amx_tile_supported"), ("AVX512-BF16", "_is_avx512_bf16_supported"))
    cpu = getattr(torch, "cpu", None)
    if all(hasattr(cpu, fn) for _, fn in probes):
        for name, fn in probes:
            if getattr(cpu, fn)():
                return name
        if platform.machine().lower() not in ("aarch64", "arm64"):
            return None
    flags = _cpuinfo_flags()
    for flag, name in X86_BF16_FLAGS.items():
        if flag in flags:
            return name
    if platform.machine().lower() in ("aarch64", "arm64") and "bf16" in flags:
        return "Arm BF16"
    return None


def _cuda_bf16() -> bool:
    import torch

    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def resolve_dtype(dtype: str = "auto"):
    """The torch dtype for `dtype` (auto | float32 | bfloat16 | float16): auto is bf16 on a CUDA GPU that
    supports it, else float32. bfloat16 on a CPU without native bf16: one warning."""
    import torch

    from oodcorr.core.errors import UserError

    if dtype not in DTYPES:
        raise UserError(f"params: dtype: expected auto, float32, bfloat16 or float16, got {dtype!r}")
    if dtype == "auto":
        if _cuda_bf16():
            return torch.bfloat16
        return torch.float32
    if dtype == "bfloat16" and not torch.cuda.is_available():
        warn_emulated_bf16()
    return getattr(torch, dtype)


def resolve_scoring_dtype(dtype: str = "auto"):
    """The torch dtype the evaluate stage scores in: as resolve_dtype, except that `auto` on a CPU with native bf16
    (and no CUDA) is bfloat16."""
    import torch

    if dtype == "auto" and not torch.cuda.is_available() and native_bf16_cpu():
        return torch.bfloat16
    return resolve_dtype(dtype)


def emulated_bf16_slowdown(size: int = 256, reps: int = 3) -> float:
    """How many times slower a bf16 matrix product runs than a float32 one on this CPU, right now (~0.1 s)."""
    import time

    import torch

    def seconds(dt):
        a, b = torch.randn(size, size, dtype=dt), torch.randn(size, size, dtype=dt)
        a @ b
        t = time.perf_counter()
        for _ in range(reps):
            a @ b
        return time.perf_counter() - t

    return seconds(torch.bfloat16) / max(seconds(torch.float32), 1e-9)


def warn_emulated_bf16() -> None:
    """One line per process when bf16 will be emulated on this CPU, naming the measured slowdown."""
    if "bf16" in _warned or native_bf16_cpu():
        return
    _warned.add("bf16")
    print(
        f"warning: dtype bfloat16 on a CPU without native bf16 (no AVX512-BF16 or AMX): bf16 is emulated here, "
        f"matrix products run {emulated_bf16_slowdown():.0f}x slower than in float32; use dtype: auto or float32",
        file=sys.stderr,
    )
