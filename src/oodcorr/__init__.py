"""oodcorr: do generalisation results generalise?"""
__version__ = "0.1.0"

import logging as _logging

# bitsandbytes logs a warning on every import on CPUs with avx512-bf16 when the optional `kernels` package
# (a hub download) is absent; its pure-torch fallback is what oodcorr uses, so the line is only noise.
_logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(_logging.ERROR)
