"""Shared set-up for the train tests: a tmp project with params.yaml and a prepared synthetic pool."""

import json
import random
from pathlib import Path

import yaml


def write_pool(root: Path, name: str = "synth_train", n: int = 64) -> Path:
    """`n` simple balanced pairs (location entailed / contradicted) as a prepared testset + manifest."""
    out = root / "data" / "prepared"
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    names, places = ["Ann", "Bob", "Cat", "Dan", "Eve", "Fay"], ["park", "zoo", "bank", "shop"]
    rows = []
    for i in range(n):
        who, where = rng.choice(names), rng.choice(places)
        ent = i % 2 == 0
        other = where if ent else rng.choice([p for p in places if p != where])
        label = "entailment" if ent else "non_entailment"
        rows.append(
            {
                "id": f"{name}-{i}",
                "premise": f"{who} walked to the {where}.",
                "hypothesis": f"{who} was at the {other}.",
                "label": label,
                "original_label": label,
                "slice": None,
            }
        )
    (out / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    manifest = out / "manifest.json"
    data = json.loads(manifest.read_text()) if manifest.exists() else {"testsets": {}}
    data["testsets"][name] = {
        "rows": n,
        "label_counts": {"entailment": n // 2, "non_entailment": n - n // 2},
        "sha256": "",
        "source": "test",
    }
    manifest.write_text(json.dumps(data))
    return out


def make_project(root: Path, runs: dict, train: dict | None = None, pool: int = 64) -> Path:
    """params.yaml with `train` defaults (fast tiny-model settings) and `runs`; returns its path."""
    write_pool(root, n=pool)
    base = {
        "lr": 0.005,
        "batch_size": 8,
        "max_steps": 12,
        "warmup_ratio": 0.0,
        "quiet": True,
        "checkpoints": {"every": 4},
        "lora": {"dropout": 0.1},
    }
    base.update(train or {})
    params = {
        "study": {"name": "test"},
        "data": {"out": "data/prepared"},
        "train": base,
        "runs": {
            k: {"model": "tiny-olmo2", "train_set": "synth_train", "id_testset": "synth_train", "shots": 32, **v}
            for k, v in runs.items()
        },
    }
    path = root / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return path


def adapter(run_dir: Path, step: int) -> dict:
    from safetensors.torch import load_file

    return load_file(run_dir / "checkpoints" / f"checkpoint-{step}" / "adapter_model.safetensors")
