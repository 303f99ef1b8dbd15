"""Shared test set-up: offline hub, no DVC analytics, a private model cache per session is NOT used
(the converted SmolLM2 / tiny models are cached once in ~/.cache/oodcorr like on a user's machine)."""

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.pop("MLFLOW_TRACKING_URI", None)

REPO = Path(__file__).resolve().parents[1]
SHARED_NLI = REPO.parent / "shared" / "data" / "nli"


@pytest.fixture
def shared_nli() -> Path:
    """The real NLI files (read-only); tests that need them skip cleanly when absent."""
    if not SHARED_NLI.is_dir():
        pytest.skip(f"real NLI data not found at {SHARED_NLI}")
    return SHARED_NLI


@pytest.fixture
def mlflow_uri(tmp_path, monkeypatch) -> str:
    """A private sqlite MLflow store for one test."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri
