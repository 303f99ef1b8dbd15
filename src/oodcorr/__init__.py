"""oodcorr: do generalisation results generalise?"""

__version__ = "0.1.0"

import logging as _logging

from oodcorr.core import numerics as _numerics

# before anything imports torch: MKL's matrix products bit for bit alike under any thread count (core/numerics.py)
_numerics.pin()

# bitsandbytes logs a warning on every import on CPUs with avx512-bf16 when it cannot get its hub kernel
# (`kernels` absent, or offline); its pure-torch fallback is what oodcorr uses, so the line is only noise.
_logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(_logging.ERROR)
# With `kernels` installed (transformers >= 5 requires it), that same lookup logs, offline, that it skips the hub
# publisher check before it falls back: noise on every run's stderr, and a bad input's one line becomes two.
_logging.getLogger("kernels").setLevel(_logging.ERROR)
