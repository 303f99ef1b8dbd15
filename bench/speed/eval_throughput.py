"""Evaluation throughput: `oodcorr.evaluate` vs a paper-style baseline, in one process (not a test).

SmolLM2-135M, several LoRA checkpoints (seeded random adapters), the real NLI testsets in
../shared/data/nli subsampled to the same N each. The baseline pads every prompt to max_length, computes
full-vocabulary logits at every position and reloads the model per checkpoint. Both run in the same dtype,
so their predictions must agree. Also measures the CPU/GPU matmul rate to put GFLOP/s in context.

    .venv/bin/python bench/speed/eval_throughput.py --n 24 --checkpoints 3
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent
NLI = HERE.parents[2] / "shared" / "data" / "nli"
ENT = "entailment"
# name -> (file, premise column, hypothesis column, label column, value(s) meaning entailment, slice column)
SOURCES = {
    "mnli": ("mnli/mnli_dev_matched.tsv", "premise", "hypothesis", "gold_label", {"entailment"}, None),
    "snli": ("snli/snli_test_esnli_tokenized.tsv", "premise", "hypothesis", "label", {"entailment"}, None),
    "scitail": ("scitail/scitail_test.csv", "premise", "hypothesis", "label", {"entailment"}, None),
    "rte": ("rte/rte_dev.csv", "premise", "hypothesis", "label", {"entailment"}, None),
    "wnli": ("wnli/wnli_train.csv", "premise", "hypothesis", "label", {"entailment"}, None),
    "hans": ("hans/hans_evaluation.tsv", "premise", "hypothesis", "label", {"entailment"}, "heuristic"),
    "anli_r1": ("anli/anli_r1_dev.jsonl", "premise", "hypothesis", "label", {"entailment"}, None),
    "anli_r3": ("anli/anli_r3_dev.jsonl", "premise", "hypothesis", "label", {"entailment"}, None),
    "paws_qqp": ("paws/paws_qqp_dev_and_test.tsv", "sentence1", "sentence2", "label", {"1"}, None),
}


def load_testsets(n: int, seed: int) -> dict[str, list[dict]]:
    import pandas as pd

    out = {}
    for name, (rel, p, h, lab, ent, sl) in SOURCES.items():
        path = NLI / rel
        if path.suffix == ".jsonl":
            df = pd.read_json(path, lines=True, dtype=False)
        else:
            df = pd.read_csv(
                path,
                sep="\t" if path.suffix == ".tsv" else ",",
                quoting=csv.QUOTE_NONE if path.suffix == ".tsv" else csv.QUOTE_MINIMAL,
                keep_default_na=False,
                dtype=str,
            )
        idx = sorted(random.Random(seed).sample(range(len(df)), min(n, len(df))))
        rows = []
        for i in idx:
            r = df.iloc[i]
            label = ENT if str(r[lab]) in ent else "non_entailment"
            slice_ = f"{r[sl]}/{label}" if sl else None
            rows.append(
                {
                    "id": f"{name}-{i}",
                    "premise": str(r[p]),
                    "hypothesis": str(r[h]),
                    "label": label,
                    "original_label": str(r[lab]),
                    "slice": slice_,
                }
            )
        out[name] = rows
    return out


def matmul_rate(dtype, device, size=2048, reps=6) -> float:
    import torch

    a = torch.randn(size, size, dtype=dtype, device=device)
    b = torch.randn(size, size, dtype=dtype, device=device)
    for _ in range(2):
        a @ b
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    t = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync()
    return 2 * size**3 * reps / (time.perf_counter() - t) / 1e9


def make_project(root: Path, sets: dict, n_ckpt: int, dtype: str, max_length: int) -> list[Path]:
    import torch
    import yaml

    from oodcorr.core import io
    from oodcorr.modeling.model_loading import add_lora, load_base_model
    from oodcorr.modeling.models import SMOLLM2

    declared = {
        k: {"path": f"raw/{k}.jsonl", "premise": "premise", "hypothesis": "hypothesis", "label": "label"} for k in sets
    }
    params = {
        "study": {"name": "bench"},
        "data": {"out": "data/prepared", "testsets": declared},
        "train": {"dtype": dtype, "quantization": "none", "max_length": max_length},
        "runs": {"bench": {"model": SMOLLM2, "train_set": "mnli", "id_testset": "mnli", "shots": 64}},
        "evaluate": {"batch_size": "auto"},
    }
    if len(sets) > 1:  # besides the run's ID testset (mnli); none listed: the ID testset alone
        params["evaluate"]["testsets"] = [k for k in sets if k != "mnli"]
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    manifest = {"testsets": {}}
    for name, rows in sets.items():
        f = root / "data" / "prepared" / f"{name}.jsonl"
        io.write_jsonl(f, rows)
        manifest["testsets"][name] = {
            "rows": len(rows),
            "label_counts": {},
            "sha256": io.sha256_file(f),
            "source": str(NLI),
        }
    io.write_json(root / "data" / "prepared" / "manifest.json", manifest)
    base, _, info = load_base_model(SMOLLM2, quantization="none", dtype="float32")
    model = add_lora(base, {"r": 8, "alpha": 32, "dropout": 0.0})
    paths = []
    for k in range(n_ckpt):
        step = 0 if k == 0 else 10 * k
        if step:
            gen = torch.Generator().manual_seed(step)
            with torch.no_grad():
                for pname, prm in model.named_parameters():
                    if "lora_B" in pname:
                        prm.copy_(torch.randn(prm.shape, generator=gen) * 0.02)
        path = root / "runs" / "bench" / "checkpoints" / f"checkpoint-{step}"
        model.save_pretrained(path)
        io.write_json(
            path / "oodcorr_checkpoint.json",
            {
                "run": "bench",
                "model": SMOLLM2,
                "model_path": info["path"],
                "revision": None,
                "step": step,
                "base_model_type": "llama",
            },
        )
        paths.append(path)
    return paths


def baseline(ckpts, sets, dtype, max_length, batch=8):
    """Paper-style: reload per checkpoint, pad to max_length, full logits at every position."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from oodcorr.modeling.model_loading import load_tokenizer
    from oodcorr.modeling.models import SMOLLM2, model_path
    from oodcorr.modeling.precision import resolve_dtype
    from oodcorr.modeling.prompts import Prompter

    out, t_load, t0 = {}, 0.0, time.perf_counter()
    for ck in ckpts:
        step = int(ck.name.split("-")[1])
        t = time.perf_counter()
        base = AutoModelForCausalLM.from_pretrained(model_path(SMOLLM2), dtype=resolve_dtype(dtype))
        model = PeftModel.from_pretrained(base, str(ck)).eval()
        tok = load_tokenizer(SMOLLM2)
        t_load += time.perf_counter() - t
        prompter = Prompter(tok, max_length=max_length)
        for name, rows in sets.items():
            seqs = prompter.encode([r["premise"] for r in rows], [r["hypothesis"] for r in rows])
            for i in range(0, len(seqs), batch):
                chunk = seqs[i : i + batch]
                ids = torch.full((len(chunk), max_length), tok.pad_token_id)
                mask = torch.zeros((len(chunk), max_length), dtype=torch.long)
                for j, s in enumerate(chunk):
                    ids[j, : len(s)] = torch.tensor(s)
                    mask[j, : len(s)] = 1
                with torch.no_grad():
                    logits = model(input_ids=ids, attention_mask=mask).logits  # [B, L, V]
                last = mask.sum(1) - 1
                logp = torch.log_softmax(logits[torch.arange(len(chunk)), last].float(), -1)[:, prompter.verbalizer_ids]
                for j, row in enumerate(rows[i : i + batch]):
                    out[(step, name, row["id"])] = (int(logp[j].argmax()), logp[j].tolist())
    return out, time.perf_counter() - t0, t_load


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=24, help="examples per testset")
    ap.add_argument("--checkpoints", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--dtype",
        default="fastest",
        help="fastest (the dtype with the higher measured matmul rate), "
        "auto (oodcorr's scoring default: bfloat16 on CUDA and on CPUs with native bf16, else float32), "
        "float32, bfloat16",
    )
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(HERE / "results" / "eval_throughput.json"))
    args = ap.parse_args(argv)
    if not NLI.is_dir():
        sys.exit(f"no NLI data at {NLI}")
    import torch

    torch.set_num_threads(args.threads)
    import oodcorr.evaluate.scoring as scoring
    from oodcorr.core import io
    from oodcorr.evaluate.stage import evaluate_run
    from oodcorr.modeling.precision import resolve_dtype
    from oodcorr.settings.config import load_params

    device = "cuda" if torch.cuda.is_available() else "cpu"
    rates = {d: matmul_rate(getattr(torch, d), device) for d in ("float32", "bfloat16")}
    if args.dtype == "fastest":
        args.dtype = max(rates, key=rates.get)
    dtype = str(resolve_dtype(args.dtype)).replace("torch.", "")
    sets = load_testsets(args.n, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{root / 'mlflow.db'}"
        ckpts = make_project(root, sets, args.checkpoints, args.dtype, args.max_length)
        params = load_params(root / "params.yaml")
        from oodcorr.tracking import store as tracking

        tracking.setup(params)  # create the MLflow store outside the timed region (a one-off per project)
        score_time, real_tokens, orig = [0.0], [0], scoring.score

        def timed(model, seqs, *a, **k):
            t = time.perf_counter()
            res = orig(model, seqs, *a, **k)
            score_time[0] += time.perf_counter() - t
            real_tokens[0] += sum(len(s) for s in seqs)
            return res

        scoring.score = timed
        t = time.perf_counter()
        evaluate_run(params, "bench", quiet=True)
        fast_s = time.perf_counter() - t
        scoring.score = orig
        import pandas as pd

        fast = {}
        for ck in ckpts:
            step = int(ck.name.split("-")[1])
            for name in sets:
                df = pd.read_parquet(
                    root / "runs" / "bench" / "eval" / "predictions" / f"step-{step}" / f"{name}.parquet"
                )
                for r in df.itertuples():
                    fast[(step, name, r.id)] = (
                        int(r.prediction == "non_entailment"),
                        [r.logp_entailment, r.logp_non_entailment],
                    )
        base, base_s, base_load = baseline(ckpts, sets, dtype, args.max_length)
    n_ex = len(fast)
    agree = sum(fast[k][0] == base[k][0] for k in fast) / n_ex
    # flips happen only where the two verbaliser log-probs are within the dtype's rounding noise
    flip_margins = sorted(abs(base[k][1][0] - base[k][1][1]) for k in fast if fast[k][0] != base[k][0])
    max_diff = max(abs(a - b) for k in fast for a, b in zip(fast[k][1], base[k][1]))
    from oodcorr.modeling.model_loading import load_base_model
    from oodcorr.modeling.models import SMOLLM2

    model, _, _ = load_base_model(SMOLLM2, quantization="none", dtype="float32")
    n_params = sum(p.numel() for p in model.parameters())
    head = model.get_output_embeddings().weight.numel()
    conventional = 2 * n_params * real_tokens[0] / 1e9  # 2 * params * real tokens
    executed = (2 * (n_params - head) * real_tokens[0] + 2 * head * n_ex) / 1e9  # output layer at one row/example
    rate = rates[dtype] if dtype in rates else rates["float32"]
    res = {
        "device": device,
        "cpu": platform.processor() or platform.machine(),
        "threads": args.threads,
        "dtype": dtype,
        "model": SMOLLM2,
        "n_params": n_params,
        "checkpoints": args.checkpoints,
        "testsets": list(sets),
        "n_per_testset": args.n,
        "examples": n_ex,
        "real_tokens": real_tokens[0],
        "max_length": args.max_length,
        "matmul_gflop_s": rates,
        "fast": {
            "seconds_end_to_end": fast_s,
            "seconds_scoring": score_time[0],
            "examples_per_s": n_ex / fast_s,
            "examples_per_s_scoring": n_ex / score_time[0],
            "gflop_s_conventional": conventional / score_time[0],
            "gflop_s_executed": executed / score_time[0],
            "fraction_of_matmul_conventional": conventional / score_time[0] / rate,
            "fraction_of_matmul_executed": executed / score_time[0] / rate,
        },
        "baseline": {
            "seconds_end_to_end": base_s,
            "seconds_model_loading": base_load,
            "examples_per_s": n_ex / base_s,
            "examples_per_s_excluding_reload": n_ex / (base_s - base_load),
        },
        "ratio_end_to_end": base_s / fast_s,
        "ratio_scoring_only": (base_s - base_load) / score_time[0],
        "prediction_agreement": agree,
        "disagreements": len(flip_margins),
        "disagreement_baseline_margins": flip_margins,
        "max_abs_logp_diff": max_diff,
    }
    # one file, one entry per dtype measured (the latest run also at the top level)
    old = json.loads(Path(args.out).read_text()) if Path(args.out).exists() else {}
    runs = old.get("runs") or ({old["dtype"]: {k: v for k, v in old.items() if k != "runs"}} if "dtype" in old else {})
    runs[dtype] = res
    io.write_json(args.out, {**res, "runs": runs})
    print(
        f"dtype {dtype}, {device}, {args.threads} threads; {n_ex} examples "
        f"({args.checkpoints} ckpts x {len(sets)} testsets x {args.n}), "
        f"{real_tokens[0]} real tokens"
    )
    print(f"matmul: float32 {rates['float32']:.0f} GFLOP/s, bfloat16 {rates['bfloat16']:.0f} GFLOP/s")
    print(
        f"fast:     {res['fast']['examples_per_s']:.1f} ex/s end-to-end, "
        f"{res['fast']['examples_per_s_scoring']:.1f} ex/s scoring; "
        f"{res['fast']['gflop_s_conventional']:.0f} GFLOP/s (2*params*tokens) = "
        f"{res['fast']['fraction_of_matmul_conventional']:.0%} "
        f"of {dtype} matmul; executed {res['fast']['gflop_s_executed']:.0f} GFLOP/s = "
        f"{res['fast']['fraction_of_matmul_executed']:.0%}"
    )
    print(
        f"baseline: {res['baseline']['examples_per_s']:.2f} ex/s end-to-end, "
        f"{res['baseline']['examples_per_s_excluding_reload']:.2f} ex/s excluding reloads"
    )
    print(
        f"ratio: {res['ratio_end_to_end']:.1f}x end-to-end, {res['ratio_scoring_only']:.1f}x scoring only; "
        f"agreement {agree:.2%} ({len(flip_margins)} flips, baseline margins {[round(m, 3) for m in flip_margins]}), "
        f"max |dlogp| {max_diff:.2e} -> {args.out}"
    )


if __name__ == "__main__":
    main()
