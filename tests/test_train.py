"""Train stage with tiny random models: loss goes down, checkpoints on schedule, resume is bit-exact,
MLflow holds one run with params once and unique metric steps, finished runs are no-ops."""

import json
import os
import subprocess
import sys

import pytest
import torch

from test_train_helpers import adapter, make_project


@pytest.fixture
def project(tmp_path, mlflow_uri, monkeypatch):
    return tmp_path


def _train(params_path, run):
    from oodcorr.settings.config import load_params
    from oodcorr.train.stage import train_run

    return train_run(load_params(params_path), run)


def _client(uri):
    import mlflow

    mlflow.set_tracking_uri(uri)
    return mlflow.MlflowClient()


def test_schedule_unit():
    from oodcorr.train.plan import checkpoint_schedule, plan_steps

    assert checkpoint_schedule(10, every=4) == [0, 4, 8, 10]
    assert checkpoint_schedule(100, log_spaced=5) == [0, 1, 3, 10, 32, 100]
    assert checkpoint_schedule(3, log_spaced=10) == [0, 1, 2, 3]
    plan = plan_steps(10, batch_size=4, grad_accum=2, epochs=2, max_steps=None, seed=1)
    assert len(plan) == 4 and [len(s) for s in plan] == [2, 1, 2, 1]
    assert sorted(i for step in plan[:2] for mb in step for i in mb) == list(range(10))
    assert plan == plan_steps(10, 4, 2, 2, None, 1) != plan_steps(10, 4, 2, 2, None, 2)
    assert len(plan_steps(10, 4, 1, 1, 7, 0)) == 7


def test_sampling():
    from oodcorr.core.errors import UserError
    from oodcorr.train.plan import sample_shots

    pool = [{"id": i, "label": "entailment" if i < 30 else "non_entailment"} for i in range(40)]
    got = sample_shots(pool, 16, "balanced", 3)
    assert sum(r["label"] == "entailment" for r in got) == 8
    assert got == sample_shots(pool, 16, "balanced", 3) != sample_shots(pool, 16, "balanced", 4)
    assert len({r["id"] for r in sample_shots(pool, 40, "uniform", 0)}) == 40
    with pytest.raises(UserError, match="needs 11 non_entailment"):
        sample_shots(pool, 22, "balanced", 0)
    with pytest.raises(UserError, match="only 40"):
        sample_shots(pool, 41, "uniform", 0)


def test_loss_decreases_and_checkpoints(project, mlflow_uri):
    p = make_project(project, {"a": {"max_steps": 24, "checkpoints": {"every": None, "log_spaced": 5}}})
    rec = _train(p, "a")
    run_dir = project / "runs" / "a"
    assert rec["checkpoint_steps"] == [0, 1, 2, 5, 11, 24] and rec["finished"] and rec["total_steps"] == 24
    dirs = sorted(int(d.name.split("-")[1]) for d in (run_dir / "checkpoints").iterdir())
    assert dirs == rec["checkpoint_steps"]
    with_state = [d.name for d in (run_dir / "checkpoints").iterdir() if (d / "training_state.json").exists()]
    assert with_state == []  # only the newest checkpoint keeps it, and a finished run drops it
    meta = json.loads((run_dir / "checkpoints" / "checkpoint-5" / "oodcorr_checkpoint.json").read_text())
    assert {"run", "model", "model_path", "revision", "step", "base_model_type"} <= set(meta) and meta["step"] == 5
    assert all(not t.any() for k, t in adapter(run_dir, 0).items() if "lora_B" in k)  # step 0 = untouched base
    saved = json.loads((run_dir / "run.json").read_text())
    assert len(saved["example_ids"]) == 32 and "mlflow_run_id" not in saved  # per machine: not in run.json
    assert saved["model_info"]["path"] == "tiny-olmo2" and meta["model_path"] == "tiny-olmo2"
    acfg = json.loads((run_dir / "checkpoints" / "checkpoint-5" / "adapter_config.json").read_text())
    assert acfg["base_model_name_or_path"] == "tiny-olmo2"
    assert acfg["target_modules"] == sorted(acfg["target_modules"])  # not set order (PYTHONHASHSEED)
    assert "/" not in json.dumps(saved["model_info"]) + json.dumps(meta)  # no machine path anywhere
    from oodcorr.settings.config import load_params
    from oodcorr.tracking.mirror import mlflow_run_id

    assert mlflow_run_id(load_params(p), "a") == rec["mlflow_run_id"]

    client = _client(mlflow_uri)
    hist = sorted((m.step, m.value) for m in client.get_metric_history(rec["mlflow_run_id"], "train/loss"))
    assert [s for s, _ in hist] == list(range(1, 25))
    # A random tiny model has frozen ~0.02-scale tied embeddings, so full-vocab CE starts at ln(49152) = 10.8
    # and LoRA can lift the verbaliser logits by well under one nat: a clear but small drop.
    first, last = sum(v for _, v in hist[:4]) / 4, sum(v for _, v in hist[-4:]) / 4
    assert last < first and hist[0][1] - last > 0.3, hist
    run = client.get_run(rec["mlflow_run_id"])
    assert run.data.tags["oodcorr.run_key"] == "a" and run.data.tags["oodcorr.kind"] == "train"
    assert run.data.tags["oodcorr.model"] == "tiny-olmo2" and run.data.tags["oodcorr.model_revision"].startswith(
        "sha256:"
    )
    assert run.data.params["lr"] == "0.005" and run.data.params["lora.r"] == "8"
    assert len(client.get_metric_history(rec["mlflow_run_id"], "train/lr")) == 24
    assert "run.json" in [a.path for a in client.list_artifacts(rec["mlflow_run_id"])]

    # finished + same config -> no-op; quiet is not part of the identity
    before = {d.name: d.stat().st_mtime_ns for d in (run_dir / "checkpoints").iterdir()}
    assert _train(p, "a")["mlflow_run_id"] == rec["mlflow_run_id"]
    assert before == {d.name: d.stat().st_mtime_ns for d in (run_dir / "checkpoints").iterdir()}


def test_resume_after_kill_is_exact(project, mlflow_uri, tmp_path_factory, monkeypatch):
    # one thread count for all three trainings: with `auto`, each picks the cores idle at its start, and a sum over
    # two threads is not bit-identical to one over one, so a loaded machine would fail this for the wrong reason
    monkeypatch.setenv("OODCORR_THREADS", "1")
    runs = {"r": {"max_steps": 10, "checkpoints": {"every": 3}}}
    ref_root = tmp_path_factory.mktemp("ref")
    ref = make_project(ref_root, runs)
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{ref_root / 'mlflow.db'}"
    _train(ref, "r")
    os.environ["MLFLOW_TRACKING_URI"] = mlflow_uri

    p = make_project(project, runs)
    env = {**os.environ, "OODCORR_TEST_KILL_AT_STEP": "7", "MLFLOW_TRACKING_URI": mlflow_uri}
    cmd = [sys.executable, "-m", "oodcorr", "train", "--run", "r", "--params", str(p), "--quiet"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 137, proc.stderr[-2000:]
    ck = project / "runs" / "r" / "checkpoints"
    assert sorted(d.name for d in ck.iterdir()) == ["checkpoint-0", "checkpoint-3", "checkpoint-6"]
    assert [d.name for d in ck.iterdir() if (d / "training_state.json").exists()] == ["checkpoint-6"]
    (ck / ".checkpoint-9.abc.tmp").mkdir()  # as left by a kill during a checkpoint write
    assert not json.loads((project / "runs" / "r" / "run.json").read_text())["finished"]

    rec = _train(p, "r")  # rerun: continues from checkpoint-6
    want, got = adapter(ref_root / "runs" / "r", 10), adapter(project / "runs" / "r", 10)
    assert want.keys() == got.keys() and all(torch.equal(want[k], got[k]) for k in want)
    assert sorted(d.name for d in ck.iterdir()) == [f"checkpoint-{s}" for s in (0, 10, 3, 6, 9)]

    client = _client(mlflow_uri)
    assert len(client.search_runs([client.get_experiment_by_name("oodcorr/test").experiment_id])) == 1
    steps = [m.step for m in client.get_metric_history(rec["mlflow_run_id"], "train/loss")]
    assert sorted(steps) == list(range(1, 11))  # step 7 was logged before the kill, not again after


def test_config_change_starts_fresh(project, mlflow_uri):
    p = make_project(project, {"c": {"max_steps": 4}})
    first = _train(p, "c")
    p.write_text(p.read_text().replace("lr: 0.005", "lr: 0.001"))
    second = _train(p, "c")
    assert second["mlflow_run_id"] != first["mlflow_run_id"] and second["config"]["lr"] == 0.001
    client = _client(mlflow_uri)
    assert client.get_run(first["mlflow_run_id"]).data.tags["oodcorr.kind"] == "train-superseded"
    exp_id = client.get_experiment_by_name("oodcorr/test").experiment_id
    active = client.search_runs(
        [exp_id], filter_string="tags.`oodcorr.run_key` = 'c' and tags.`oodcorr.kind` = 'train'"
    )
    assert [r.info.run_id for r in active] == [second["mlflow_run_id"]]  # the lookup by run key finds only the new run
    pool = project / "data" / "prepared" / "synth_train.jsonl"  # re-prepared data with other rows
    pool.write_text(pool.read_text().replace("walked to", "drove to"))
    third = _train(p, "c")
    assert third["mlflow_run_id"] != second["mlflow_run_id"] and third["examples_sha256"] != second["examples_sha256"]


def test_full_finetune_and_nf4_runs(project):
    p = make_project(
        project,
        {
            "full": {"finetune": "full", "max_steps": 2, "checkpoints": {"every": 2}},
            "gc": {"gradient_checkpointing": True, "max_steps": 2, "lora": {"dropout": 0.0}},
            "q": {"model": "tiny-opt", "quantization": "nf4", "max_steps": 3, "loss": "verbalizer", "grad_accum": 2},
        },
    )
    _train(p, "full")
    assert (project / "runs" / "full" / "checkpoints" / "checkpoint-2" / "model.safetensors").exists()
    _train(p, "gc")
    g0, g2 = adapter(project / "runs" / "gc", 0), adapter(project / "runs" / "gc", 2)
    assert all(not torch.equal(g0[k], g2[k]) for k in g0 if "lora_B" in k)
    rec = _train(p, "q")
    assert rec["model_info"]["quantization"] == "nf4"
    a0, a3 = adapter(project / "runs" / "q", 0), adapter(project / "runs" / "q", 3)
    assert all(not torch.equal(a0[k], a3[k]) for k in a0 if "lora_B" in k)


def test_a_deleted_checkpoint_is_rebuilt_from_the_nearest_kept_state(project, mlflow_uri, capfd):
    """A finished run whose checkpoint-6 is deleted trains again from checkpoint-3's kept state to step 6 only
    (one interval): every checkpoint file equals the original, the later ones are not rewritten; without kept
    states it falls back to step 0 and still equals the original."""
    import shutil

    p = make_project(project, {"d": {"max_steps": 12, "checkpoints": {"every": 3}}})
    _train(p, "d")
    run_dir = project / "runs" / "d"
    ck = run_dir / "checkpoints"

    def files():
        return {str(f.relative_to(ck)): f.read_bytes() for f in sorted(ck.rglob("*")) if f.is_file()}

    original = files()
    assert not [f for f in original if "training_state" in f]  # states live outside the DVC output
    # each checkpoint's training state, and the thread count the run trains with on this machine (threads.keep)
    assert sorted(d.name for d in (run_dir / "resume").iterdir()) == [
        *(f"checkpoint-{s}" for s in (0, 12, 3, 6, 9)),
        "threads.json",
    ]
    later = {s: (ck / f"checkpoint-{s}" / "adapter_model.safetensors").stat().st_mtime_ns for s in (0, 3, 9, 12)}
    capfd.readouterr()

    shutil.rmtree(ck / "checkpoint-6")
    rec = _train(p, "d")
    err = capfd.readouterr().err
    assert "checkpoint-6 missing or incomplete" in err and "from checkpoint-3 to step 6" in err, err
    assert files() == original and rec["finished"]
    assert later == {s: (ck / f"checkpoint-{s}" / "adapter_model.safetensors").stat().st_mtime_ns for s in later}
    losses = [
        r["step"]
        for r in map(json.loads, (run_dir / "tracking" / "train.jsonl").read_text().splitlines())
        if r.get("key") == "train/loss"
    ]
    assert sorted(losses) == sorted(list(range(1, 13)) + [4, 5, 6])  # only steps 4-6 trained again
    client = _client(mlflow_uri)
    assert sorted(m.step for m in client.get_metric_history(rec["mlflow_run_id"], "train/loss")) == list(range(1, 13))

    shutil.rmtree(run_dir / "resume")  # e.g. a clone after `dvc pull`: no kept state, from step 0 up to step 6
    shutil.rmtree(ck / "checkpoint-6")
    _train(p, "d")
    assert "from step 0 (no earlier training state kept) to step 6" in capfd.readouterr().err
    assert files() == original
