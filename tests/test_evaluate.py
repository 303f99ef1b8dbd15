"""Evaluate stage: the fast scorer equals a straightforward evaluator, adapter swapping equals fresh loading,
metrics, cache reuse, MLflow steps, 2-process sharding and bad inputs. Tiny models, own checkpoints/data."""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from oodcorr.core import io

REPO = Path(__file__).resolve().parents[1]
WORDS = "the a doctor lawyer artist saw helped park station never not who thinks quickly red big".split()


def _rows(name, n, seed, slices=False):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        prem = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 25)))
        hyp = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 8)))
        label = "entailment" if i % 2 else "non_entailment"
        rows.append(
            {
                "id": f"{name}-{i}",
                "premise": prem,
                "hypothesis": hyp,
                "label": label,
                "original_label": label,
                "slice": f"{'hA' if i % 3 else 'hB'}/{label}" if slices else None,
            }
        )
    return rows


def write_testset(root: Path, name: str, rows: list[dict]) -> None:
    out = root / "data" / "prepared"
    io.write_jsonl(out / f"{name}.jsonl", rows)
    mpath = out / "manifest.json"
    manifest = json.loads(mpath.read_text()) if mpath.exists() else {"testsets": {}}
    manifest["testsets"][name] = {
        "rows": len(rows),
        "label_counts": {},
        "sha256": io.sha256_file(out / f"{name}.jsonl"),
        "source": "test",
    }
    io.write_json(mpath, manifest)


def make_checkpoint(root: Path, run: str, step: int, model="tiny-olmo2") -> Path:
    import torch

    from oodcorr.modeling.model_loading import add_lora, load_base_model

    base, _, info = load_base_model(model, quantization="none", dtype="float32")
    peft_model = add_lora(base, {"r": 4, "alpha": 8, "dropout": 0.0})
    if step:
        gen = torch.Generator().manual_seed(step)
        with torch.no_grad():
            for name, p in peft_model.named_parameters():
                if "lora_B" in name:
                    p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    path = root / "runs" / run / "checkpoints" / f"checkpoint-{step}"
    peft_model.save_pretrained(path)
    io.write_json(
        path / "oodcorr_checkpoint.json",
        {
            "run": run,
            "model": model,
            "model_path": info["path"],
            "revision": None,
            "step": step,
            "base_model_type": info["model_type"],
        },
    )
    return path


def make_project(root: Path, steps=(0, 5), testsets=("idt", "ood"), model="tiny-olmo2", run="r1") -> Path:
    declared = {
        n: {"path": f"raw/{n}.jsonl", "premise": "premise", "hypothesis": "hypothesis", "label": "label"}
        for n in (*testsets, "extra")
    }
    params = {
        "study": {"name": "t"},
        "data": {"out": "data/prepared", "testsets": declared},
        "train": {"dtype": "float32", "quantization": "none", "max_length": 48},
        "runs": {run: {"model": model, "train_set": "idt", "id_testset": "idt", "shots": 8}},
        "evaluate": {"testsets": [t for t in testsets if t != "idt"], "batch_size": "auto"},
    }
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    for i, name in enumerate(testsets):
        write_testset(root, name, _rows(name, 14 + 3 * i, seed=i, slices=(name == "ood")))
    for s in steps:
        make_checkpoint(root, run, s, model)
    return root / "params.yaml"


def reference_scores(model_name, ckpt: Path, rows, max_length=48, batch=3):
    """The straightforward evaluator: fresh model + adapter, full forward, full logits, logits[i, last_i]."""
    import torch
    from peft import PeftModel

    from oodcorr.modeling.model_loading import load_base_model
    from oodcorr.modeling.prompts import Prompter, pad_batch

    base, tok, _ = load_base_model(model_name, quantization="none", dtype="float32")
    model = PeftModel.from_pretrained(base, str(ckpt)).eval()
    prompter = Prompter(tok, max_length=max_length)
    seqs = prompter.encode([r["premise"] for r in rows], [r["hypothesis"] for r in rows])
    out = []
    with torch.no_grad():
        for i in range(0, len(seqs), batch):
            ids, mask, last = pad_batch(seqs[i : i + batch], tok.pad_token_id)
            logits = model(input_ids=ids, attention_mask=mask).logits
            logp = torch.log_softmax(logits[torch.arange(len(last)), last].float(), -1)
            out.append(logp[:, prompter.verbalizer_ids])
    logp = torch.cat(out).numpy()
    return logp, logp.argmax(1)


def _params(path):
    from oodcorr.settings.config import load_params

    return load_params(path)


@pytest.mark.parametrize("model", ["tiny-olmo2", "tiny-opt"])
def test_fast_scorer_equals_straightforward(tmp_path, model):
    import numpy as np
    from peft import PeftModel

    from oodcorr.evaluate.scoring import score
    from oodcorr.modeling.model_loading import load_base_model
    from oodcorr.modeling.prompts import Prompter

    ck = make_checkpoint(tmp_path, "r", 3, model)
    rows = _rows("x", 23, seed=7)
    ref_logp, ref_pred = reference_scores(model, ck, rows)
    base, tok, _ = load_base_model(model, quantization="none", dtype="float32")
    peft_model = PeftModel.from_pretrained(base, str(ck))
    seqs = Prompter(tok, max_length=48).encode([r["premise"] for r in rows], [r["hypothesis"] for r in rows])
    for bs in ("auto", 4):
        logp, pred = score(peft_model, seqs, Prompter(tok).verbalizer_ids, tok.pad_token_id, bs)
        np.testing.assert_allclose(logp, ref_logp, atol=1e-4)
        assert (pred == ref_pred).all()


def test_metrics_by_hand():
    from oodcorr.evaluate.scoring import metrics, metrics_by_slice

    lab = ["entailment", "entailment", "non_entailment", "non_entailment", "non_entailment"]
    pre = ["entailment", "non_entailment", "non_entailment", "non_entailment", "entailment"]
    m = metrics(lab, pre)
    # non_entailment: tp=2 fp=1 fn=1 -> 4/6; entailment: tp=1 fp=1 fn=1 -> 2/4
    assert m["accuracy"] == pytest.approx(3 / 5) and m["n"] == 5
    assert m["f1_non_entailment"] == pytest.approx(2 / 3)
    assert m["macro_f1"] == pytest.approx((2 / 3 + 1 / 2) / 2)
    assert metrics(["entailment"] * 3, ["entailment"] * 3)["f1_non_entailment"] == 0.0
    parts = metrics_by_slice(lab, pre, ["s1", "s1", "s2", "s2", None])
    assert [p[0] for p in parts] == [None, "s1", "s2"]
    assert parts[1][1]["accuracy"] == 0.5 and parts[2][1]["accuracy"] == 1.0 and parts[2][1]["n"] == 2


def test_evaluate_swaps_adapters_caches_and_logs(tmp_path, mlflow_uri):
    import mlflow
    import numpy as np
    import pandas as pd

    from oodcorr.evaluate.stage import evaluate_run

    pfile = make_project(tmp_path, steps=(0, 5, 9))
    # training still running: scheduled steps beyond the newest checkpoint are not "missing"
    io.write_json(
        tmp_path / "runs" / "r1" / "run.json", {"run": "r1", "checkpoint_steps": [0, 5, 9, 100], "finished": False}
    )
    res = evaluate_run(_params(pfile), "r1", quiet=True)
    assert len(res["scored"]) == 6 and res["cached"] == 0 and not res["failed"]
    ev = tmp_path / "runs" / "r1" / "eval"
    # adapter swapping in one process == loading each checkpoint fresh (straightforward evaluator)
    for step in (0, 5, 9):
        for name in ("idt", "ood"):
            rows = io.read_jsonl(tmp_path / "data" / "prepared" / f"{name}.jsonl")
            df = pd.read_parquet(ev / "predictions" / f"step-{step}" / f"{name}.parquet")
            ref_logp, ref_pred = reference_scores("tiny-olmo2", ev.parent / "checkpoints" / f"checkpoint-{step}", rows)
            assert list(df.columns) == ["id", "label", "prediction", "logp_entailment", "logp_non_entailment", "slice"]
            assert list(df["id"]) == [r["id"] for r in rows]
            np.testing.assert_allclose(df[["logp_entailment", "logp_non_entailment"]].to_numpy(), ref_logp, atol=1e-4)
            assert list(df["prediction"]) == [("entailment", "non_entailment")[p] for p in ref_pred]
    metrics = io.read_jsonl(ev / "metrics.jsonl")
    keys = [(m["step"], m["testset"], m["slice"] or "") for m in metrics]
    assert keys == sorted(keys) and {m["step"] for m in metrics} == {0, 5, 9}
    assert {
        "run",
        "model",
        "train_set",
        "id_testset",
        "shots",
        "seed",
        "step",
        "testset",
        "slice",
        "accuracy",
        "f1_non_entailment",
        "macro_f1",
        "n",
    } <= set(metrics[0])
    assert {m["slice"] for m in metrics if m["testset"] == "ood"} == {
        None,
        "hA/entailment",
        "hA/non_entailment",
        "hB/entailment",
        "hB/non_entailment",
    }
    # every metric of the table from the stored log-probs, per testset and slice (checked independently)
    from oodcorr.stats.metrics import METRICS

    assert set(METRICS) | {"n_entailment"} <= set(metrics[0])
    row = next(m for m in metrics if (m["step"], m["testset"], m["slice"]) == (9, "ood", None))
    df = pd.read_parquet(ev / "predictions" / "step-9" / "ood.parquet")
    by = (df["logp_entailment"] - df["logp_non_entailment"]).groupby(df["label"]).mean()
    assert row["balanced_margin"] == pytest.approx(0.5 * (by["entailment"] - by["non_entailment"]), abs=1e-5)
    recall = (df["prediction"] == df["label"]).groupby(df["label"]).mean()
    assert row["balanced_accuracy"] == pytest.approx(recall.mean(), abs=1e-9)
    assert row["yes_rate"] == pytest.approx((df["prediction"] == "entailment").mean(), abs=1e-9)
    assert row["n_entailment"] == int((df["label"] == "entailment").sum())
    one = next(m for m in metrics if m["slice"] == "hA/entailment")  # a slice with one gold class
    assert math.isnan(one["balanced_margin"]) and math.isnan(one["auc"]) and one["accuracy"] == one["accuracy"]
    assert (ev / "accuracy.csv").read_text().splitlines()[0] == "step,testset,accuracy"
    assert len((ev / "accuracy.csv").read_text().splitlines()) == 7
    assert json.loads((ev / "summary.json").read_text())["step"] == 9

    # rerun: nothing scored, no duplicate MLflow steps
    res2 = evaluate_run(_params(pfile), "r1", quiet=True)
    assert res2["scored"] == [] and res2["cached"] == 6 and res2["mlflow_logged"] == 0
    # a new checkpoint costs only its pairs; a new testset only its pairs
    make_checkpoint(tmp_path, "r1", 12)
    assert sorted(evaluate_run(_params(pfile), "r1", quiet=True)["scored"]) == [(12, "idt"), (12, "ood")]
    write_testset(tmp_path, "extra", _rows("extra", 9, seed=42))
    res4 = evaluate_run(_params(pfile), "r1", testsets=["ood", "extra"], quiet=True)
    assert sorted(res4["scored"]) == [(s, "extra") for s in (0, 5, 9, 12)]

    client = mlflow.MlflowClient(mlflow_uri)
    for key in ("acc/idt", "f1/ood", "f1_non/ood", "slices/ood/hA/entailment/acc", "bm/ood", "auc/idt", "yes/ood"):
        steps = [m.step for m in client.get_metric_history(res["mlflow_run_id"], key)]
        assert sorted(steps) == [0, 5, 9, 12], key
    assert sorted(m.step for m in client.get_metric_history(res["mlflow_run_id"], "acc/extra")) == [0, 5, 9, 12]
    run = client.get_run(res["mlflow_run_id"])
    assert run.data.tags["oodcorr.kind"] == "train" and run.data.tags["oodcorr.run_key"] == "r1"
    assert [a.path for a in client.list_artifacts(res["mlflow_run_id"], "eval")] == [
        "eval/accuracy_by_testset.png",
        "eval/predictions.tar.gz",
    ]


def test_two_processes_equal_one(tmp_path, mlflow_uri):
    from oodcorr.evaluate.stage import evaluate_run

    pfile = make_project(tmp_path, steps=(0, 4, 8))
    evaluate_run(_params(pfile), "r1", quiet=True)
    ev = tmp_path / "runs" / "r1" / "eval"
    single = io.read_jsonl(ev / "metrics.jsonl")
    shutil.rmtree(ev)
    # accelerate 1.x: `--cpu` goes through its single-process launcher unless an MPI hostfile is given, so
    # CPU multi-process = `--multi_gpu` (torchrun) with CUDA hidden; evaluate then joins a gloo group.
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "CUDA_VISIBLE_DEVICES": "",
    }
    cmd = [
        str(Path(sys.executable).parent / "accelerate"),
        "launch",
        "--num_processes",
        "2",
        "--multi_gpu",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "-m",
        "oodcorr",
        "evaluate",
        "--run",
        "r1",
        "--params",
        str(pfile),
    ]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "[rank 0/2]: scored 3 pair(s)" in proc.stdout and "[rank 1/2]: scored 3 pair(s)" in proc.stdout, proc.stdout
    assert io.read_jsonl(ev / "metrics.jsonl") == single
    assert len(list((ev / "cache").glob("*.parquet"))) == 6


def test_bad_checkpoints_are_named_and_the_rest_evaluated(tmp_path, mlflow_uri):
    from click.testing import CliRunner

    from oodcorr.cli import cli

    pfile = make_project(tmp_path, steps=(0, 3, 6, 9))
    cks = tmp_path / "runs" / "r1" / "checkpoints"
    (cks / "checkpoint-3" / "adapter_model.safetensors").write_bytes(b"\x00garbage")
    meta = json.loads((cks / "checkpoint-6" / "oodcorr_checkpoint.json").read_text())
    io.write_json(cks / "checkpoint-6" / "oodcorr_checkpoint.json", {**meta, "model": "tiny-opt"})
    io.write_json(tmp_path / "runs" / "r1" / "run.json", {"run": "r1", "checkpoint_steps": [0, 3, 6, 9, 12]})
    res = CliRunner().invoke(cli, ["evaluate", "--run", "r1", "--params", str(pfile), "--quiet"])
    assert res.exit_code == 2, res.output
    err = res.stderr.strip()
    assert err.count("\n") == 0 and err.startswith("error:")
    for name in ("checkpoint-3", "checkpoint-6", "checkpoint-12", "corrupt", "different base model", "missing"):
        assert name in err
    steps = {m["step"] for m in io.read_jsonl(tmp_path / "runs" / "r1" / "eval" / "metrics.jsonl")}
    assert steps == {0, 9}

    res = CliRunner().invoke(cli, ["evaluate", "--run", "r1", "--params", str(pfile), "--testsets", "nope", "--quiet"])
    assert res.exit_code == 2 and "nope" in res.stderr and "oodcorr data prepare" in res.stderr
    assert res.stderr.strip().count("\n") == 0


def test_out_of_memory_backoff_halves_and_retries(monkeypatch):
    import numpy as np
    import torch

    import oodcorr.evaluate.scoring as scoring

    sizes = []

    def fake(model, ids, mask, last):  # "OOM" above 3 rows; log-probs depend only on each row's content
        sizes.append(ids.shape[0])
        if ids.shape[0] > 3:
            raise torch.cuda.OutOfMemoryError("fake")
        out = torch.full((ids.shape[0], 10), -5.0)
        out[:, 2] = -(ids * mask).sum(1).float() % 7
        return out

    monkeypatch.setattr(scoring, "last_position_logprobs", fake)
    model = torch.nn.Linear(2, 2)
    seqs = [[i % 5 + 1] * (1 + i % 4) for i in range(11)]
    ref = scoring.score(model, seqs, [2, 3], 0, batch_size=1)
    sizes.clear()
    got = scoring.score(model, seqs, [2, 3], 0, batch_size=16)
    assert sizes[:3] == [11, 8, 4] and max(sizes[3:]) <= 2
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[1], ref[1])
