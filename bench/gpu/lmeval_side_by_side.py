"""oodcorr's evaluator vs lm-evaluation-harness 0.4.x: the same model folder, prompts and verbaliser (not a test).

Both run as the command a user would type (start-up included), interleaved, medians of `--reps`:
  - per checkpoint: one LoRA checkpoint x one testset (MNLI pairs);
  - a grid: `--checkpoints` checkpoints x `--grid-testsets` (lm-eval: one call per checkpoint, all testsets in it;
    oodcorr: one `oodcorr evaluate`);
lm-eval runs at its best batch size among `--lmeval-batch-sizes` (probed per dtype on the per-checkpoint task).
The prompts lm-eval sees are oodcorr's Prompter.format strings, its choices are oodcorr's verbaliser tokens,
so the two must agree on every prediction up to rounding; the agreement is reported.

In the same process (oodcorr's scoring function, no start-up): merged vs unmerged adapters, fp32 predictions of
the new path vs today's path (unmerged), bf16 vs fp32 agreement with the fp32 label margin of every flip, and the
scoring rate as a share of the matmul rate at the model's GEMM shapes. On a CPU without native bf16 the bf16
numbers use bf16 numerics with GEMMs run in float32 (bf16 inputs and outputs, float32 accumulation, as
AVX512-BF16/AMX kernels accumulate), since torch's emulated bf16 GEMM is far too slow to score with; speed
ratios in bf16 are then not measured (`bf16_speed_measured: false`).

    make lmeval-venv   # ../lmeval-venv: lm-eval==0.4.13 with the same torch/transformers/peft
    .venv/bin/python bench/gpu/lmeval_side_by_side.py --n 128 --grid-n 32 --reps 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE.parent / "speed"))  # bench/speed/eval_throughput.py
from eval_throughput import load_testsets, make_project  # noqa: E402  (same data, same seeded checkpoints)

# ---------------------------------------------------------------- lm-evaluation-harness side


def write_lmeval_tasks(task_dir: Path, sets: dict, prompter) -> dict[str, str]:
    """One multiple_choice task per testset: context = oodcorr's prompt, choices = oodcorr's verbaliser."""
    import yaml

    from oodcorr.modeling.prompts import LABELS

    task_dir.mkdir(parents=True, exist_ok=True)
    names = {}
    for name, rows in sets.items():
        data = task_dir / f"{name}.jsonl"
        with open(data, "w") as f:
            for r in rows:
                f.write(
                    json.dumps(
                        {
                            "id": r["id"],
                            "text": prompter.format(r["premise"], r["hypothesis"]),
                            "gold": LABELS.index(r["label"]),
                        }
                    )
                    + "\n"
                )
        task = f"oodcorr_{name}"
        (task_dir / f"{task}.yaml").write_text(
            yaml.safe_dump(
                {
                    "task": task,
                    "dataset_path": "json",
                    "dataset_kwargs": {"data_files": {"test": str(data)}},
                    "test_split": "test",
                    "output_type": "multiple_choice",
                    "doc_to_text": "{{text}}",
                    "doc_to_choice": [prompter.verbalizer[label] for label in LABELS],
                    "doc_to_target": "{{gold}}",
                    "target_delimiter": "",
                    "metric_list": [{"metric": "acc"}],
                },
                sort_keys=False,
            )
        )
        names[name] = task
    return names


def run_lmeval(
    py: str,
    model: str,
    ckpt: Path,
    tasks: list[str],
    task_dir: Path,
    dtype: str,
    batch: int,
    bos: bool,
    env: dict,
    out: Path,
) -> tuple[float, dict]:
    """One `lm-eval run` -> (wall seconds, {(testset task, id): (pred, [logp per label])})."""
    shutil.rmtree(out, ignore_errors=True)
    args = [
        py,
        "-m",
        "lm_eval",
        "run",
        "--model",
        "hf",
        "--model_args",
        f"pretrained={model},peft={ckpt},dtype={dtype}" + (",add_bos_token=True" if bos else ""),
        "--tasks",
        *tasks,
        "--include_path",
        str(task_dir),
        "--batch_size",
        str(batch),
        "--device",
        "cpu",
        "--output_path",
        str(out),
        "--log_samples",
        "--verbosity",
        "WARNING",
    ]
    t = time.perf_counter()
    p = subprocess.run(args, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if p.returncode:
        raise SystemExit(f"lm-eval failed ({p.returncode}):\n{p.stderr[-3000:]}")
    preds = {}
    for f in out.rglob("samples_*.jsonl"):
        task = f.name[len("samples_") :].rsplit("_", 1)[0]
        for line in f.read_text().splitlines():
            s = json.loads(line)
            lls = [float(r[0]) for r in s["filtered_resps"]]
            preds[(task, s["doc"]["id"])] = (int(lls[1] > lls[0]), lls)
    return wall, preds


# ---------------------------------------------------------------- oodcorr side


def run_oodcorr(root: Path, env: dict) -> tuple[float, dict]:
    """One `oodcorr evaluate` (cold: its cache removed) -> (wall seconds, {(step, testset, id): (pred, logp)})."""
    import pandas as pd

    shutil.rmtree(root / "runs" / "bench" / "eval", ignore_errors=True)
    t = time.perf_counter()
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "oodcorr",
            "evaluate",
            "--run",
            "bench",
            "--params",
            str(root / "params.yaml"),
            "--quiet",
        ],
        env=env,
        capture_output=True,
        text=True,
        cwd=root,
    )
    wall = time.perf_counter() - t
    if p.returncode:
        raise SystemExit(f"oodcorr evaluate failed ({p.returncode}):\n{p.stderr[-3000:]}")
    preds = {}
    for f in (root / "runs" / "bench" / "eval" / "predictions").rglob("*.parquet"):
        step = int(f.parent.name.split("-")[1])
        for r in pd.read_parquet(f).itertuples():
            preds[(step, f.stem, r.id)] = (
                int(r.prediction == "non_entailment"),
                [r.logp_entailment, r.logp_non_entailment],
            )
    return wall, preds


def set_dtype(root: Path, dtype: str) -> None:
    import yaml

    params = yaml.safe_load((root / "params.yaml").read_text())
    params["evaluate"]["dtype"] = dtype
    (root / "params.yaml").write_text(yaml.safe_dump(params))


def agreement(a: dict, b: dict) -> dict:
    keys = sorted(set(a) & set(b))
    flips = [k for k in keys if a[k][0] != b[k][0]]
    return {
        "n": len(keys),
        "agreement": 1 - len(flips) / max(1, len(keys)),
        "flip_margins_first": sorted(abs(a[k][1][0] - a[k][1][1]) for k in flips),
        "max_abs_logp_diff": max((abs(x - y) for k in keys for x, y in zip(a[k][1], b[k][1])), default=0.0),
    }


# ---------------------------------------------------------------- in-process: merge, dtype, rate


class Bf16GemmInFloat32:
    """bf16 numerics on a CPU without bf16 GEMMs: linear/matmul/bmm/SDPA on bf16 tensors run in float32 and
    round their output to bf16 (bf16 inputs, float32 accumulation); every other op runs in bf16 as usual."""

    def __enter__(self):
        import torch
        import torch.nn.functional as F

        self._orig = {}
        for mod, name in ((F, "linear"), (torch, "matmul"), (torch, "bmm"), (F, "scaled_dot_product_attention")):
            fn = getattr(mod, name)
            self._orig[(mod, name)] = fn

            def wrapped(*args, _fn=fn, **kw):
                if any(isinstance(a, torch.Tensor) and a.dtype == torch.bfloat16 for a in args):
                    up = [a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
                    kw = {
                        k: v.float() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                        for k, v in kw.items()
                    }
                    return _fn(*up, **kw).to(torch.bfloat16)
                return _fn(*args, **kw)

            setattr(mod, name, wrapped)
        return self

    def __exit__(self, *exc):
        for (mod, name), fn in self._orig.items():
            setattr(mod, name, fn)


def gemm_rate(config, dtype, tokens: int, emulate: bool, reps: int = 3) -> float:
    """GFLOP/s of F.linear at the model's projection shapes ([tokens, hidden] x its weights), weighted by FLOPs."""
    import torch
    import torch.nn.functional as F

    h = config.hidden_size
    inter = getattr(config, "intermediate_size", None) or 4 * h
    hd = getattr(config, "head_dim", None) or h // config.num_attention_heads
    kv = getattr(config, "num_key_value_heads", config.num_attention_heads) * hd
    shapes = [
        (h, config.num_attention_heads * hd),
        (h, kv),
        (h, kv),
        (config.num_attention_heads * hd, h),
        (h, inter),
        (h, inter),
        (inter, h),
    ]
    x = {k: torch.randn(tokens, k, dtype=dtype) for k in {s[0] for s in shapes}}
    ws = [torch.randn(n, k, dtype=dtype) for k, n in shapes]
    flops = sum(2 * tokens * k * n for k, n in shapes)
    ctx = Bf16GemmInFloat32() if emulate else _null()
    with ctx, torch.inference_mode():
        times = []
        for _ in range(reps + 1):
            t = time.perf_counter()
            for (k, _), w in zip(shapes, ws):
                F.linear(x[k], w)
            times.append(time.perf_counter() - t)
    return flops / statistics.median(times[1:]) / 1e9


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def in_process(ckpt: Path, rows: list[dict], max_length: int, reps: int, native_bf16: bool) -> dict:
    """Paired, interleaved timings on chunks of the testset (robust to a load that changes over minutes): each
    chunk is scored by every variant back to back, in alternating order, next to a GEMM-rate measurement;
    ratios and shares of the GEMM rate are medians over the (rep, chunk) pairs."""
    import numpy as np
    import torch

    from oodcorr.evaluate.scorer import Adapters
    from oodcorr.evaluate.scoring import CPU_TOKEN_BUDGET, score
    from oodcorr.modeling.model_loading import load_base_model
    from oodcorr.modeling.models import SMOLLM2
    from oodcorr.modeling.prompts import Prompter

    models = {}
    for dtype in ("float32", "bfloat16"):
        models[dtype], tok, _ = load_base_model(SMOLLM2, quantization="none", dtype=dtype)
    prompter = Prompter(tok, max_length=max_length)
    seqs = prompter.encode([r["premise"] for r in rows], [r["hypothesis"] for r in rows])
    adapters = {d: Adapters(m, merge=True) for d, m in models.items()}
    for ad in adapters.values():
        ad.activate(ckpt, "a")
    emulate = not native_bf16
    cfg = models["float32"].config
    n_params = sum(p.numel() for p in models["float32"].parameters())
    head = models["float32"].get_output_embeddings().weight.numel()

    def run(dtype, merged, part):
        ad = adapters[dtype]
        if not merged:
            ad.unmerge()  # today's CPU path: peft's unmerged LoRA forward on the pristine base
        ctx = Bf16GemmInFloat32() if dtype == "bfloat16" and emulate else _null()
        t = time.perf_counter()
        with ctx:
            res = score(ad.model, part, prompter.verbalizer_ids, tok.pad_token_id)
        dt = time.perf_counter() - t
        if not merged:
            ad.model.merge_adapter()
        return dt, res

    variants = [("float32", False), ("float32", True), ("bfloat16", True)]
    n_chunks = max(1, min(len(seqs) // 8, 8))
    parts = [list(range(c, len(seqs), n_chunks)) for c in range(n_chunks)]
    logp = {v: np.zeros((len(seqs), 2), np.float32) for v in variants}
    pred = {v: np.zeros(len(seqs), np.int64) for v in variants}
    pairs = []
    for rep in range(reps):
        for c, idx in enumerate(parts):
            order = variants if (rep + c) % 2 == 0 else variants[::-1]
            t = {}
            for v in order:
                t[v], (lp, pr) = run(*v, [seqs[i] for i in idx])
                logp[v][idx], pred[v][idx] = lp, pr
            rate = {
                d: gemm_rate(cfg, getattr(torch, d), CPU_TOKEN_BUDGET, d == "bfloat16" and emulate, reps=1)
                for d in ("float32", "bfloat16")
            }
            real = sum(len(seqs[i]) for i in idx)
            gflop = (2 * (n_params - head) * real + 2 * head * len(idx)) / 1e9
            pairs.append(
                {
                    "seconds": {f"{d}_{'merged' if m else 'unmerged'}": t[(d, m)] for d, m in variants},
                    "gemm_gflop_s": rate,
                    "gflop": gflop,
                }
            )
    med = lambda xs: float(statistics.median(xs))  # noqa: E731
    lp_old, pr_old = logp[variants[0]], pred[variants[0]]
    lp_new, pr_new = logp[variants[1]], pred[variants[1]]
    lp_bf, pr_bf = logp[variants[2]], pred[variants[2]]
    margins = np.abs(lp_new[:, 0] - lp_new[:, 1])
    flips = np.nonzero(pr_bf != pr_new)[0]
    return {
        "examples": len(seqs),
        "real_tokens": sum(map(len, seqs)),
        "chunks": n_chunks,
        "reps": reps,
        "pairs": pairs,
        "merged_over_unmerged_fp32": med(
            [p["seconds"]["float32_unmerged"] / p["seconds"]["float32_merged"] for p in pairs]
        ),
        "bf16_over_fp32_merged": med([p["seconds"]["float32_merged"] / p["seconds"]["bfloat16_merged"] for p in pairs]),
        "fp32_merged_vs_unmerged": {
            "predictions_identical": bool((pr_old == pr_new).all()),
            "max_abs_logp_diff": float(np.abs(lp_old - lp_new).max()),
        },
        "bf16_vs_fp32": {
            "agreement": float(1 - len(flips) / len(seqs)),
            "flips": int(len(flips)),
            "flip_fp32_margins": sorted(float(margins[i]) for i in flips),
            "max_abs_logp_diff": float(np.abs(lp_bf - lp_new).max()),
            "gemm": "native" if native_bf16 else "bf16 in/out, float32 accumulation (no bf16 GEMM on this CPU)",
        },
        "gemm_gflop_s_at_model_shapes": {
            d: med([p["gemm_gflop_s"][d] for p in pairs]) for d in ("float32", "bfloat16")
        },
        "fraction_of_gemm_rate": {
            d: med([p["gflop"] / p["seconds"][f"{d}_merged"] / p["gemm_gflop_s"][d] for p in pairs])
            for d in ("float32", "bfloat16")
        },
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=128, help="MNLI pairs in the per-checkpoint measurement")
    ap.add_argument("--grid-n", type=int, default=32, help="items per testset in the grid")
    ap.add_argument("--grid-testsets", default="mnli,snli,scitail")
    ap.add_argument("--checkpoints", type=int, default=5)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--grid-reps", type=int, default=None, help="reps of the grid (default: --reps)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads for both (OMP_NUM_THREADS / OODCORR_THREADS)")
    ap.add_argument(
        "--dtypes",
        default="auto",
        help="side-by-side dtypes: auto = float32, plus bfloat16 where the "
        "CPU has native bf16 (emulated bf16 GEMMs make both tools many times slower)",
    )
    ap.add_argument("--lmeval-batch-sizes", default="8,16,32", help="probed once each; one size: no probe")
    ap.add_argument("--lmeval-python", default=str(REPO.parent / "lmeval-venv" / "bin" / "python"))
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--skip-side-by-side", action="store_true", help="in-process measurements only")
    ap.add_argument("--skip-in-process", action="store_true", help="side-by-side only")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(HERE / "results" / "lmeval_side_by_side.json"))
    args = ap.parse_args(argv)
    if not args.skip_side_by_side and not Path(args.lmeval_python).exists():
        sys.exit(f"no lm-eval environment at {args.lmeval_python}: run `make lmeval-venv`")
    import torch

    torch.set_num_threads(args.threads)
    from oodcorr.core import io
    from oodcorr.modeling.model_loading import load_tokenizer
    from oodcorr.modeling.models import SMOLLM2, model_path
    from oodcorr.modeling.precision import native_bf16_cpu
    from oodcorr.modeling.prompts import Prompter

    native = native_bf16_cpu()
    dtypes = (
        ["float32", "bfloat16"]
        if args.dtypes == "auto" and native
        else ["float32"]
        if args.dtypes == "auto"
        else args.dtypes.split(",")
    )
    grid_names = args.grid_testsets.split(",")
    data = load_testsets(max(args.n, args.grid_n), args.seed)
    one = {"mnli": data["mnli"][: args.n]}
    grid = {k: data[k][: args.grid_n] for k in grid_names}
    tok = load_tokenizer(SMOLLM2)
    prompter = Prompter(tok, max_length=args.max_length)
    bos = tok.bos_token_id is not None and prompter.encode(["a"], ["b"])[0][0] == tok.bos_token_id
    res = {
        "cpu": platform.processor() or platform.machine(),
        "native_bf16": native,
        "threads": args.threads,
        "model": SMOLLM2,
        "n_per_checkpoint": args.n,
        "grid": {"checkpoints": args.checkpoints, "testsets": grid_names, "n": args.grid_n},
        "reps": args.reps,
        "bf16_speed_measured": bool(native),
        "lmeval_version": None,
    }
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(args.threads),
        "OODCORR_THREADS": str(args.threads),
        "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env["MLFLOW_TRACKING_URI"] = f"sqlite:///{tmp / 'mlflow.db'}"
        env["HF_DATASETS_CACHE"] = str(tmp / "hf_datasets")
        roots = {"one": tmp / "one", "grid": tmp / "grid"}
        for r in roots.values():
            r.mkdir()
        # per checkpoint: one trained-like checkpoint (step 10 of the seeded series); the grid: steps 0..40
        ck_one = make_project(roots["one"], one, 2, "float32", args.max_length)[1]
        shutil.rmtree(roots["one"] / "runs" / "bench" / "checkpoints" / "checkpoint-0")
        ck_grid = make_project(roots["grid"], grid, args.checkpoints, "float32", args.max_length)
        if not args.skip_in_process:
            print("in-process: merged vs unmerged, bf16 vs fp32, share of the GEMM rate ...", flush=True)
            res["in_process"] = in_process(ck_one, one["mnli"], args.max_length, args.reps, bool(native))
            print(json.dumps(res["in_process"], indent=1), flush=True)
        if not args.skip_side_by_side:
            res["lmeval_version"] = subprocess.run(
                [args.lmeval_python, "-c", "import importlib.metadata as m; print(m.version('lm_eval'))"],
                capture_output=True,
                text=True,
            ).stdout.strip()
            tasks = write_lmeval_tasks(tmp / "tasks", grid, prompter)
            tasks_one = write_lmeval_tasks(tmp / "tasks_one", one, prompter)
            mpath = model_path(SMOLLM2)
            res["side_by_side"] = {}
            for dtype in dtypes:
                for r in roots.values():
                    set_dtype(r, dtype)
                side = res["side_by_side"][dtype] = {}
                probe, sizes = {}, [int(b) for b in args.lmeval_batch_sizes.split(",")]
                for bs in sizes if len(sizes) > 1 else []:
                    probe[bs], _ = run_lmeval(
                        args.lmeval_python,
                        mpath,
                        ck_one,
                        [tasks_one["mnli"]],
                        tmp / "tasks_one",
                        dtype,
                        bs,
                        bos,
                        env,
                        tmp / "lm_out",
                    )
                    print(f"{dtype} lm-eval probe batch {bs}: {probe[bs]:.1f} s", flush=True)
                best = min(probe, key=probe.get) if probe else sizes[0]
                side["lmeval_batch_probe_s"] = probe
                side["lmeval_batch_size"] = best
                walls = {"lmeval_one": [], "oodcorr_one": [], "lmeval_grid": [], "oodcorr_grid": []}
                grid_reps = args.reps if args.grid_reps is None else args.grid_reps
                for rep in range(max(args.reps, grid_reps)):
                    order = ["lm", "ood"] if rep % 2 == 0 else ["ood", "lm"]
                    do_one, do_grid = rep < args.reps, rep < grid_reps
                    for who in order:
                        if who == "lm":
                            if do_one:
                                w, lm_one = run_lmeval(
                                    args.lmeval_python,
                                    mpath,
                                    ck_one,
                                    [tasks_one["mnli"]],
                                    tmp / "tasks_one",
                                    dtype,
                                    best,
                                    bos,
                                    env,
                                    tmp / "lm_out",
                                )
                                walls["lmeval_one"].append(w)
                            w, lm_grid = 0.0, {}
                            for ck in ck_grid if do_grid else []:
                                dw, p = run_lmeval(
                                    args.lmeval_python,
                                    mpath,
                                    ck,
                                    [tasks[n] for n in grid_names],
                                    tmp / "tasks",
                                    dtype,
                                    best,
                                    bos,
                                    env,
                                    tmp / "lm_out",
                                )
                                w += dw
                                step = int(ck.name.split("-")[1])
                                lm_grid.update({(step, t.replace("oodcorr_", ""), i): v for (t, i), v in p.items()})
                            if do_grid:
                                walls["lmeval_grid"].append(w)
                                lm_grid_last = lm_grid
                        else:
                            if do_one:
                                w, ood_one = run_oodcorr(roots["one"], env)
                                walls["oodcorr_one"].append(w)
                            if do_grid:
                                w, ood_grid = run_oodcorr(roots["grid"], env)
                                walls["oodcorr_grid"].append(w)
                    print(
                        f"{dtype} rep {rep}: " + ", ".join(f"{k} {v[-1]:.1f}s" for k, v in walls.items() if v),
                        flush=True,
                    )
                med = {k: statistics.median(v) for k, v in walls.items()}
                side["seconds"] = walls
                side["median_s"] = med
                side["ratio_per_checkpoint"] = med["lmeval_one"] / med["oodcorr_one"]
                side["ratio_grid"] = med["lmeval_grid"] / med["oodcorr_grid"]
                lm1 = {(10, "mnli", i): v for (t, i), v in lm_one.items()}
                side["agreement_per_checkpoint"] = agreement(ood_one, lm1)
                side["agreement_grid"] = agreement(ood_grid, lm_grid_last)
                print(
                    f"{dtype}: per checkpoint {side['ratio_per_checkpoint']:.2f}x, grid {side['ratio_grid']:.2f}x "
                    f"(lm-eval batch {best}); agreement {side['agreement_per_checkpoint']['agreement']:.2%} / "
                    f"{side['agreement_grid']['agreement']:.2%}",
                    flush=True,
                )
    io.write_json(args.out, res)
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
