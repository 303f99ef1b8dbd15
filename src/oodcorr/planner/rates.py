"""Compute rates that price a plan, read in this one place: scoring throughput (examples/s) and training step time
(s per step) for one model at one dtype on one machine.

Where a rate comes from, in order:
  1. stated: --examples-per-s / --train-hours (the user measured it);
  2. this project's rates file, .oodcorr/rates.json, for this model, dtype, device and machine (written by the
     measurement below; a user can read and edit it);
  3. measured now (measure.py, a few minutes with the model at that dtype) and kept in that file;
  4. the rates shipped with the package (rates.json beside this module: measured by bench/speed/eval_throughput.py and
     bench/speed/train_bf16.py on the machine they name) only where the machine, model and dtype are the same.
A rate for another model, dtype or machine never stands in: the plan then measures or says which rate to pass.

File format (both files): {"scoring": [{model, dtype, device, machine, examples_per_s, source}],
"training": [{model, dtype, device, machine, step_s, source}]}; a file that is not that (a JSON list, a NaN,
zero or negative rate) is one line naming the file and the field.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from oodcorr.core.errors import UserError

PROJECT_RATES = Path(".oodcorr") / "rates.json"
PACKAGED_RATES = Path(__file__).with_name("rates.json")
KINDS = {"scoring": "examples_per_s", "training": "step_s"}


def positive_rate(value, what: str) -> float:
    """A rate the user states: finite and > 0, else one line naming it."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise UserError(f"{what}: expected a number > 0, got {value!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise UserError(f"{what}: must be a finite number > 0, got {value!r}")
    return v


def read_rates(path: Path) -> dict:
    """{"scoring": [...], "training": [...]} from `path` ({} lists where it does not exist), checked (module notes)."""
    if not path.is_file():
        return {k: [] for k in KINDS}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"{path}: not readable JSON ({e})") from None
    if not isinstance(data, dict):
        raise UserError(
            f"{path}: expected a JSON object with 'scoring' and 'training' lists, got a {type(data).__name__}"
        )
    out = {}
    for kind, field in KINDS.items():
        rows = data.get(kind, [])
        if not isinstance(rows, list):
            raise UserError(f"{path}: {kind}: expected a list of rates, got a {type(rows).__name__}")
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise UserError(f"{path}: {kind}[{i}]: expected an object, got a {type(row).__name__}")
            for key in ("model", "dtype", "device", "machine"):
                if not isinstance(row.get(key), str):
                    raise UserError(f"{path}: {kind}[{i}].{key}: expected a string, got {row.get(key)!r}")
            v = row.get(field)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise UserError(f"{path}: {kind}[{i}].{field}: expected a finite number > 0, got {v!r}")
        out[kind] = rows
    return out


def device_and_machine() -> tuple[str, str]:
    """("cuda" or "cpu", the machine in words: the GPU's name, else the CPU's model name and core count)."""
    import torch

    if torch.cuda.is_available():
        return "cuda", torch.cuda.get_device_name(0)
    name = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                name = line.partition(":")[2].strip()
                break
    except OSError:
        pass
    import platform

    return "cpu", f"{name or platform.processor() or platform.machine()}, {os.cpu_count()} cores"


def resolve_dtype_name(dtype: str | None) -> str:
    """float32 / bfloat16 / float16: `dtype` as given, auto (or None) as the stages resolve it on this machine."""
    from oodcorr.modeling.precision import DTYPES, resolve_dtype

    if dtype not in (None, *DTYPES):
        raise UserError(f"plan: --dtype: expected one of {', '.join(DTYPES)}, got {dtype!r}")
    return str(resolve_dtype(dtype or "auto")).replace("torch.", "")


def _match(rows, model, dtype, device, machine):
    return next(
        (
            r
            for r in reversed(rows)
            if (r["model"], r["dtype"], r["device"], r["machine"]) == (model, dtype, device, machine)
        ),
        None,
    )


def lookup(root: Path, kind: str, model: str, dtype: str) -> tuple[float | None, str, str]:
    """(rate, where it comes from, why not) for `kind` (scoring | training) on this machine; rate None where
    neither the project's file nor the package has it for this model, dtype and machine."""
    device, machine = device_and_machine()
    field = KINDS[kind]
    for path in (root / PROJECT_RATES, PACKAGED_RATES):
        row = _match(read_rates(path)[kind], model, dtype, device, machine)
        if row:
            name = path.name if path == PACKAGED_RATES else PROJECT_RATES
            return float(row[field]), f"{name}: {row.get('source')}", ""
    others = [f"{r['model']} {r['dtype']} on {r['machine']}" for r in read_rates(PACKAGED_RATES)[kind]]
    why = f"no {kind} rate measured for {model} at {dtype} on this machine ({machine})"
    return None, "", why + (f"; the package's rates are for {', '.join(others)}" if others else "")


def record(root: Path, kind: str, model: str, dtype: str, value: float, source: str) -> Path:
    """Keep a measured rate in the project's rates file (replacing the same model, dtype and machine's)."""
    from oodcorr.core.io import write_json

    device, machine = device_and_machine()
    path = root / PROJECT_RATES
    data = read_rates(path)
    data[kind] = [
        r for r in data[kind] if (r["model"], r["dtype"], r["device"], r["machine"]) != (model, dtype, device, machine)
    ]
    data[kind].append(
        {
            "model": model,
            "dtype": dtype,
            "device": device,
            "machine": machine,
            KINDS[kind]: float(value),
            "source": source,
        }
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, data)
    return path


def loadable_here(model: str) -> str:
    """ "" where `model` can be loaded on this machine without a download, else why not."""
    from oodcorr.modeling.models import model_path

    try:
        path = model_path(model)
        if Path(path).exists():
            return ""
        from huggingface_hub import try_to_load_from_cache

        if "/" in str(path) and isinstance(try_to_load_from_cache(path, "config.json"), str):
            return ""
    except (UserError, OSError, ValueError) as e:
        return str(e)
    return f"{model} is not on this machine (no local copy to measure)"


def _rate(root: Path, kind: str, model: str, dtype: str, measure: bool, say) -> tuple[float | None, str]:
    """(this machine's rate, where it comes from) or (None, why not): the project's or package's, else measured
    now and kept (where `measure` and the model is here)."""
    value, where, why = lookup(root, kind, model, dtype)
    if value is not None:
        return value, where
    missing = loadable_here(model) if measure else "not measured"
    if missing:
        return None, f"{why}; {missing}" if measure else why
    from oodcorr.planner import measure as m

    say(f"measuring {model}'s {kind} rate at {dtype} on this machine (a few minutes; kept in {PROJECT_RATES}) ...")
    value, where = (m.measure_scoring if kind == "scoring" else m.measure_training)(model, dtype)
    record(root, kind, model, dtype, value, where)
    return value, f"{PROJECT_RATES}: {where}"


def scoring_rate(
    root: Path, model: str | None, dtype: str | None, measure: bool = True, say=print
) -> tuple[float | None, str]:
    """Examples/s for `model` at `dtype` (None: auto) on this machine, or (None, why not)."""
    if not model:
        return None, "unknown for an unnamed model (--model)"
    return _rate(root, "scoring", model, resolve_dtype_name(dtype), measure, say)


def rates_for(
    root: Path,
    model: str,
    dtype: str | None,
    examples_per_s=None,
    train_hours=None,
    train_steps: int | None = None,
    measure: bool = True,
    say=print,
) -> dict:
    """{"examples_per_s", "eval_source", "train_h", "train_source", "dtype"}: stated rates first, else this
    machine's measured ones (measured now and kept where `measure`), else a UserError saying what to pass."""
    out = {"dtype": dtype}
    if examples_per_s is not None:
        out.update(examples_per_s=positive_rate(examples_per_s, "plan: --examples-per-s"), eval_source="stated")
    if train_hours is not None:
        out.update(train_h=float(train_hours), train_source="stated")
    if "examples_per_s" in out and "train_h" in out:
        return out
    dtype = out["dtype"] = resolve_dtype_name(dtype)
    if "examples_per_s" not in out:
        eps, where = _rate(root, "scoring", model, dtype, measure, say)
        if eps is None:
            raise UserError(f"plan: {where}; pass --examples-per-s (score a few checkpoints and divide)")
        out.update(examples_per_s=eps, eval_source=where)
    if "train_h" not in out:
        if not train_steps:
            raise UserError(
                "plan: training hours per run need the steps per run: pass --train-steps or "
                "--train-hours (params.yaml's train.max_steps is read when set)"
            )
        step_s, where = _rate(root, "training", model, dtype, measure, say)
        if step_s is None:
            raise UserError(f"plan: {where}; pass --train-hours (per run)")
        out.update(train_h=step_s * train_steps / 3600, train_source=f"{where}, {train_steps} steps")
    return out
