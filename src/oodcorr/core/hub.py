"""Whether the Hugging Face hub may be contacted: one answer for models and datasets."""

from __future__ import annotations

import os

TRUE = ("1", "true", "yes", "on")  # what huggingface_hub / transformers / datasets read as set
OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")  # models: huggingface_hub and transformers
DATASETS_OFFLINE_VARS = (*OFFLINE_VARS, "HF_DATASETS_OFFLINE")  # datasets also honours its own variable


def offline(datasets: bool = False) -> bool:
    """True when an offline variable is set: HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE (models), plus
    HF_DATASETS_OFFLINE for `datasets` downloads."""
    names = DATASETS_OFFLINE_VARS if datasets else OFFLINE_VARS
    return any(os.environ.get(v, "").strip().lower() in TRUE for v in names)
