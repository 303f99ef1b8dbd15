"""Bad-input bench: bad params, bad command-line options, damaged files and hostile environments, each run as
the real `oodcorr` command (a subprocess, as a user runs it) in a copy of a small finished project (a tiny
model trained, evaluated and analysed). Every case is classified:

  clean_error       non-zero exit, exactly one `error: ...` line (warning lines aside), no traceback
  correct           expected to work (e.g. a UTF-8 BOM, a corrupt cache file rescored) and it did
  traceback         a Python traceback reached the user
  wrongly_accepted  exit 0 where an error was due
  unclear_error     non-zero exit without exactly one error line, or an error line not naming what is wrong
  wrong_behaviour   expected to work, and it did not (or did the wrong thing)
  data_changed      (counted separately) a file outside the case's own allowed changes differs afterwards

    PYTHONPATH=src python bench/bad_inputs.py [--only SUBSTRING] [--jobs 2]

writes bench/results/bad_inputs.json. `tests/test_bad_inputs_bench.py` runs the same cases (one per item
fast, the rest marked slow).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BIN = Path(sys.executable).parent

BASE_PARAMS = {
    "study": {"name": "bench", "tracking": "none"},
    "data": {"out": "data/prepared", "max_examples": 24, "seed": 0, "neutral": "drop", "prepare": [],
             "testsets": {"synth_train": {"max_examples": 64}}},
    "train": {"lr": 0.005, "batch_size": 8, "max_steps": 8, "warmup_ratio": 0.0, "quiet": True,
              "checkpoints": {"every": 2}, "max_length": 64, "lora": {"dropout": 0.1}},
    "runs": {"a": {"model": "tiny-olmo2", "train_set": "synth_train", "id_testset": "synth_id", "shots": 16,
                   "data_seed": 0, "seed": 0}},
    "evaluate": {"testsets": ["synth_id", "synth_overlap", "synth_negation", "synth_vocab"], "batch_size": 16,
                 "max_length": 64, "quiet": True},
    "analyze": {"out": "results", "methods": ["linear"], "bootstrap": 0, "mlflow": False, "noise": False},
}


def env(**extra) -> dict:
    e = dict(os.environ)
    e.update({"PATH": f"{BIN}{os.pathsep}{e.get('PATH', '')}", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
              "DVC_NO_ANALYTICS": "1", "TOKENIZERS_PARALLELISM": "false", "OODCORR_THREADS": "1",
              "PYTHONPATH": str(REPO / "src"), "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b",
              "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b",
              # third-party deprecation notices (MLflow/SQLAlchemy) are not oodcorr's output
              "PYTHONWARNINGS": "ignore::DeprecationWarning,ignore::FutureWarning"})
    e.pop("MLFLOW_TRACKING_URI", None)
    e.update({k: str(v) for k, v in extra.items()})
    return e


def oodcorr(args, cwd: Path, prefix=(), timeout: int = 600, **extra) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, "-m", "oodcorr", *map(str, args)], cwd=cwd, env=env(**extra),
                          capture_output=True, text=True, timeout=timeout)


BASE: list[Path] = []  # the finished base project (set by build_base), for checks that compare with it


def build_base(root: Path) -> Path:
    """A finished tiny study: prepared data, run `a` trained (8 steps, checkpoints every 2), evaluated and
    analysed; no MLflow (tracking: none), so each case is fast."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "params.yaml").write_text(yaml.safe_dump(BASE_PARAMS, sort_keys=False))
    for args in (["data", "prepare"], ["train", "--run", "a"], ["evaluate", "--run", "a", "--quiet"],
                 ["analyze", "--no-plots"]):
        res = oodcorr(args, root)
        if res.returncode != 0:
            raise RuntimeError(f"base project: oodcorr {' '.join(args)} failed:\n{res.stderr[-3000:]}")
    BASE[:] = [root]
    return root


# ------------------------------------------------------------------------------------------------ cases

@dataclass
class Case:
    id: str
    args: list
    mutate: Callable[[Path], None] | None = None
    expect: str = "error"                       # error | ok
    must: str | None = None                     # regex the error line must match (names the field / file)
    check: Callable[[Path, subprocess.CompletedProcess], str | None] | None = None  # ok cases: problem or None
    allowed: tuple = ()                         # globs that may change (an ok case's own outputs)
    wrap: str | None = None                     # fsize:<bytes> | readonly:<path> | lock | flock:<name> | env:K=V
    item: str = ""                              # which finding it covers
    fast: bool = False                          # also in the fast test run


def edit_params(fn: Callable[[dict], None]) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        p = yaml.safe_load((root / "params.yaml").read_text())
        fn(p)
        (root / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False, allow_unicode=True))
    return mutate


def text_params(fn: Callable[[str], str]) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        (root / "params.yaml").write_text(fn((root / "params.yaml").read_text()))
    return mutate


def _set(path: str, value):
    def fn(p: dict) -> None:
        node, keys = p, path.split(".")
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = value
    return fn


def _rekey(new: str):
    def fn(p: dict) -> None:
        p["runs"] = {new: p["runs"]["a"]}
    return fn


# params mutations: (id, mutate, regex the error must match, commands to try it with)
T, E, A = ["train", "--run", "a"], ["evaluate", "--run", "a", "--quiet"], ["analyze", "--no-plots"]
CHECK = ["study", "check"]
PARAMS: list[tuple] = [
    ("lr-1e30", edit_params(_set("train.lr", 1e30)), r"lr", [CHECK, T], "accepted: lr 1e30"),
    ("lr-nan", text_params(lambda t: t.replace("lr: 0.005", "lr: .nan")), r"lr", [CHECK, T], ""),
    ("lr-negative", edit_params(_set("train.lr", -0.1)), r"lr", [CHECK, T], ""),
    ("lr-string", edit_params(_set("train.lr", "fast")), r"lr", [CHECK, T], ""),
    ("max_length-1", edit_params(_set("train.max_length", 1)), r"max_length", [CHECK, T, E], "accepted: max_length 1"),
    ("max_length-0", edit_params(_set("train.max_length", 0)), r"max_length", [CHECK, T], ""),
    ("eval-max_length-0", edit_params(_set("evaluate.max_length", 0)), r"evaluate\.max_length", [CHECK, E],
     "accepted: evaluate.max_length 0"),
    ("eval-max_length-3", edit_params(_set("evaluate.max_length", 3)), r"evaluate\.max_length", [CHECK, E], ""),
    ("eval-testsets-empty", edit_params(_set("evaluate.testsets", [])), r"evaluate\.testsets", [CHECK, E],
     "accepted: evaluate.testsets []"),
    ("eval-testsets-unknown", edit_params(_set("evaluate.testsets", ["synth_id", "nope"])), r"nope", [CHECK, E], ""),
    ("eval-testsets-number", edit_params(_set("evaluate.testsets", [3])), r"evaluate\.testsets", [CHECK, E], ""),
    ("eval-batch_size-0", edit_params(_set("evaluate.batch_size", 0)), r"batch_size", [CHECK, E], ""),
    ("eval-batch_size-str", edit_params(_set("evaluate.batch_size", "big")), r"batch_size", [CHECK, E], ""),
    ("runs-empty", edit_params(_set("runs", {})), r"runs", [CHECK, A, T], "accepted: runs {}"),
    ("params-empty-file", text_params(lambda t: ""), r"runs|empty", [CHECK, A], "accepted: empty params file"),
    ("params-a-list", text_params(lambda t: "- a\n- b\n"), r"params\.yaml", [CHECK, A, T], ""),
    ("dup-run-key", text_params(lambda t: t.replace("runs:\n  a:\n", "runs:\n  a:\n    model: tiny-opt\n  a:\n", 1)),
     r"params\.yaml:\d+: .*duplicate key 'a'", [CHECK, T, A], "accepted: duplicate run key"),
    ("dup-top-key", text_params(lambda t: t + "train:\n  lr: 0.1\n"), r"params\.yaml:\d+: .*duplicate key 'train'",
     [CHECK, T], ""),
    ("top-level-typo", text_params(lambda t: t + "analyse:\n  methods: [linear]\n"), r"analyse", [CHECK, A, T],
     "accepted: top-level typo"),
    ("train-key-typo", edit_params(_set("train.learning_rate", 0.1)), r"learning_rate", [CHECK, T], ""),
    ("threads-lots", edit_params(_set("study.threads", "lots")), r"study\.threads", [CHECK, T, E, A],
     "accepted: threads lots"),
    ("threads-negative", edit_params(_set("study.threads", -3)), r"study\.threads", [CHECK, T, E], "accepted: threads -3"),
    ("threads-zero", edit_params(_set("study.threads", 0)), r"study\.threads", [CHECK, T], ""),
    ("lora-dropout-1.5", edit_params(_set("train.lora.dropout", 1.5)), r"lora\.dropout", [CHECK, T],
     "traceback: lora.dropout 1.5"),
    ("lora-dropout-neg", edit_params(_set("train.lora.dropout", -0.1)), r"lora\.dropout", [CHECK, T], ""),
    ("lora-r-0", edit_params(_set("train.lora.r", 0)), r"lora\.r", [CHECK, T], ""),
    ("lora-alpha-0", edit_params(_set("train.lora.alpha", 0)), r"lora\.alpha", [CHECK, T], ""),
    ("key-shell", edit_params(_rekey("x;touch PWNED;echo")), r"run key", [CHECK, T, A], "run key injection"),
    ("key-dotdot", edit_params(_rekey("../../evil")), r"run key", [CHECK, T], "run key path escape"),
    ("key-leading-dot", edit_params(_rekey(".hidden")), r"run key", [CHECK, T], ""),
    ("key-too-long", edit_params(_rekey("k" * 300)), r"run key", [CHECK, T], ""),
    ("key-space", edit_params(_rekey("a b")), r"run key", [CHECK, T], ""),
    ("key-unicode", edit_params(_rekey("lauf-ä")), r"run key", [CHECK], ""),
    ("key-dollar", edit_params(_rekey("$(id)")), r"run key", [CHECK, E], ""),
    ("model-shell", edit_params(_set("runs.a.model", "a/b;touch X")), r"runs\.a\.model", [CHECK, T], ""),
    ("model-unknown", edit_params(_set("runs.a.model", "nope-model")), r"runs\.a\.model", [CHECK, T], ""),
    ("train_set-unknown", edit_params(_set("runs.a.train_set", "nope_train")), r"train_set", [CHECK, T], ""),
    ("id_testset-unknown", edit_params(_set("runs.a.id_testset", "nope")), r"id_testset", [CHECK, E], ""),
    ("shots-0", edit_params(_set("runs.a.shots", 0)), r"shots", [CHECK, T], ""),
    ("shots-odd", edit_params(_set("runs.a.shots", 3)), r"shots", [CHECK, T], ""),
    ("shots-string", edit_params(_set("runs.a.shots", "many")), r"shots", [CHECK, T], ""),
    ("seed-string", edit_params(_set("runs.a.seed", "x")), r"seed", [CHECK], ""),
    ("batch_size-0", edit_params(_set("train.batch_size", 0)), r"batch_size", [CHECK, T], ""),
    ("grad_accum-0", edit_params(_set("train.grad_accum", 0)), r"grad_accum", [CHECK], ""),
    ("warmup-1.5", edit_params(_set("train.warmup_ratio", 1.5)), r"warmup_ratio", [CHECK, T], ""),
    ("max_steps-0", edit_params(_set("train.max_steps", 0)), r"max_steps", [CHECK], ""),
    ("every-0", edit_params(_set("train.checkpoints.every", 0)), r"checkpoints", [CHECK], ""),
    ("log_spaced-1", edit_params(_set("train.checkpoints.log_spaced", 1)), r"checkpoints", [CHECK], ""),
    ("loss-mse", edit_params(_set("train.loss", "mse")), r"loss", [CHECK, T], ""),
    ("sampling-random", edit_params(_set("train.sampling", "random")), r"sampling", [CHECK], ""),
    ("finetune-adapter", edit_params(_set("train.finetune", "adapter")), r"finetune", [CHECK], ""),
    ("quantization-int8", edit_params(_set("train.quantization", "int8")), r"quantization", [CHECK, E], ""),
    ("dtype-float64", edit_params(_set("train.dtype", "float64")), r"dtype", [CHECK], ""),
    ("optim-sgd", edit_params(_set("train.optim", "sgd")), r"optim", [CHECK], ""),
    ("gc-maybe", edit_params(_set("train.gradient_checkpointing", "maybe")), r"gradient_checkpointing", [CHECK], ""),
    ("pattern-no-premise", edit_params(_set("train.pattern", "{hypothesis}?")), r"premise", [CHECK, T], ""),
    ("pattern-huge", edit_params(_set("train.pattern", "{premise} {hypothesis} " + "word " * 60000)),
     r"pattern", [CHECK, T], "traceback: huge train.pattern"),
    ("verbalizer-string", edit_params(_set("train.verbalizer", "yes")), r"verbalizer", [CHECK, T], ""),
    ("epochs-0", edit_params(_set("train.epochs", 0)), r"epochs", [CHECK], ""),
    ("weight_decay-inf", text_params(lambda t: t.replace("\ntrain:\n", "\ntrain:\n  weight_decay: .inf\n", 1)),
     r"weight_decay", [CHECK], ""),
    ("max_grad_norm-str", edit_params(_set("train.max_grad_norm", "x")), r"max_grad_norm", [CHECK], ""),
    ("methods-pearson", edit_params(_set("analyze.methods", ["pearson"])), r"analyze\.methods", [CHECK, A],
     "outputs deleted before params rejected"),
    ("bootstrap-negative", edit_params(_set("analyze.bootstrap", -1)), r"analyze\.bootstrap", [CHECK, A], ""),
    ("alpha-1.5", edit_params(_set("analyze.alpha", 1.5)), r"analyze\.alpha", [CHECK, A], ""),
    ("metric-f1", edit_params(_set("analyze.metric", "f1")), r"analyze\.metric", [CHECK, A], ""),
    ("noise-maybe", edit_params(_set("analyze.noise", "maybe")), r"analyze\.noise", [CHECK, A], ""),
    ("reliability_min-2", edit_params(_set("analyze.reliability_min", 2)), r"reliability_min", [CHECK], ""),
    ("reliability_splits-0", edit_params(_set("analyze.reliability_splits", 0)), r"reliability_splits", [CHECK], ""),
    ("scatter_pair-one", edit_params(_set("analyze.scatter_pair", ["synth_overlap"])), r"scatter_pair", [CHECK], ""),
    ("tracking-wandb", edit_params(_set("study.tracking", "wandb")), r"study\.tracking", [CHECK, T], ""),
    ("max_examples-all", edit_params(_set("data.max_examples", "all")), r"data\.max_examples", [CHECK], ""),
    ("params-not-utf8", lambda r: (r / "params.yaml").write_bytes((r / "params.yaml").read_bytes() + b"# caf\xe9\n"),
     r"params\.yaml:\d+: not UTF-8", [CHECK, T], ""),
    ("params-bad-yaml", text_params(lambda t: t + "runs: [\n"), r"params\.yaml:\d+", [CHECK, A], ""),
    ("launch-executor-k8s", edit_params(_set("study.launch", {"executor": "k8s"})), r"study\.launch\.executor",
     [CHECK], ""),
    ("launch-time-forever", edit_params(_set("study.launch", {"time": "forever"})), r"study\.launch\.time",
     [CHECK], ""),
]


def _no_file(name):
    def check(root, res):
        return f"{name} was created" if list(root.rglob(name)) or (root.parent / name).exists() else None
    return check


def _run_keys_safe(root, res):
    p = yaml.safe_load((root / "params.yaml").read_text())
    bad = [k for k in p["runs"] if not re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]*", k)]
    return f"unsafe keys written: {bad}" if bad else None


def _user_files(root):
    (root / "paper" / "figures").mkdir(parents=True)
    (root / "paper" / "figures" / "my_diagram.png").write_bytes(b"\x89PNG mine")
    (root / "paper" / "summary.json").write_text("{}")


def _corrupt(rel: str, how: str):
    def mutate(root):
        files = sorted(root.glob(rel))
        assert files, rel
        for f in files[:1]:
            data = f.read_bytes()
            f.write_bytes(b"" if how == "empty" else data[: len(data) // 2] if how == "truncate" else b"garbage" * 50)
    return mutate


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


def _relabel(root):
    path = root / "data" / "prepared" / "synth_overlap.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    for r in rows:
        r["label"] = "entailment" if r["label"] == "non_entailment" else "non_entailment"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _relabel_rescored(root, res):
    after = [json.loads(x) for x in (root / "runs" / "a" / "eval" / "metrics.jsonl").read_text().splitlines()]
    before = [json.loads(x) for x in (BASE[0] / "runs" / "a" / "eval" / "metrics.jsonl").read_text().splitlines()]
    acc = lambda rows: {(r["step"], r["testset"]): r["accuracy"] for r in rows if r["slice"] is None}  # noqa: E731
    a, b = acc(after), acc(before)
    flipped = [k for k in b if k[1] == "synth_overlap" and abs(a[k] - (1 - b[k])) > 1e-9]
    return f"cached scores of the relabelled testset reused: {flipped[:2]}" if flipped else None


def _local_csv(content: bytes):
    def mutate(root):
        (root / "mine.csv").write_bytes(content)
        p = yaml.safe_load((root / "params.yaml").read_text())
        p["data"]["testsets"]["mine"] = {"path": "mine.csv", "premise": "p", "hypothesis": "h", "label": "y",
                                         "label_map": {"yes": "entailment", "no": "non_entailment"}}
        p["data"]["prepare"] = ["mine"]
        (root / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    return mutate


CSV_ROWS = "p,h,y\n" + "".join(f"Ann went {i}.,Ann moved.,{'yes' if i % 2 else 'no'}\n" for i in range(30))


def _prepared_mine(root, res):
    f = root / "data" / "prepared" / "mine.jsonl"
    return None if f.exists() and len(f.read_text().splitlines()) == 24 else "mine not prepared"


def _rm_checkpoint(root):
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
    return None


def _sync_no_duplicates(root, res):
    import sqlite3

    with sqlite3.connect(root / "mlruns" / "mlflow.db") as con:
        rows = con.execute("select e.name, count(*) from runs r join experiments e on r.experiment_id = "
                           "e.experiment_id group by e.name").fetchall()
    got = dict(rows)
    return None if got == {"oodcorr/bench": 1} else f"runs per experiment: {got}"


def _masked(root, res):
    secret = "s3cr3tPW"
    leaks = [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()
             and p.name != "params.yaml"]
    if secret in res.stderr + res.stdout:
        return "secret printed"
    if "***" not in res.stderr:
        return "no masked warning"
    return f"secret written to {leaks}" if leaks else None


def _secret_uri(root):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    edit_params(lambda p: (p["study"].pop("tracking"), p["study"].update(
        tracking_uri=f"http://bob:s3cr3tPW@127.0.0.1:{port}/?token=s3cr3tPW")))(root)
    _rm_checkpoint(root)


def _preset_switch(root):
    edit_params(lambda p: (p["study"].pop("tracking"), p["study"].update(name="other")))(root)


def _template_store() -> Path:
    """One MLflow store holding a run, built once (in a subprocess: MLflow's migrations are not thread-safe)
    and copied into each case that needs one."""
    with _STORE_LOCK:
        if not STORE:
            db = BASE[0].parent / "store" / "mlflow.db"
            db.parent.mkdir(exist_ok=True)
            code = (f"import mlflow; from oodcorr import tracking; uri = 'sqlite:///{db}'; tracking.ensure_store(uri); "
                    "c = mlflow.MlflowClient(uri); c.create_run(c.create_experiment('oodcorr/bench'))")
            subprocess.run([sys.executable, "-c", code], env=env(), check=True, capture_output=True)
            STORE.append(db)
    return STORE[0]


STORE: list[Path] = []
_STORE_LOCK = __import__("threading").Lock()


def _lock_store(root):
    """A store holding a run (the template's copy); the case holds it under an exclusive lock (wrap="lock")."""
    (root / "mlruns").mkdir(exist_ok=True)
    shutil.copyfile(_template_store(), root / "mlruns" / "mlflow.db")
    edit_params(lambda p: p["study"].pop("tracking"))(root)


def _store(damage: str):
    def mutate(root):
        _lock_store(root)
        db = root / "mlruns" / "mlflow.db"
        data = bytearray(db.read_bytes())
        if damage == "zero":
            data = bytearray(len(data))
        elif damage == "truncate":
            data = data[: len(data) // 3]
        else:
            data[8192: 8192 + 64] = b"\xa5" * 64
        db.write_bytes(bytes(data))
    return mutate


def _copied_store(root):
    """This project's mlruns/ copied from another project (`cp -r`): that project's store, with one run and its
    artifact, was made in <work>/orig. Tracking and the analysis' MLflow run are on."""
    orig = root.parent / "orig"
    code = ("import mlflow, pathlib; from oodcorr import tracking; "
            f"p = {{'_root': {str(orig)!r}, 'study': {{'name': 'bench'}}}}; e = tracking.setup(p); "
            "c = mlflow.MlflowClient(tracking.tracking_uri(p)); r = c.create_run(e).info.run_id; "
            f"f = pathlib.Path({str(orig)!r}) / 'note.txt'; f.write_text('x'); c.log_artifact(r, str(f))")
    subprocess.run([sys.executable, "-c", code], env=env(), check=True, capture_output=True)
    shutil.copytree(orig / "mlruns", root / "mlruns")
    edit_params(lambda p: (p["study"].pop("tracking"), p["analyze"].update(mlflow=True)))(root)


def _artifacts_inside(root, res):
    theirs = [p for p in (root.parent / "orig" / "mlruns" / "artifacts").rglob("*") if p.is_file()]
    if len(theirs) != 1:
        return f"{len(theirs) - 1} file(s) written into the original project's mlruns/artifacts"
    if not list((root / "mlruns" / "artifacts").rglob("summary.json")):
        return "the analysis' artifacts are not in this project's mlruns/artifacts"
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


def _cases() -> list[Case]:
    cases: list[Case] = []
    fast_ids = {"lr-1e30", "key-shell", "methods-pearson", "dup-run-key", "threads-lots", "lora-dropout-1.5",
                "runs-empty", "top-level-typo", "pattern-huge", "eval-testsets-empty"}
    for pid, mutate, must, commands, item in PARAMS:
        for args in commands:
            cases.append(Case(f"params:{pid}:{args[0] if args[0] != 'study' else 'check'}", list(args), mutate,
                              must=must, item=item, fast=pid in fast_ids and args is commands[0]))
    cases += [
        # command-line options
        Case("use:quickstart-seeds", ["study", "use", "quickstart", "--seeds", "1"], must=r"--seeds",
             item="study use quickstart --seeds ignored", fast=True),
        Case("use:quickstart-shots", ["study", "use", "quickstart", "--shots", "16"], must=r"--shots"),
        Case("use:quickstart-models", ["study", "use", "quickstart", "--models", "tiny-opt"], must=r"--models"),
        Case("use:paper-shots-neg", ["study", "use", "paper", "--shots", "0,-4"], must=r"--shots",
             item="study use paper --shots 0,-4", fast=True),
        Case("use:paper-seeds-letters", ["study", "use", "paper", "--seeds", "a,b"], must=r"--seeds",
             item="traceback: --seeds a,b", fast=True),
        Case("use:paper-seeds-empty-item", ["study", "use", "paper", "--seeds", "1,,2"], must=r"--seeds"),
        Case("use:paper-models-shell", ["study", "use", "paper", "--models", "a/b;touch PWN3;"], must=r"model",
             item="study use writes unsafe keys", fast=True),
        Case("use:paper-models-dotdot", ["study", "use", "paper", "--models", "../../x"], must=r"model"),
        Case("use:paper-models-hub", ["study", "use", "paper", "--models", "allenai/OLMo-2-1124-7B", "--seeds", "0"],
             expect="ok", check=_run_keys_safe, allowed=("params.yaml", "params.yaml.*.bak"),
             item="hub ids map to safe keys"),
        Case("use:unknown-preset", ["study", "use", "papr"], must=r"papr"),
        Case("cli:train-run-dotdot", ["train", "--run", "../../evil"], must=r"--run"),
        Case("cli:train-run-unknown", ["train", "--run", "nope"], must=r"nope"),
        Case("cli:evaluate-run-shell", ["evaluate", "--run", "a;id"], must=r"--run"),
        Case("cli:evaluate-testsets-unknown", ["evaluate", "--run", "a", "--testsets", "nope"], must=r"nope"),
        Case("cli:analyze-bootstrap-neg", ["analyze", "--bootstrap", "-1"], must=r"bootstrap"),
        Case("cli:analyze-alpha-2", ["analyze", "--alpha", "2"], must=r"alpha"),
        Case("cli:analyze-metrics-missing", ["analyze", "--metrics", "nope.jsonl"], must=r"nope\.jsonl"),
        Case("cli:ui-port-0", ["ui", "--port", "0"], must=r"--port"),
        Case("cli:sync-run-unknown", ["sync", "--run", "nope"], must=r"nope"),
        # --out and the results folder
        Case("out:user-files", ["analyze", "--out", "paper", "--no-plots"], _user_files, must=r"--out paper: .*figures",
             item="user files deleted by --out", fast=True),
        Case("out:changed-output", ["analyze", "--no-plots"],
             lambda r: (r / "results" / "consistency.csv").write_text("my edit\n"), must=r"consistency\.csv"),
        Case("out:extra-file", ["analyze", "--no-plots"], lambda r: (r / "results" / "notes.md").write_text("mine"),
             must=r"notes\.md"),
        Case("out:is-a-file", ["analyze", "--out", "params.yaml", "--no-plots"], must=r"is a file"),
        Case("out:rerun-own-output", ["analyze", "--no-plots"], expect="ok", allowed=("results/**",),
             check=lambda r, res: None if (r / "results" / ".oodcorr-outputs.json").exists() else "no manifest"),
        Case("out:dvc-gitignore-kept", ["analyze", "--no-plots"],
             lambda r: (r / "results" / ".gitignore").write_text("/partial_correlations.csv\n/plots\n"),
             expect="ok", allowed=("results/**",),
             check=lambda r, res: None if (r / "results" / ".gitignore").exists() else ".gitignore removed",
             item="direct analyze removes DVC's .gitignore"),
        # damaged files
        Case("file:prepared-bad-json", T, _corrupt("data/prepared/synth_train.jsonl", "truncate"),
             must=r"synth_train\.jsonl:\d+"),
        Case("file:prepared-not-utf8", E, lambda r: (r / "data/prepared/synth_overlap.jsonl").write_bytes(
            b'{"id": "\xff"}\n'), must=r"synth_overlap\.jsonl:1"),
        Case("file:relabelled-testset", E, _relabel, expect="ok", check=_relabel_rescored,
             allowed=("runs/a/eval/**",), item="relabelled testset reuses cached scores"),
        Case("file:csv-not-utf8", ["data", "prepare"], _local_csv(CSV_ROWS.encode().replace(b"Ann went 3",
             b"Ann w\xe9nt 3")), must=r"mine\.csv:\d+", item="traceback: non-UTF-8 CSV", fast=True),
        Case("file:csv-bom", ["data", "prepare"], _local_csv(b"\xef\xbb\xbf" + CSV_ROWS.encode()), expect="ok",
             check=_prepared_mine, allowed=("data/prepared/**",), item="CSV with a UTF-8 BOM refused"),
        Case("file:csv-malformed", ["data", "prepare"], _local_csv((CSV_ROWS + "x,y\n").encode()),
             must=r"mine\.csv:\d+"),
        Case("file:cache-empty", E, _corrupt("runs/a/eval/cache/*.parquet", "empty"), expect="ok", check=_rescored,
             allowed=("runs/a/eval/**",), item="traceback: empty cache parquet", fast=True),
        Case("file:cache-garbage", E, _corrupt("runs/a/eval/cache/*.parquet", "garbage"), expect="ok",
             check=_rescored, allowed=("runs/a/eval/**",)),
        Case("file:cache-truncated", E, _corrupt("runs/a/eval/cache/*.parquet", "truncate"), expect="ok",
             check=_rescored, allowed=("runs/a/eval/**",)),
        Case("file:cache-is-a-file", E, _file_at("runs/a/eval/cache"), must=r"cache", item="traceback: cache path a file"),
        Case("file:eval-is-a-file", E, _file_at("runs/a/eval"), must=r"eval"),
        Case("file:run-json-bad", E, lambda r: (r / "runs/a/run.json").write_text("{oops"), must=r"run\.json:\d+"),
        Case("file:adapter-truncated", E, _corrupt("runs/a/checkpoints/checkpoint-4/adapter_model.safetensors",
                                                    "truncate"), must=r"checkpoint-4",
             allowed=("runs/a/eval/**",)),
        Case("file:metrics-bad-line", A, _metrics_bad_line, must=r"metrics\.jsonl:4"),
        Case("file:checkpoint-deleted", T, _rm_checkpoint, expect="ok", check=_rebuilt,
             allowed=("runs/a/checkpoints/**", "runs/a/run.json", "runs/a/tracking/**"),
             item="deleted checkpoint never rebuilt", fast=True),
        # tracking
        Case("mlflow:store-locked", T, _lock_store, wrap="lock", must=r"mlflow\.db.*locked",
             item="healthy store moved aside while locked", allowed=("mlruns/**",)),
        Case("mlflow:store-zeroed", T, _store("zero"), must=r"mlflow\.db.*damaged", allowed=("mlruns/.*",)),
        Case("mlflow:store-truncated", E, _store("truncate"), must=r"mlflow\.db", allowed=("mlruns/.*",)),
        Case("mlflow:store-page-corrupt", E, _store("page"), must=r"mlflow\.db.*damaged", allowed=("mlruns/.*",)),
        Case("mlflow:secret-uri", T, _secret_uri, expect="ok", check=_masked,
             allowed=("runs/a/checkpoints/**", "runs/a/run.json", "runs/a/tracking/**"), item="credentials leak"),
        Case("mlflow:sync-after-preset-switch", ["sync"], _preset_switch, expect="ok", check=_sync_no_duplicates,
             allowed=("mlruns/**", "runs/*/tracking/**"), item="sync duplicates runs after a preset switch"),
        Case("mlflow:copied-project", A, _copied_store, expect="ok", check=_artifacts_inside,
             allowed=("mlruns/**", "results/**", "runs/*/tracking/**"),
             item="a copied project writes artifacts into the original's mlruns"),
        # a second process while the first still runs (the first holds the project's lock for that work)
        Case("concurrent:train-same-run", T, wrap="flock:train-a", allowed=LOCK_FILES, fast=True,
             must=r"run a is being trained by another process \(pid \d+\)", item="two concurrent train"),
        Case("concurrent:evaluate-same-run", E, wrap="flock:evaluate-a", allowed=LOCK_FILES,
             must=r"run a is being evaluated by another process \(pid \d+\)"),
        Case("concurrent:analyze", A, wrap="flock:analyze", allowed=LOCK_FILES,
             must=r"analysis .* another process \(pid \d+\)", item="two concurrent analyze leave a run RUNNING"),
        # the environment
        Case("env:threads-lots", T, lambda r: None, must=r"OODCORR_THREADS", wrap="env:OODCORR_THREADS=lots"),
        Case("env:disk-full-analyze", A, lambda r: shutil.rmtree(r / "results"), must=r"no space left",
             wrap="fsize:3000", item="traceback: disk full"),
        Case("env:disk-full-evaluate", E, lambda r: shutil.rmtree(r / "runs/a/eval/cache"), must=r"no space left",
             wrap="fsize:3000", allowed=("runs/a/eval/cache",)),  # the (empty) cache folder is made again
        Case("env:disk-full-train", ["train", "--run", "b"], edit_params(lambda p: p["runs"].update(
            b=dict(p["runs"]["a"], seed=1))), must=r"no space left", wrap="fsize:6000",
             allowed=("runs/b/**",)),
        Case("env:readonly-runs", ["train", "--run", "b"], edit_params(lambda p: p["runs"].update(
            b=dict(p["runs"]["a"], seed=1))), must=r"runs.*cannot write|cannot write.*runs", wrap="readonly:runs",
             item="traceback: read-only runs/"),
        Case("env:readonly-eval", E, lambda r: shutil.rmtree(r / "runs/a/eval/cache"), must=r"cannot write",
             wrap="readonly:runs/a/eval"),
    ]
    return cases


LOCK_FILES = (".oodcorr", ".oodcorr/locks", ".oodcorr/locks/*")  # the holder's own lock file (a killed holder's stays)
CASES = _cases()


# ------------------------------------------------------------------------------------------------ running

def snapshot(root: Path) -> dict[str, bytes | None]:
    out = {}
    for p in root.rglob("*"):
        rel = p.relative_to(root).as_posix()
        if p.is_symlink():
            out[rel] = b"->" + os.readlink(p).encode()
        elif p.is_file():
            out[rel] = p.read_bytes()
        elif p.is_dir():
            out[rel + "/"] = None
    return out


def changed(before: dict, after: dict, allowed: tuple) -> list[str]:
    import fnmatch

    keys = set(before) | set(after)
    diff = [k for k in keys if before.get(k, "<gone>") != after.get(k, "<gone>")]
    return sorted(k for k in diff if not any(fnmatch.fnmatch(k.rstrip("/"), g.rstrip("/")) or
                                             fnmatch.fnmatch(k, g) for g in allowed))


def _prefix(wrap: str | None, root: Path) -> tuple[list, dict, Callable | None]:
    """(command prefix, extra env, preexec_fn) for the case's environment."""
    if not wrap:
        return [], {}, None
    kind, _, arg = wrap.partition(":")
    if kind == "env":
        k, v = arg.split("=", 1)
        return [], {k: v}, None
    if kind == "fsize":
        import resource

        limit = int(arg)
        return [], {}, lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    if kind == "readonly":
        if os.geteuid() != 0:
            (root / arg).chmod(0o555)
            return [], {}, None
        path = str(root / arg)
        return ["unshare", "-m", "sh", "-c", f'mount --bind "{path}" "{path}" && mount -o remount,bind,ro "{path}" '
                f'"{path}" && exec "$@"', "sh"], {}, None
    return [], {}, None


def classify(case: Case, res: subprocess.CompletedProcess) -> tuple[str, str]:
    out = (res.stderr or "") + (res.stdout or "")
    if "Traceback (most recent call last)" in out:
        return "traceback", out.strip().splitlines()[-1][:300]
    lines = [x for x in out.splitlines() if x.strip()]
    errors = [x for x in lines if x.startswith("error: ")]
    others = [x for x in lines if not x.startswith(("error: ", "warning: ", "train ", "ok: "))]
    if case.expect == "error":
        if res.returncode == 0:
            return "wrongly_accepted", (lines[-1] if lines else "")[:300]
        if len(errors) != 1 or others:
            return "unclear_error", " | ".join(lines[-3:])[:300]
        if case.must and not re.search(case.must, errors[0]):
            return "unclear_error", f"does not match {case.must!r}: {errors[0][:250]}"
        return "clean_error", errors[0][:300]
    if res.returncode != 0:
        return "wrong_behaviour", " | ".join(lines[-2:])[:300]
    return "correct", ""


def run_case(case: Case, base: Path, work: Path) -> dict:
    root = work / "p"
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(base, root, symlinks=True)
    holder = None
    try:
        if case.mutate:
            case.mutate(root)
        before = snapshot(root)
        prefix, extra, preexec = _prefix(case.wrap, root)
        if case.wrap == "lock":
            holder = subprocess.Popen([sys.executable, "-c", f"""
import sqlite3, time
con = sqlite3.connect({str(root / 'mlruns' / 'mlflow.db')!r}, isolation_level=None)
con.execute("begin exclusive"); print("locked", flush=True); time.sleep(600)"""], stdout=subprocess.PIPE, text=True)
            holder.stdout.readline()
            extra["OODCORR_STORE_BUSY_TIMEOUT_S"] = "2"
        elif case.wrap and case.wrap.startswith("flock:"):  # another oodcorr process holding this work's lock
            holder = subprocess.Popen([sys.executable, "-c", f"""
import time
from oodcorr import locks
with locks.exclusive(locks.lock_path({str(root)!r}, {case.wrap.split(':', 1)[1]!r}), "busy"):
    print("locked", flush=True); time.sleep(600)"""], stdout=subprocess.PIPE, text=True, env=env())
            holder.stdout.readline()
        t0 = time.time()
        res = subprocess.run([*prefix, sys.executable, "-m", "oodcorr", *map(str, case.args)], cwd=root,
                             env=env(**extra), capture_output=True, text=True, timeout=900, preexec_fn=preexec)
        seconds = time.time() - t0
    finally:
        if holder:
            holder.kill()
            holder.wait()
        if case.wrap and case.wrap.startswith("readonly") and os.geteuid() != 0:
            (root / case.wrap.split(":", 1)[1]).chmod(0o755)
    outcome, detail = classify(case, res)
    if outcome == "correct" and case.check:
        try:
            problem = case.check(root, res)
        except Exception as e:  # noqa: BLE001 - the check itself failed: the behaviour is not what was due
            problem = f"check failed: {type(e).__name__}: {e}"
        if problem:
            outcome, detail = "wrong_behaviour", problem
    after = snapshot(root)
    diff = changed(before, after, case.allowed)
    for name in ("PWNED", "PWN3", "X"):
        if (root / name).exists() or (root.parent / name).exists():
            diff.append(f"{name} created")
    return {"id": case.id, "item": case.item, "expect": case.expect, "outcome": outcome, "detail": detail,
            "data_changed": diff[:5], "rc": res.returncode, "seconds": round(seconds, 2)}


COUNTS = ("clean_error", "correct", "traceback", "wrongly_accepted", "unclear_error", "wrong_behaviour")


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=None, help="run the cases whose id contains this")
    ap.add_argument("--out", default=str(HERE / "results" / "bad_inputs.json"))
    ap.add_argument("--jobs", type=int, default=2, help="cases run at once (each in its own project copy)")
    ap.add_argument("--update", action="store_true",
                    help="replace these cases' results in the existing --out file (a rerun after a fix)")
    args = ap.parse_args(argv)
    cases = [c for c in CASES if not args.only or args.only in c.id]
    with tempfile.TemporaryDirectory(prefix="oodcorr-bad-inputs-") as tmp:
        t0 = time.time()
        base = build_base(Path(tmp) / "base")
        build_s = time.time() - t0
        from concurrent.futures import ThreadPoolExecutor

        def one(item):
            i, case = item
            r = run_case(case, base, Path(tmp) / f"work{i}")
            shutil.rmtree(Path(tmp) / f"work{i}", ignore_errors=True)
            flag = " DATA CHANGED " + ", ".join(r["data_changed"]) if r["data_changed"] else ""
            print(f"[{i}/{len(cases)}] {r['outcome']:16s} {case.id}: {r['detail'][:140]}{flag}", flush=True)
            return r

        with ThreadPoolExecutor(args.jobs) as pool:  # each case in its own copy; subprocess-bound
            results = list(pool.map(one, enumerate(cases, 1)))
    command = "PYTHONPATH=src python bench/bad_inputs.py" + (f" --only {args.only}" if args.only else "")
    reruns = []
    if args.update and Path(args.out).exists():  # these cases again, after a fix: replace them in the full run
        old = json.loads(Path(args.out).read_text())
        fresh = {r["id"]: r for r in results}
        reruns = old.get("reruns", []) + [{"command": command + " --update", "ids": sorted(fresh)}]
        results = [fresh.pop(r["id"], r) for r in old["results"]] + list(fresh.values())
        command = old["command"]
    counts = {k: sum(r["outcome"] == k for r in results) for k in COUNTS}
    counts["data_changed"] = sum(bool(r["data_changed"]) for r in results)
    summary = {"cases": len(results), "counts": counts, "base_build_s": round(build_s, 1), "jobs": args.jobs,
               "command": command, "reruns": reruns, "results": results}
    print(json.dumps({"cases": len(results), **counts}))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(summary, indent=1) + "\n")
    return summary


if __name__ == "__main__":
    main()
