"""Bad-input cases: runs and checkpoints (the evaluation cache, run.json, adapters, metrics.jsonl, a deleted
checkpoint) and a second process on the same work (a hostile environment: bad_inputs_env.py). A new one is one
Case in cases()."""

from __future__ import annotations

import shutil

from bad_inputs_runner import BASE, LOCK_FILES, A, Case, E, T, corrupt


def _rescored(root, res):
    if "unusable cached scores" not in res.stderr:
        return "no warning about the damaged cache file"
    if not sorted((root / "runs" / "a" / "eval" / "cache").glob("*.parquet")):
        return "cache empty"
    import pyarrow.parquet as pq

    for f in (root / "runs" / "a" / "eval" / "cache").glob("*.parquet"):
        if pq.read_metadata(f).num_rows == 0:
            return f"{f.name} still unusable"
    return None


def rm_checkpoint(root):
    shutil.rmtree(root / "runs" / "a" / "checkpoints" / "checkpoint-4")


def _rebuilt(root, res):
    base = BASE[0] / "runs" / "a" / "checkpoints"
    new = root / "runs" / "a" / "checkpoints"
    for step in (0, 2, 4, 6, 8):
        f = f"checkpoint-{step}/adapter_model.safetensors"
        if not (new / f).exists():
            return f"checkpoint-{step} not rebuilt"
        if (new / f).read_bytes() != (base / f).read_bytes():
            return f"checkpoint-{step} differs from the original"
    if "from checkpoint-2 to step 4" not in res.stderr:  # one interval trained again, not the whole run
        return "not rebuilt from the nearest earlier checkpoint: " + " ".join(res.stderr.split())[-160:]
    return None


def _metrics_bad_line(root):
    f = root / "runs" / "a" / "eval" / "metrics.jsonl"
    lines = f.read_text().splitlines()
    lines[3] = lines[3][:25]
    f.write_text("\n".join(lines) + "\n")


def _file_at(rel: str):
    def mutate(root):
        p = root / rel
        if p.is_dir():
            shutil.rmtree(p)
        p.write_text("not a folder")

    return mutate


def cases() -> list[Case]:
    return [
        Case(
            "file:cache-empty",
            E,
            corrupt("runs/a/eval/cache/*.parquet", "empty"),
            expect="ok",
            check=_rescored,
            allowed=("runs/a/eval/**",),
            item="traceback: empty cache parquet",
            fast=True,
        ),
        Case(
            "file:cache-garbage",
            E,
            corrupt("runs/a/eval/cache/*.parquet", "garbage"),
            expect="ok",
            check=_rescored,
            allowed=("runs/a/eval/**",),
        ),
        Case(
            "file:cache-truncated",
            E,
            corrupt("runs/a/eval/cache/*.parquet", "truncate"),
            expect="ok",
            check=_rescored,
            allowed=("runs/a/eval/**",),
        ),
        Case(
            "file:cache-is-a-file", E, _file_at("runs/a/eval/cache"), must=r"cache", item="traceback: cache path a file"
        ),
        Case("file:eval-is-a-file", E, _file_at("runs/a/eval"), must=r"eval"),
        Case("file:run-json-bad", E, lambda r: (r / "runs/a/run.json").write_text("{oops"), must=r"run\.json:\d+"),
        Case(
            "file:adapter-truncated",
            E,
            corrupt("runs/a/checkpoints/checkpoint-4/adapter_model.safetensors", "truncate"),
            must=r"checkpoint-4",
            allowed=("runs/a/eval/**",),
        ),
        Case("file:metrics-bad-line", A, _metrics_bad_line, must=r"metrics\.jsonl:4"),
        Case(
            "file:checkpoint-deleted",
            T,
            rm_checkpoint,
            expect="ok",
            check=_rebuilt,
            allowed=("runs/a/checkpoints/**", "runs/a/run.json", "runs/a/tracking/**"),
            item="deleted checkpoint never rebuilt",
            fast=True,
        ),
        Case(
            "concurrent:train-same-run",
            T,
            wrap="flock:train-a",
            allowed=LOCK_FILES,
            fast=True,
            must=r"run a is being trained by another process \(pid \d+\)",
            item="two concurrent train",
        ),
        Case(
            "concurrent:evaluate-same-run",
            E,
            wrap="flock:evaluate-a",
            allowed=LOCK_FILES,
            must=r"run a is being evaluated by another process \(pid \d+\)",
        ),
        Case(
            "concurrent:analyze",
            A,
            wrap="flock:analyze",
            allowed=LOCK_FILES,
            must=r"analysis .* another process \(pid \d+\)",
            item="two concurrent analyze leave a run RUNNING",
        ),
    ]
