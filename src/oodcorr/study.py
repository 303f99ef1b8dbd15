"""The study as a whole: presets (`oodcorr study use quickstart|paper`), cross-reference checks of
params.yaml (runs -> models/testsets) before any stage runs, and the MLflow UI on 127.0.0.1."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import sys
from pathlib import Path

import click
import yaml

from oodcorr.config import check_references, load_params, read_yaml, validate
from oodcorr.errors import UserError, closest

PRESETS_DIR = Path(__file__).parent / "presets"


def presets() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.yaml"))


def run_key(model: str, train_set: str, shots: int, seed: int) -> str:
    """Readable run keys such as smollm2-135m_mnli_64_s0 (train-set suffix `_train` dropped)."""
    ts = re.sub(r"_train$", "", train_set)
    return f"{model}_{ts}_{shots}_s{seed}"


def expand_grid(grid: dict) -> dict:
    """models x train sets x shots x seeds -> runs (data_seed = seed, as the paper varies both)."""
    runs = {}
    for model, train_set, shots, seed in itertools.product(
            grid["models"], grid["train_sets"], grid["shots"], grid["seeds"]):
        id_testset = (grid.get("id_testsets") or {}).get(train_set, re.sub(r"_train$", "", train_set))
        runs[run_key(model, train_set, shots, seed)] = {
            "model": model, "train_set": train_set, "id_testset": id_testset,
            "shots": int(shots), "data_seed": int(seed), "seed": int(seed)}
    return runs


def load_preset(name: str, **overrides) -> dict:
    """A preset as a params tree; a `grid` section is expanded into `runs` (overrides: models, shots, ...)."""
    path = PRESETS_DIR / f"{name}.yaml"
    if not path.exists():
        raise UserError(f"unknown preset {name!r}{closest(name, presets())}; presets: {', '.join(presets())}")
    tree = read_yaml(path.read_text())
    grid = tree.pop("grid", None)
    if grid is not None:
        grid.update({k: v for k, v in overrides.items() if v})
        tree["runs"] = expand_grid(grid)
    validate(tree)
    return tree


def check_params(path=None) -> dict:
    params = load_params(path)
    check_references(params)
    return params


@click.group()
def study():
    """Presets and checks for the whole study (dvc.yaml runs every stage)."""


@study.command("use")
@click.argument("preset")
@click.option("--params", "params_file", default="params.yaml", show_default=True, type=click.Path(dir_okay=False))
@click.option("--models", help="Comma list overriding the preset's models (aliases or hub ids).")
@click.option("--shots", help="Comma list overriding the preset's shots, e.g. 16,64.")
@click.option("--seeds", help="Comma list overriding the preset's seeds.")
@click.option("--train-sets", help="Comma list overriding the ID training pools, e.g. mnli_train.")
def use_cmd(preset, params_file, models, shots, seeds, train_sets):
    """Write PRESET (quickstart | paper) into params.yaml (the old file is kept as params.yaml.bak)."""
    split = lambda s, f=str: [f(x) for x in s.split(",")] if s else None  # noqa: E731
    tree = load_preset(preset, models=split(models), shots=split(shots, int), seeds=split(seeds, int),
                       train_sets=split(train_sets))
    check_references(tree)
    target = Path(params_file)
    if target.exists():
        shutil.copyfile(target, target.with_name(target.name + ".bak"))
    from oodcorr.io import write_text

    header = f"# oodcorr preset {preset!r} (written by `oodcorr study use {preset}`)\n"
    write_text(target, header + yaml.safe_dump(tree, sort_keys=False, width=110))
    click.echo(f"{target}: preset {preset} with {len(tree.get('runs') or {})} runs; now run `dvc repro` "
               f"(or `dvc exp run`)")


@study.command("check")
@click.option("--params", "params_file", default=None, type=click.Path(dir_okay=False))
def check_cmd(params_file):
    """Validate params.yaml (types, unknown keys, runs -> models/testsets) without running anything."""
    params = check_params(params_file)
    click.echo(f"ok: {len(params.get('runs') or {})} runs, "
               f"{len((params.get('evaluate') or {}).get('testsets') or [])} evaluation testsets")


@study.command("runs")
@click.option("--params", "params_file", default=None, type=click.Path(dir_okay=False))
def runs_cmd(params_file):
    """List the run keys of the study (one per line)."""
    for key in (check_params(params_file).get("runs") or {}):
        click.echo(key)


@click.command("ui")
@click.option("--port", default=5000, show_default=True, type=int)
@click.option("--params", "params_file", default=None, type=click.Path(dir_okay=False))
def ui_cmd(port, params_file):
    """Serve the project's MLflow store in the MLflow UI on 127.0.0.1 only."""
    from oodcorr import tracking

    params = load_params(params_file)
    uri = tracking.tracking_uri(params)
    cmd = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--host", "127.0.0.1",
           "--port", str(port)]
    if uri.startswith("sqlite:"):
        cmd += ["--default-artifact-root", tracking.artifact_root(params)]
    import socket

    if not 1 <= port <= 65535:
        raise UserError(f"--port {port}: must be in 1..65535")
    with socket.socket() as s:  # fail with one line now, not after mlflow has started and died
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            raise UserError(f"--port {port}: cannot listen on 127.0.0.1:{port} ({e.strerror or e}); "
                            "pick another port") from None
    db = tracking.sqlite_file(uri)
    if db is not None and not db.exists():
        tracking.ensure_store(uri)  # built crash-safely here, not half-migrated by a killed UI
    click.echo(f"MLflow UI for {uri} on http://127.0.0.1:{port} (Ctrl-C to stop)", err=True)
    os.execv(sys.executable, cmd)
