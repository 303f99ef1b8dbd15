"""Arithmetic that does not depend on the thread count. On x86, torch's BLAS is MKL, and MKL splits a matrix
product's sums by thread count: the same run trained under one and two threads wrote other LoRA checkpoints
(tests/test_faults_dvc.py's two-thread test, measured 2026-12-07). MKL's strict conditional numerical
reproducibility mode (`MKL_CBWR=<branch>,STRICT`) computes its matrix products bit for bit alike for any number of
threads; with it, that test's 57 outputs match. MKL reads the setting once, when torch first calls it, so
`oodcorr/__init__.py` calls `pin()` before anything imports torch. A user's own MKL_CBWR wins.

The branch is AVX2 (on CPUs with AVX-512 too: the same kernels as an AVX2 CPU). On a CPU without AVX2 nothing is set
and the thread count stays in the last bits there. Speed: bench/speed/mkl_strict.py."""

from __future__ import annotations

import os

ENV = "MKL_CBWR"
STRICT_AVX2 = "AVX2,STRICT"


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> set[str]:
    try:
        with open(cpuinfo) as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def branch(flags: set[str] | None = None) -> str | None:
    """The MKL_CBWR value oodcorr uses on this CPU (None: leave MKL as it is)."""
    return STRICT_AVX2 if "avx2" in (cpu_flags() if flags is None else flags) else None


def pin() -> str | None:
    """Set MKL_CBWR for this process and its children unless the user set it; returns the value in effect."""
    if ENV not in os.environ and (value := branch()):
        os.environ[ENV] = value
    return os.environ.get(ENV)
