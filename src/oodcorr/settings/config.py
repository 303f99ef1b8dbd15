"""params.yaml: loading and validation (one line naming the key path); a run is resolved by run_settings.

Layout (one section per stage, as in iterative/example-get-started):
  study:    name, tracking_uri
  data:     out, max_examples, seed, neutral, prepare (names), testsets (local declarations / overrides)
  train:    defaults for every run (pattern, verbalizer, lora, quantization, lr, ...)
  runs:     {RUN_KEY: {model, train_set, id_testset, shots, data_seed, seed, <any train key override>}}
  evaluate: testsets, batch_size, dtype, max_length
  analyze:  out, methods, bootstrap, alpha, ...
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import yaml

from oodcorr.core.errors import UserError, closest
from oodcorr.settings import environment
from oodcorr.settings.names import HUB_ID_RE, check_name, check_run_key
from oodcorr.settings.yaml_dialect import read_yaml

PARAMS_FILE = "params.yaml"


# The `study.launch` section: how `oodcorr study launch` submits the runs (read by oodcorr.launch). `study` is no
# stage's params dependency: editing it re-runs nothing.
LAUNCH_SCHEMA: dict = {
    "executor": str,  # local | slurm
    "partition": (str, type(None)),  # sbatch --partition (null: the cluster's default)
    "gpus_per_run": (int, type(None)),  # --gpus-per-node (null: 1 on slurm; locally CUDA is left alone)
    "cpus_per_run": (int, type(None)),  # --cpus-per-task
    "mem_gb": (int, float, type(None)),  # --mem
    "time": (int, str, type(None)),  # --time: minutes, or [D-]HH:MM[:SS]
    "max_parallel": (int, type(None)),  # array throttle (%N); locally the number of processes at once
    "account": (str, type(None)),  # --account
    "qos": (str, type(None)),  # --qos
    "constraint": (str, type(None)),  # --constraint
    "sbatch": (dict, type(None)),  # any other sbatch option, e.g. {exclude: node12, nice: 10}
    "setup": (list, type(None)),  # shell lines run before the job, e.g. ["module load cuda/12.4"]
    "folder": (str, type(None)),  # job pickles and logs (shared filesystem); default .oodcorr/launch
    "max_requeue": (int, type(None)),  # preempted/timed-out jobs requeue themselves this many times
}

LAUNCH_DEFAULTS: dict = {
    "executor": "local",
    "partition": None,
    "gpus_per_run": None,
    "cpus_per_run": None,
    "mem_gb": None,
    "time": 24 * 60,
    "max_parallel": None,
    "account": None,
    "qos": None,
    "constraint": None,
    "sbatch": None,
    "setup": None,
    "folder": ".oodcorr/launch",
    "max_requeue": 3,
}


# Types per key: a python type, a tuple of types, or a nested dict schema. `None` in a tuple = nullable.
_NUM = (int, float)
TRAIN_SCHEMA: dict[str, Any] = {
    "pattern": str,
    "verbalizer": {"entailment": str, "non_entailment": str},
    "loss": str,  # full_vocab | verbalizer
    "sampling": str,  # balanced | uniform
    "lora": {"r": int, "alpha": _NUM, "dropout": _NUM, "target_modules": (str, list)},
    "finetune": str,  # lora | full
    "quantization": str,  # auto | nf4 | none
    "dtype": str,  # auto | float32 | bfloat16 | float16
    "gradient_checkpointing": (bool, str),  # true | false | auto (on for CUDA)
    "optim": str,  # adamw | paged_adamw_8bit (bitsandbytes, CUDA)
    "lr": _NUM,
    "weight_decay": _NUM,
    "warmup_ratio": _NUM,
    "max_grad_norm": (int, float, type(None)),  # gradient clipping (null/0 = off)
    "batch_size": int,
    "grad_accum": int,
    "epochs": _NUM,
    "max_steps": (int, type(None)),
    "max_length": int,
    "checkpoints": {"every": (int, type(None)), "log_spaced": (int, type(None))},
    "quiet": bool,
}
RUN_SCHEMA: dict[str, Any] = {
    "model": str,
    "revision": (str, type(None)),
    "train_set": str,
    "id_testset": str,
    "shots": int,
    "data_seed": int,
    "seed": int,
    **TRAIN_SCHEMA,
}
TESTSET_SCHEMA: dict[str, Any] = {
    "path": str,
    "format": str,
    "hub": (str, type(None)),
    "config": (str, type(None)),
    "revision": (str, type(None)),
    "split": (str, type(None)),
    "premise": str,
    "hypothesis": str,
    "label": str,
    "label_map": dict,
    "slice": (str, list, type(None)),
    "filter": (dict, type(None)),
    "neutral": str,
    "description": str,
    "synthetic": (str, type(None)),
    "max_examples": (int, type(None)),
    "id": (str, type(None)),  # column holding a stable row id (default: the source row index)
    "columns": (list, type(None)),  # column names for a headerless tsv/csv file
    "size": (int, type(None)),  # rows a synthetic generator produces
}
SCHEMA: dict[str, Any] = {
    "study": {
        "name": str,
        "tracking_uri": (str, type(None)),
        "experiment": (str, type(None)),
        "tracking": str,  # mlflow (default) | none: local outputs only, MLflow never imported
        "launch": LAUNCH_SCHEMA,
        "threads": (int, str, type(None)),
    },
    "data": {
        "out": str,
        "max_examples": (int, type(None)),
        "seed": int,
        "neutral": str,
        "prepare": list,
        "testsets": ("mapping", TESTSET_SCHEMA),
    },
    "train": TRAIN_SCHEMA,
    "runs": ("mapping", RUN_SCHEMA),
    "evaluate": {
        "testsets": list,
        "batch_size": (int, str),
        "dtype": str,
        "max_length": int,
        "quiet": bool,
    },
    "analyze": {
        "out": str,
        "methods": list,
        "bootstrap": int,
        "alpha": _NUM,
        "slices": bool,
        "scatter_pair": (list, type(None)),
        "seed": int,
        "mlflow": bool,
        "noise": (bool, str),
        "metric": str,
        "reliability_min": _NUM,
        "reliability_splits": int,
        "equivalence": _NUM,
        "pool_models": bool,
    },
}


def typename(t) -> str:
    if isinstance(t, tuple):
        return " or ".join("null" if x is type(None) else ("number" if x is float else x.__name__) for x in t)
    if isinstance(t, dict):
        return "a mapping"
    return {float: "number"}.get(t, t.__name__)


def validate(tree: Any, schema: Any = SCHEMA, where: str = "") -> None:
    """Raise UserError naming the first key path that does not fit the schema."""
    if isinstance(schema, tuple) and schema and schema[0] == "mapping":
        if not isinstance(tree, dict):
            raise UserError(f"params: {where or '<root>'}: expected a mapping, got {type(tree).__name__}")
        for key, sub in tree.items():
            if where == "runs":
                check_run_key(key)
            elif where == "data.testsets":
                check_name(key, "testset", "params: data.testsets")
            validate(sub, schema[1], f"{where}.{key}" if where else str(key))
        return
    if isinstance(schema, dict):
        if tree is None:
            return
        if not isinstance(tree, dict):
            raise UserError(f"params: {where or '<root>'}: expected a mapping, got {type(tree).__name__}")
        for key, sub in tree.items():
            path = f"{where}.{key}" if where else str(key)
            if key not in schema:
                raise UserError(f"params: unknown key {path!r}{closest(str(key), schema)}")
            validate(sub, schema[key], path)
        return
    types = schema if isinstance(schema, tuple) else (schema,)
    if bool not in types and isinstance(tree, bool):
        raise UserError(f"params: {where}: expected {typename(schema)}, got {tree!r}")
    if not isinstance(tree, types):
        raise UserError(f"params: {where}: expected {typename(schema)}, got {type(tree).__name__} {tree!r}")


def find_project_root(start: str | os.PathLike | None = None) -> Path:
    """The folder holding params.yaml / dvc.yaml (walking up from `start` or the cwd); else the cwd."""
    here = Path(start or os.getcwd()).resolve()
    for d in (here, *here.parents):
        if (d / "dvc.yaml").exists() or (d / PARAMS_FILE).exists():
            return d
    return here


def load_params(path: str | os.PathLike | None = None, validate_schema: bool = True) -> dict:
    """Read and validate params.yaml (types, unknown keys, and runs -> known models/testsets), so a bad
    file fails before any stage does work. The returned dict carries `_path` and `_root` (absolute)."""
    path = Path(path) if path else find_project_root() / PARAMS_FILE
    if not path.exists():
        raise UserError(f"params file not found: {path}")
    raw = path.read_bytes() if path.is_file() else None
    if raw is None:
        raise UserError(f"params file {path}: not a file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise UserError(f"{path}:{line}: not UTF-8 (byte {raw[e.start]:#04x}); save the file as UTF-8") from None
    try:
        tree = read_yaml(text) or {}
        if isinstance(tree, dict) and validate_schema:
            validate(tree)
        tree = copy.deepcopy(tree)
    except RecursionError:
        raise UserError(
            f"{path}: nested too deeply (more levels of lists or mappings than Python can read); "
            "params.yaml needs a few levels only"
        ) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        loc = f"{path}:{mark.line + 1}" if mark else str(path)
        raise UserError(f"{loc}: invalid YAML: {getattr(e, 'problem', e)}") from None
    if not isinstance(tree, dict):
        raise UserError(
            f"{path}: expected a mapping of sections (study, data, train, runs, ...), got {type(tree).__name__}"
        )
    if validate_schema:
        check_values(tree)
        check_references(tree)
        environment.check()  # the OODCORR_* variables the stages read: here, so `study check` sees them too
    tree["_path"] = str(path.resolve())
    tree["_root"] = str(path.resolve().parent)
    return tree


MIN_MAX_LENGTH = 16  # tokens: a prompt shorter than this cannot hold the pattern's own words
MAX_TEXT = 10_000  # characters of a pattern / verbaliser word: a prompt template, not a document


def check_values(tree: dict) -> None:
    """Value checks of what every stage reads (types are checked by `validate`; a run's values by
    run_settings.RunSettings, each stage's section by its settings object): one line naming the key."""
    from oodcorr.core.choices import parse_threads
    from oodcorr.settings.names import check_inside_project
    from oodcorr.settings.project import Project
    from oodcorr.settings.tracking_uri import check_tracking_uri

    study = tree.get("study") or {}
    Project.from_params(tree)  # study.tracking: mlflow | none
    check_tracking_uri(study.get("tracking_uri"))
    for section in ("data", "analyze"):  # the folders these stages replace: inside the project
        if (tree.get(section) or {}).get("out") is not None:
            check_inside_project(tree[section]["out"], f"params: {section}.out")

    parse_threads(study.get("threads"), "params: study.threads")
    if "runs" in tree and not tree["runs"]:
        raise UserError("params: runs: empty; add runs (or `oodcorr study use <preset>`)")


def check_references(params: dict) -> None:
    """Every run names a known model and known testsets; evaluate.testsets are known (one line each)."""
    from oodcorr.core.choices import BUILTIN_MODELS
    from oodcorr.settings.registry import known_names

    testsets = known_names(params)
    for key, run in (params.get("runs") or {}).items():
        run = run or {}
        for field in ("train_set", "id_testset"):
            name = run.get(field)
            if name is not None and name not in testsets:
                raise UserError(f"params: runs.{key}.{field}: unknown testset {name!r}{closest(name, testsets)}")
        model = run.get("model")
        if (
            model is not None
            and model not in BUILTIN_MODELS
            and not Path(model).exists()
            and not HUB_ID_RE.fullmatch(model)
        ):
            raise UserError(
                f"params: runs.{key}.model: unknown model {model[:120]!r}"
                f"{closest(model, BUILTIN_MODELS)}; expected a built-in alias, a local folder or a hub "
                "id (owner/name: letters, digits, '.', '_', '-')"
            )
    for i, name in enumerate((params.get("evaluate") or {}).get("testsets") or []):
        if name not in testsets:
            raise UserError(f"params: evaluate.testsets[{i}]: unknown testset {name!r}{closest(str(name), testsets)}")


def deep_merge(base: dict, over: dict) -> dict:
    """`over` on top of `base`, recursing into mappings that both sides have (inputs are not modified)."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        out[key] = (
            deep_merge(out[key], value)
            if isinstance(value, dict) and isinstance(out.get(key), dict)
            else copy.deepcopy(value)
        )
    return out
