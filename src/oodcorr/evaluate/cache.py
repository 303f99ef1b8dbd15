"""The evaluation cache: one parquet file per (checkpoint, testset) pair, keyed by the checkpoint's and
testset's content hashes and every setting that changes a score, so a rerun scores only what is new."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from oodcorr.core import io
from oodcorr.evaluate.settings import EvaluateSettings
from oodcorr.modeling.prompts import LABELS
from oodcorr.settings.run_settings import RunSettings


def resolve_settings(ev: EvaluateSettings, trained: RunSettings) -> dict:
    """Everything that changes a score besides the checkpoint and the testset (part of each cache key).
    `trained` is the run's settings, so evaluation scores with the training defaults."""
    from oodcorr.modeling.model_loading import eval_quantization
    from oodcorr.modeling.models import check_available, local_revision
    from oodcorr.modeling.precision import resolve_scoring_dtype

    path = check_available(trained.model, trained.revision)
    dtype = str(resolve_scoring_dtype(ev.dtype or trained.dtype)).replace("torch.", "")
    quant = eval_quantization(trained.quantization, trained.model, trained.revision)
    settings = {
        "model": trained.model,
        "revision": trained.revision or local_revision(path),
        "pattern": trained.pattern,
        "verbalizer": dict(trained.verbalizer),
        "dtype": dtype,
        "quantization": quant,
        "max_length": int(ev.max_length if ev.max_length is not None else trained.max_length),
        "_path": path,
        "_batch_size": ev.batch_size,
        "_revision": trained.revision,
    }
    if quant == "none":
        settings["lora_merge"] = True  # adapters merged into an unquantized base (scorer.Adapters)
    return settings


def cache_key(ck_sha: str, testset_sha: str, settings: dict) -> str:
    blob = {
        "checkpoint": ck_sha,
        "testset": testset_sha,
        **{k: v for k, v in settings.items() if not k.startswith("_")},
    }
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:32]


def write_cache(path: Path, rows: list[dict], logp, preds, meta: dict) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "id": [str(r["id"]) for r in rows],
            "label": [r["label"] for r in rows],
            "prediction": [LABELS[int(p)] for p in preds],
            "logp_entailment": logp[:, 0].astype("float32"),
            "logp_non_entailment": logp[:, 1].astype("float32"),
            "slice": [None if r.get("slice") in (None, "") else str(r["slice"]) for r in rows],
        }
    ).replace_schema_metadata({"oodcorr": json.dumps(meta)})
    with io.atomic_path(path, suffix=".parquet") as tmp:
        pq.write_table(table, tmp)


def cache_usable(path: Path) -> bool:
    """Whether a cached pair can be used: it exists and is a readable, non-empty parquet file (its key holds
    the testset's content hash). A damaged or empty file (a full disk, a copy cut short) is warned about and
    rescored (its replacement is written atomically over it)."""
    if not path.exists():
        return False
    import pyarrow.parquet as pq

    try:
        meta = pq.read_metadata(path)
        ok, why = meta.num_rows > 0, f"{meta.num_rows} rows"
    except Exception as e:  # noqa: BLE001 - any unreadable file is a miss, not a crash
        ok, why = False, f"{type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}"
    if not ok:
        import sys

        print(f"warning: {path}: unusable cached scores ({why}); scoring this pair again", file=sys.stderr, flush=True)
    return ok
