"""The evaluate stage: every checkpoint of a run x every testset -> metrics.jsonl, predictions, MLflow.

Why it is built this way: a study has tens of checkpoints x ~10 testsets per run, so the base model is
loaded once and LoRA adapters are swapped per checkpoint, each testset is tokenized once, and results are
cached per (checkpoint content, testset content, scoring settings) key, so a rerun (or a new checkpoint or
testset) only scores what is new. Under `accelerate launch` the pending pairs are sharded across
processes; rank 0 assembles the outputs after a barrier.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import click

from oodcorr import distributed, io
from oodcorr.config import load_params, project_path
from oodcorr.errors import UserError
from oodcorr.prompts import LABELS

ADAPTER_FILE = "adapter_model.safetensors"
CKPT_META = "oodcorr_checkpoint.json"


@dataclass
class Checkpoint:
    step: int
    name: str
    path: Path
    sha256: str | None = None
    error: str | None = None


def run_dir(params: dict, run: str) -> Path:
    return project_path(params, "runs") / run


def read_run_json(rdir: Path) -> dict:
    path = rdir / "run.json"
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise UserError(f"{path}:{e.lineno}: invalid JSON ({e.msg})") from None


def _check_checkpoint(ck: Checkpoint, cfg: dict, model_path: str) -> str | None:
    """Why this checkpoint cannot be evaluated, or None. Cheap: header reads only, no weights."""
    if not ck.path.is_dir():
        return "missing (listed in run.json, no folder)"
    adapter, config = ck.path / ADAPTER_FILE, ck.path / "adapter_config.json"
    for f in (adapter, config):
        if not f.exists():
            return f"{f.name} missing"
    docs = {}
    for f in (config, ck.path / CKPT_META):
        try:
            docs[f.name] = json.loads(f.read_text()) if f.exists() else {}
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            return f"{f.name} is not valid JSON ({e})"
    acfg, meta = docs[config.name], docs[CKPT_META]
    if meta.get("model") and meta["model"] != cfg["model"]:
        return f"trained from a different base model ({meta['model']!r}, this run uses {cfg['model']!r})"
    base = acfg.get("base_model_name_or_path")
    if base and base not in (cfg["model"], model_path, meta.get("model_path")) \
            and Path(base).name not in (Path(model_path).name, Path(cfg["model"]).name):
        return f"trained from a different base model ({base!r}, this run uses {cfg['model']!r})"
    try:
        from safetensors import safe_open

        with safe_open(str(adapter), framework="pt") as f:
            if not list(f.keys()):
                return f"{ADAPTER_FILE} holds no tensors"
    except Exception as e:  # truncated / not safetensors
        return f"{ADAPTER_FILE} is corrupt ({type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''})"
    return None


def list_checkpoints(rdir: Path, cfg: dict, model_path: str, expected_steps=(), finished=True) -> list[Checkpoint]:
    """Every checkpoint-<step> folder plus steps run.json lists but that are gone; errors filled in."""
    found: dict[int, Checkpoint] = {}
    for d in sorted((rdir / "checkpoints").glob("checkpoint-*")):
        if d.is_dir() and (m := re.fullmatch(r"checkpoint-(\d+)", d.name)):  # others (.tmp dirs) are not ours
            found[int(m.group(1))] = Checkpoint(int(m.group(1)), d.name, d)
    newest = max(found, default=-1)
    for step in [s for s in expected_steps or () if finished or s <= newest]:  # later ones: not trained yet
        found.setdefault(int(step), Checkpoint(int(step), f"checkpoint-{step}", rdir / "checkpoints" / f"checkpoint-{step}"))
    out = [found[s] for s in sorted(found)]
    for ck in out:
        ck.error = _check_checkpoint(ck, cfg, model_path)
        if ck.error is None:
            ck.sha256 = io.sha256_file(ck.path / ADAPTER_FILE)
    return out


def resolve_settings(params: dict, cfg: dict) -> dict:
    """Everything that changes a score besides the checkpoint and the testset (part of each cache key).
    `cfg` is the resolved run (train.resolve_config), so evaluation scores with the training defaults."""
    from oodcorr.models import _local_revision, check_available, pick_dtype, resolve_quantization

    ev = params.get("evaluate") or {}
    path = check_available(cfg["model"], cfg.get("revision"))
    bs = ev.get("batch_size", "auto")
    if isinstance(bs, str) and bs != "auto" or isinstance(bs, int) and bs < 1:
        raise UserError(f"params: evaluate.batch_size: expected a positive int or 'auto', got {bs!r}")
    return {
        "model": cfg["model"], "revision": cfg["revision"] or _local_revision(path),
        "pattern": cfg["pattern"], "verbalizer": dict(cfg["verbalizer"]),
        "dtype": str(pick_dtype(ev.get("dtype") or cfg["dtype"])).replace("torch.", ""),
        "quantization": resolve_quantization(cfg["quantization"]),
        "max_length": int(ev.get("max_length") or cfg["max_length"]),
        "_path": path, "_batch_size": bs, "_revision": cfg["revision"],
    }


def cache_key(ck_sha: str, testset_sha: str, settings: dict) -> str:
    blob = {"checkpoint": ck_sha, "testset": testset_sha, **{k: v for k, v in settings.items() if not k.startswith("_")}}
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:32]


def testset_names(params: dict, cfg: dict, only: list[str] | None = None) -> list[str]:
    names = [cfg["id_testset"], *(only if only else ((params.get("evaluate") or {}).get("testsets") or []))]
    return list(dict.fromkeys(str(n) for n in names))


def _write_cache(path: Path, rows: list[dict], logp, preds, meta: dict) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({
        "id": [str(r["id"]) for r in rows], "label": [r["label"] for r in rows],
        "prediction": [LABELS[int(p)] for p in preds],
        "logp_entailment": logp[:, 0].astype("float32"), "logp_non_entailment": logp[:, 1].astype("float32"),
        "slice": [None if r.get("slice") in (None, "") else str(r["slice"]) for r in rows],
    }).replace_schema_metadata({"oodcorr": json.dumps(meta)})
    with io.atomic_path(path, suffix=".parquet") as tmp:
        pq.write_table(table, tmp)


class _Scorer:
    """One base model per process; adapters swapped per checkpoint (load new, activate, drop old)."""

    def __init__(self, settings: dict, device: str | None):
        from oodcorr.models import load_base_model
        from oodcorr.prompts import Prompter

        self.settings, self.device = settings, device
        self.base, self.tok, self.info = load_base_model(
            settings["model"], settings["_revision"], settings["quantization"], settings["dtype"], device)
        self.prompter = Prompter(self.tok, settings["pattern"], settings["verbalizer"], settings["max_length"])
        self.model, self.active, self.encoded = None, None, {}

    def activate(self, ck: Checkpoint) -> None:
        from peft import PeftModel

        name = f"step{ck.step}"
        if self.model is None:
            self.model = PeftModel.from_pretrained(self.base, str(ck.path), adapter_name=name)
        else:
            self.model.load_adapter(str(ck.path), adapter_name=name)
            self.model.set_adapter(name)
            if self.active:
                self.model.delete_adapter(self.active)
        self.active = name
        self.model.eval()

    def encode(self, name: str, rows: list[dict]) -> list[list[int]]:
        if name not in self.encoded:  # each testset is tokenized once per process
            self.encoded[name] = self.prompter.encode([r["premise"] for r in rows], [r["hypothesis"] for r in rows])
        return self.encoded[name]

    def score(self, seqs, on_batch=None):
        from oodcorr.scoring import score

        return score(self.model, seqs, self.prompter.verbalizer_ids, self.tok.pad_token_id,
                     self.settings["_batch_size"], on_batch)


def _score_pairs(todo, checkpoints, rows_of, settings, cache_dir, rank, quiet) -> tuple[list, list]:
    """Score this process's (step, testset, key) pairs grouped by checkpoint -> (scored, failures)."""
    import torch
    from tqdm.auto import tqdm

    device = distributed.device_for_rank()
    if device:
        torch.cuda.set_device(device)
    scorer = _Scorer(settings, device)
    by_step = {ck.step: ck for ck in checkpoints}
    scored, failures = [], []
    total = sum(len(rows_of(t)) for _, t, _ in todo)
    bar = tqdm(total=total, unit="ex", disable=quiet or rank != 0, desc="evaluate", dynamic_ncols=True)
    for step in sorted({s for s, _, _ in todo}):
        ck = by_step[step]
        pairs = [(t, k) for s, t, k in todo if s == step]
        bar.set_description(f"{ck.name} x {len(pairs)} testset(s) ({len(scored)}/{len(todo)} pairs done)")
        try:
            scorer.activate(ck)
        except Exception as e:
            failures.append(f"{ck.name} (could not load the adapter: {type(e).__name__}: {str(e).splitlines()[0][:100]})")
            bar.update(sum(len(rows_of(t)) for t, _ in pairs))
            continue
        # all testsets of a checkpoint in one longest-first stream: full batches even for small testsets
        seqs = [s for t, _ in pairs for s in scorer.encode(t, rows_of(t))]
        logp, preds = scorer.score(seqs, bar.update)
        start = 0
        for testset, key in pairs:
            rows = rows_of(testset)
            end = start + len(rows)
            _write_cache(cache_dir / f"{key}.parquet", rows, logp[start:end], preds[start:end],
                         {"step": step, "testset": testset, "checkpoint_sha256": ck.sha256,
                          **{k: v for k, v in settings.items() if not k.startswith("_")}})
            scored.append((step, testset))
            start = end
    bar.close()
    return scored, failures


def _silence() -> None:
    """--quiet: no weight-loading bars or MLflow store INFO lines, so stderr holds only errors."""
    import logging

    import mlflow  # noqa: F401  (mlflow sets its logger levels on import; override them after)
    from transformers.utils import logging as hf_logging

    logging.getLogger("mlflow").setLevel(logging.WARNING)
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def evaluate_run(params: dict, run: str, testsets: list[str] | None = None, quiet: bool = False) -> dict:
    """Every checkpoint of `run` x every testset -> {"scored": [(step, testset)] by this process, "cached", "failed",
    ...}; UserError (after writing the outputs of what worked) when checkpoints failed."""
    from oodcorr.data.prepare import load_prepared, prepared_dir, read_manifest

    if quiet:
        _silence()
    from oodcorr.train import resolve_config

    cfg = resolve_config(params, run)  # the run as trained: same defaults (pattern, verbaliser, max_length, ...)
    names = testset_names(params, cfg, testsets)
    pdir = prepared_dir(params)
    manifest = read_manifest(pdir)["testsets"]
    missing = [n for n in names if n not in manifest or not (pdir / f"{n}.jsonl").exists()]
    if missing:
        raise UserError(f"testset {', '.join(missing)} was not prepared in {pdir}; add it to data.prepare (or "
                        "evaluate.testsets) and run `oodcorr data prepare` (or `dvc repro prepare`)")
    rdir = run_dir(params, run)
    if not (rdir / "checkpoints").is_dir():
        raise UserError(f"run {run}: no checkpoints under {rdir / 'checkpoints'}; run `oodcorr train --run {run}` first")
    run_json = read_run_json(rdir)
    settings = resolve_settings(params, cfg)
    checkpoints = list_checkpoints(rdir, cfg, settings["_path"], run_json.get("checkpoint_steps"),
                                   run_json.get("finished", True))
    failed = [f"{ck.name} ({ck.error})" for ck in checkpoints if ck.error]
    good = [ck for ck in checkpoints if not ck.error]
    eval_dir, cache_dir = rdir / "eval", rdir / "eval" / "cache"
    sha = {n: manifest[n].get("sha256") or io.sha256_file(pdir / f"{n}.jsonl") for n in names}
    pairs = [(ck.step, n, cache_key(ck.sha256, sha[n], settings)) for ck in good for n in names]
    pending = [p for p in pairs if not (cache_dir / f"{p[2]}.parquet").exists()]
    rank, world = distributed.init()
    loaded: dict[str, list[dict]] = {}

    def rows_of(name):  # read each testset once, only if some pair needs it
        return loaded[name] if name in loaded else loaded.setdefault(name, load_prepared(pdir, name))

    mine = pending[rank::world]
    scored, fails = _score_pairs(mine, good, rows_of, settings, cache_dir, rank, quiet) if mine else ([], [])
    if world > 1:
        import torch.distributed as dist

        gathered: list = [None] * world
        dist.all_gather_object(gathered, fails)  # also the barrier: every shard's cache files are written
        fails = [f for g in gathered for f in g]
    failed += sorted(set(fails))
    result = {"scored": scored, "cached": len(pairs) - len(pending), "failed": failed, "eval_dir": str(eval_dir),
              "rank": rank, "world_size": world}
    try:
        if rank == 0:
            bad_steps = {f.split(" ", 1)[0] for f in fails}
            done = [p for p in pairs if f"checkpoint-{p[0]}" not in bad_steps and (cache_dir / f"{p[2]}.parquet").exists()]
            result.update(write_outputs(params, cfg, run, run_json, done, cache_dir, eval_dir))
    finally:
        if world > 1:
            dist.barrier()
            dist.destroy_process_group()
    if failed:
        if rank != 0:
            raise SystemExit(2)
        raise UserError(f"run {run}: {len(failed)} checkpoint(s) failed, the rest were evaluated: {'; '.join(failed)}")
    return result


def _metric_key(*parts: str) -> str:
    """MLflow keys allow [A-Za-z0-9_-. /]; slice names (e.g. `lexical_overlap/entailment`) may hold others."""
    return "/".join(re.sub(r"[^A-Za-z0-9_\-. /]", "_", str(p)) for p in parts)


def write_outputs(params, cfg, run, run_json, done, cache_dir: Path, eval_dir: Path) -> dict:
    """metrics.jsonl, accuracy.csv, summary.json and predictions/ from the cache (atomically), then MLflow."""
    import pyarrow.parquet as pq

    from oodcorr.scoring import metrics_by_slice

    base = {"run": run, "model": cfg["model"], "train_set": cfg["train_set"], "id_testset": cfg["id_testset"],
            "shots": cfg["shots"], "seed": cfg["seed"], "data_seed": cfg.get("data_seed", 0)}
    rows, tables = [], {}
    for step, testset, key in done:
        table = pq.read_table(cache_dir / f"{key}.parquet")
        tables[(step, testset)] = table
        col = table.to_pydict()
        for sl, m in metrics_by_slice(col["label"], col["prediction"], col["slice"]):
            rows.append({**base, "step": step, "testset": testset, "slice": sl, **m})
    rows.sort(key=lambda r: (r["step"], r["testset"], r["slice"] is not None, r["slice"] or ""))
    io.write_jsonl(eval_dir / "metrics.jsonl", rows)
    whole = [r for r in rows if r["slice"] is None]
    io.write_text(eval_dir / "accuracy.csv", "step,testset,accuracy\n" + "".join(
        f"{r['step']},{r['testset']},{r['accuracy']:.6f}\n" for r in whole))
    final = max((r["step"] for r in whole), default=None)
    io.write_json(eval_dir / "summary.json", {"step": final, "accuracy": {
        r["testset"]: r["accuracy"] for r in whole if r["step"] == final}})
    with io.atomic_dir(eval_dir / "predictions") as tmp:
        for (step, testset), table in tables.items():
            (tmp / f"step-{step}").mkdir(exist_ok=True)
            pq.write_table(table.replace_schema_metadata(None), tmp / f"step-{step}" / f"{testset}.parquet")
    logged = _log_mlflow(params, run, run_json, rows, eval_dir)
    return {"metrics": str(eval_dir / "metrics.jsonl"), "rows": rows, "mlflow_run_id": logged[0],
            "mlflow_logged": logged[1]}


def _log_mlflow(params, run, run_json, rows, eval_dir: Path) -> tuple[str, int]:
    """Log into the training run; (testset, step) pairs already logged are skipped (no duplicate steps)."""
    import tarfile
    import tempfile

    import mlflow
    from mlflow.entities import Metric

    from oodcorr import tracking

    exp_id = tracking.setup(params)
    client = mlflow.MlflowClient()
    run_id = tracking.find_run(params, run, run_id=run_json.get("mlflow_run_id"), kind="train")
    if run_id is None:
        run_id = client.create_run(exp_id, run_name=run, tags={"oodcorr.run_key": run, "oodcorr.kind": "train"}).info.run_id
        client.set_terminated(run_id)
    now, metrics, history = int(time.time() * 1000), [], {}
    for r in rows:
        prefix = ("eval", r["testset"]) if r["slice"] is None else ("eval", r["testset"], r["slice"])
        names = ("accuracy", "macro_f1", "f1_non_entailment") if r["slice"] is None else ("accuracy",)
        for name in names:
            key = _metric_key(*prefix, name)
            if key not in history:
                history[key] = {m.step for m in client.get_metric_history(run_id, key)}
            if r["step"] not in history[key] and r[name] == r[name]:  # skip NaN (empty slice)
                metrics.append(Metric(key, float(r[name]), now, int(r["step"])))
                history[key].add(r["step"])
    for i in range(0, len(metrics), 1000):  # MLflow's per-batch limit
        client.log_batch(run_id, metrics=metrics[i: i + 1000])
    with tempfile.TemporaryDirectory() as tmp:  # one compressed artifact, not one file per checkpoint x testset
        with tarfile.open(Path(tmp) / "predictions.tar.gz", "w:gz") as tar:
            tar.add(eval_dir / "predictions", arcname="predictions")
        client.log_artifact(run_id, str(Path(tmp) / "predictions.tar.gz"), "eval")
    return run_id, len(metrics)


@click.command("evaluate")
@click.option("--run", "run_key", required=True, help="Run key from params.yaml `runs`.")
@click.option("--params", "params_file", type=click.Path(dir_okay=False), default=None, help="params.yaml to use.")
@click.option("--testsets", default=None, help="Comma-separated testsets (default: evaluate.testsets); the run's ID testset is always included.")
@click.option("--quiet", is_flag=True, help="No progress bar or summary.")
def evaluate_cmd(run_key, params_file, testsets, quiet):
    """Score every checkpoint of a run on every testset (cached; shard with `accelerate launch`)."""
    params = load_params(params_file)
    quiet = quiet or bool((params.get("evaluate") or {}).get("quiet"))
    only = [t.strip() for t in testsets.split(",") if t.strip()] if testsets else None
    res = evaluate_run(params, run_key, only, quiet)
    if not quiet:
        who = f" [rank {res['rank']}/{res['world_size']}]" if res["world_size"] > 1 else ""
        where = f" -> {res['metrics']}" if "metrics" in res else ""
        click.echo(f"{run_key}{who}: scored {len(res['scored'])} pair(s), {res['cached']} cached{where}")
