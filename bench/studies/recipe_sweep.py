#!/usr/bin/env python3
"""The recipe sweep behind the `real` preset's training defaults (results: docs/recipe-sweep.md).

    OMP_NUM_THREADS=1 python bench/studies/recipe_sweep.py --config B [--config A ...] [--scratch /tmp/oodcorr-sweep]
    python bench/studies/recipe_sweep.py --report docs/recipe-sweep.md     # table from the recorded results

Each config trains one run with oodcorr's own training code (`oodcorr.train.train_run`, the function behind
`oodcorr train`) in a scratch project whose params are the `real` preset plus the config's overrides, keeping
only checkpoints 0 and final, and scores MNLI dev-matched (mnli_real, neutral dropped: entailment vs
contradiction, N items stratified) with oodcorr's scorer (`oodcorr.scoring.score`, as `oodcorr evaluate`).
Step 0 is scored once per model on the base model: a LoRA adapter at step 0 has B = 0, so its predictions
are the base model's. Results are appended to <scratch>/sweep.jsonl (one line per config).

Why not `dvc exp run`: on this 2-core machine one optimizer step of a 135M model takes ~10 s; `dvc exp run`
in a temp copy re-prepares the data and re-evaluates every checkpoint (step 0 included) of every experiment,
which would have doubled the sweep's cost. The equivalent experiment is
`dvc exp run -S train.lr=... -S train.loss=... -S train.max_steps=... -S runs.<key>.shots=...` on a project
written by `oodcorr study use real`.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
ALL = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
BASE = {"batch_size": 8, "max_length": 128, "warmup_ratio": 0.1, "lora": {"r": 8, "alpha": 32, "dropout": 0.1}}
# name -> (model, overrides). A = the failed attempt (lr 1e-3, 40 steps, 64 shots, full vocab, attention).
CONFIGS = {
    "A": ("smollm2-135m", dict(lr=1e-3, max_steps=40, shots=64, loss="full_vocab", targets="auto")),
    "B": ("smollm2-135m", dict(lr=2e-3, max_steps=40, shots=128, loss="verbalizer", targets="all")),
    "C": ("smollm2-135m", dict(lr=2e-3, max_steps=40, shots=128, loss="full_vocab", targets="all")),
    "D": ("smollm2-135m", dict(lr=3e-3, max_steps=60, shots=128, loss="verbalizer", targets="all")),
    "E": ("smollm2-135m", dict(lr=2e-3, max_steps=40, shots=128, loss="verbalizer", targets="auto")),
    "GB": ("gemma3-270m", dict(lr=2e-3, max_steps=40, shots=128, loss="verbalizer", targets="all")),
    "GD": ("gemma3-270m", dict(lr=3e-3, max_steps=60, shots=128, loss="verbalizer", targets="all")),
    # more data, not more passes: 1,024 shots seen once (batch 16 x 64 steps)
    "F": ("smollm2-135m", dict(lr=2e-3, max_steps=64, shots=1024, loss="verbalizer", targets="all", batch_size=16)),
    "GF": (
        "gemma3-270m",
        dict(lr=1e-3, max_steps=64, shots=1024, loss="verbalizer", targets="all", batch_size=16, warmup_ratio=0.2),
    ),
}


def project(scratch: Path, n_eval: int) -> dict:
    from oodcorr.settings.config import load_params
    from oodcorr.study import load_preset

    tree = load_preset("real")
    tree.pop("runs", None)
    for spec in tree["data"]["testsets"].values():
        spec["path"] = str(REPO / spec["path"])
    tree["data"]["max_examples"] = n_eval
    tree["data"]["prepare"] = ["mnli_real_train", "mnli_real"]
    tree["study"]["name"] = "recipe-sweep"
    tree["study"]["tracking_uri"] = f"sqlite:///{scratch / 'mlflow.db'}"
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "params.yaml").write_text(yaml.safe_dump(tree, sort_keys=False))
    params = load_params(scratch / "params.yaml")
    if not (scratch / "data/prepared/manifest.json").exists():
        from oodcorr.data.prepare import prepare

        prepare(params, None, ["mnli_real_train", "mnli_real"])
    return params


def score_mnli(params, model_name: str, adapter: Path | None) -> tuple[float, int]:
    import numpy as np

    from oodcorr.evaluate.scoring import score
    from oodcorr.modeling import model_loading
    from oodcorr.modeling.prompts import Prompter
    from oodcorr.records.prepared import load_prepared, prepared_dir

    rows = load_prepared(prepared_dir(params), "mnli_real")
    model, tok, _ = model_loading.load_base_model(model_name)
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter))
    pr = Prompter(tok, max_length=params["train"]["max_length"])
    _, preds = score(
        model,
        pr.encode([r["premise"] for r in rows], [r["hypothesis"] for r in rows]),
        pr.verbalizer_ids,
        tok.pad_token_id,
    )
    gold = np.array(pr.label_ids([r["label"] for r in rows]))
    return float((preds == gold).mean()), len(rows)


def run_config(name: str, scratch: Path, n_eval: int) -> dict:
    from oodcorr.settings.config import load_params
    from oodcorr.train.stage import train_run

    model, o = CONFIGS[name]
    params = project(scratch, n_eval)
    res_file = scratch / "sweep.jsonl"
    done = [json.loads(x) for x in res_file.read_text().splitlines()] if res_file.exists() else []
    base0 = next((d for d in done if d["model"] == model and d.get("acc0") is not None), None)
    if base0 is None:
        t = time.time()
        acc0, n = score_mnli(params, model, None)
        base0 = {"acc0": acc0, "n": n, "eval_s": round(time.time() - t, 1)}
    key = f"{name}_{model}"
    run = {
        "model": model,
        "train_set": "mnli_real_train",
        "id_testset": "mnli_real",
        "shots": o["shots"],
        "data_seed": 0,
        "seed": 0,
        "lr": o["lr"],
        "loss": o["loss"],
        "max_steps": o["max_steps"],
        "lora": {**BASE["lora"], "target_modules": ALL if o["targets"] == "all" else "auto"},
        "checkpoints": {"every": o["max_steps"] // 2, "log_spaced": None},
        "quiet": True,
    }
    tree = yaml.safe_load((scratch / "params.yaml").read_text())
    tree["train"].update({k: v for k, v in BASE.items() if k != "lora"})
    tree["train"].update({k: o[k] for k in ("batch_size", "warmup_ratio") if k in o})
    tree["runs"] = {key: run}
    (scratch / "params.yaml").write_text(yaml.safe_dump(tree, sort_keys=False))
    params = load_params(scratch / "params.yaml")
    t = time.time()
    train_run(params, key)
    train_s = time.time() - t
    t = time.time()
    acc, n = score_mnli(params, model, scratch / "runs" / key / "checkpoints" / f"checkpoint-{o['max_steps']}")
    rec = {
        "config": name,
        "model": model,
        **o,
        "batch_size": o.get("batch_size", BASE["batch_size"]),
        "acc0": base0["acc0"],
        "acc": acc,
        "n": n,
        "train_s": round(train_s, 1),
        "s_per_step": round(train_s / o["max_steps"], 2),
        "eval_s": round(time.time() - t, 1),
        "step0_eval_s": base0.get("eval_s"),
    }
    with res_file.open("a") as f:
        f.write(json.dumps(rec) + "\n")
    print(json.dumps(rec), flush=True)
    return rec


def report(scratch: Path) -> str:
    recs = [json.loads(x) for x in (scratch / "sweep.jsonl").read_text().splitlines() if x.strip()]
    lines = [
        "| config | model | lr | warm-up | batch | steps | shots | loss | LoRA targets | step-0 acc | final acc | "
        "gain | "
        "SE (final) | train s/step |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in recs:
        se = math.sqrt(r["acc"] * (1 - r["acc"]) / r["n"])
        lines.append(
            f"| {r['config']} | {r['model']} | {r['lr']:g} | {r.get('warmup_ratio', BASE['warmup_ratio']):g} | "
            f"{r.get('batch_size', BASE['batch_size'])} | {r['max_steps']} | {r['shots']} | {r['loss']} | "
            f"{'all linear' if r['targets'] == 'all' else 'attention (auto)'} | {r['acc0']:.3f} | {r['acc']:.3f} | "
            f"{100 * (r['acc'] - r['acc0']):+.1f} pts | {se:.3f} (N={r['n']}) | {r['s_per_step']} |"
        )
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", action="append", default=[], choices=sorted(CONFIGS))
    ap.add_argument("--scratch", type=Path, default=Path("/tmp/oodcorr-sweep"))
    ap.add_argument("--n-eval", type=int, default=400)
    ap.add_argument("--report", action="store_true")
    a = ap.parse_args()
    for c in a.config:
        run_config(c, a.scratch, a.n_eval)
    if a.report:
        print(report(a.scratch))


if __name__ == "__main__":
    main()
