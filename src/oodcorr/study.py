"""The study as a whole: presets (`oodcorr study use quickstart|paper`), cross-reference checks of
params.yaml (runs -> models/testsets) before any stage runs, and the launch commands (oodcorr.launch).
The MLflow UI and sync commands live with tracking (oodcorr.tracking.commands)."""

from __future__ import annotations

import itertools
import re
import shutil
from pathlib import Path

import click

from oodcorr.core.errors import UserError, closest
from oodcorr.settings.config import check_references, load_params, validate
from oodcorr.settings.names import check_name, inside
from oodcorr.settings.yaml_dialect import check_yaml_text, read_yaml

PRESETS_DIR = Path(__file__).parent / "presets"


def presets() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.yaml"))


def run_key(model: str, train_set: str, shots: int, seed: int) -> str:
    """Readable run keys such as smollm2-135m_mnli_64_s0 (train-set suffix `_train` dropped); a hub id
    owner/name becomes owner--name, a local folder its folder name (a key names a folder: no separators)."""
    ts = re.sub(r"_train$", "", train_set)
    name = Path(model).name if "/" in model and Path(model).exists() else model.replace("/", "--")
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", name).lstrip(".-")
    return f"{name}_{ts}_{shots}_s{seed}"


def expand_grid(grid: dict) -> dict:
    """models x train sets x shots x seeds -> runs (data_seed = seed, as the paper varies both).
    `train_by_model: {model: {lr: ..., ...}}` adds per-model training settings to that model's runs."""
    runs = {}
    by_model = grid.get("train_by_model") or {}
    for model, train_set, shots, seed in itertools.product(
        grid["models"], grid["train_sets"], grid["shots"], grid["seeds"]
    ):
        id_testset = (grid.get("id_testsets") or {}).get(train_set, re.sub(r"_train$", "", train_set))
        runs[run_key(model, train_set, shots, seed)] = {
            "model": model,
            "train_set": train_set,
            "id_testset": id_testset,
            "shots": int(shots),
            "data_seed": int(seed),
            "seed": int(seed),
            **by_model.get(model, {}),
        }
    return runs


def load_preset(name: str, **overrides) -> dict:
    """A preset as a params tree; a `grid` section is expanded into `runs` (overrides: models, shots, ...)."""
    path = inside(PRESETS_DIR, check_name(name, "preset", "study use"), ".yaml")
    if not path.exists():
        raise UserError(f"unknown preset {name!r}{closest(name, presets())}; presets: {', '.join(presets())}")
    tree = read_yaml(path.read_text())
    grid = tree.pop("grid", None)
    if grid is not None:
        for model in grid.get("train_by_model") or {}:  # checked against the preset's models, before --models
            if model not in grid["models"]:
                raise UserError(
                    f"{path}: grid.train_by_model.{model} is not one of grid.models"
                    f"{closest(str(model), grid['models'])}; grid.models: {', '.join(grid['models'])}"
                )
        grid.update({k: v for k, v in overrides.items() if v})
        tree["runs"] = expand_grid(grid)
    elif any(overrides.values()):
        given = ", ".join(f"--{k.replace('_', '-')}" for k, v in overrides.items() if v)
        grids = ", ".join(p for p in presets() if "grid" in (read_yaml((PRESETS_DIR / f"{p}.yaml").read_text()) or {}))
        raise UserError(
            f"preset {name!r} lists its runs one by one, so {given} cannot change them; these options "
            f"apply to the grid presets ({grids}); edit runs in params.yaml instead"
        )
    validate(tree)
    return tree


def split_option(option: str, text: str | None, kind=str) -> list | None:
    """A comma list from the command line: items non-empty; for numbers, integers (>= 1 for shots, >= 0
    for seeds); one line naming the option otherwise."""
    if text is None:
        return None
    items = [x.strip() for x in text.split(",")]
    if not all(items):
        raise UserError(
            f"{option} {text!r}: an empty item; expected a comma list such as {'16,64' if kind is int else 'a,b'}"
        )
    if kind is not int:
        return items
    low = 1 if option == "--shots" else 0
    out = []
    for item in items:
        try:
            value = int(item)
        except ValueError:
            value = None
        if value is None or value < low or str(value) != item.lstrip("+"):
            raise UserError(f"{option}: expected integers >= {low}, got {item!r}")
        out.append(value)
    return out


def check_params(path=None, data: bool = False) -> dict:
    params = load_params(path)
    check_references(params)
    check_study(params, data=data)
    return params


def check_study(params: dict, data: bool = False) -> None:
    """Everything a stage would refuse in params.yaml, checked at once and before any stage runs (dvc.yaml's
    `check` stage runs this first, so a rejected params file leaves every output as it was): the runs'
    resolved settings, every testset the study uses, evaluate and analyze settings, the launch settings; with
    `data`, every local and synthetic testset built in memory as prepare builds it (columns, labels, slices,
    sizes), so what prepare would reject is rejected here (hub testsets need the network: prepare loads them)."""
    from oodcorr.data.prepare import build, referenced_names
    from oodcorr.data.settings import PrepareSettings
    from oodcorr.evaluate.settings import EvaluateSettings
    from oodcorr.launch.core import settings as launch_settings
    from oodcorr.settings.analyze import AnalyzeSettings
    from oodcorr.settings.registry import resolve
    from oodcorr.settings.run_settings import RunSettings

    if not params.get("runs"):
        raise UserError("params: runs: missing; add runs (or `oodcorr study use <preset>`)")
    for key in params["runs"]:
        RunSettings.from_params(params, key)
    PrepareSettings.from_params(params)
    for name in referenced_names(params):
        if resolve(params, name)["kind"] != "hub" and data:
            build(params, name)
    EvaluateSettings.from_params(params)
    AnalyzeSettings.from_params(params).check_against(params)
    launch_settings(params)


@click.group()
def study():
    """Presets and checks for the whole study (dvc.yaml runs every stage)."""


from oodcorr.launch.commands import COMMANDS as _LAUNCH_COMMANDS  # noqa: E402  launch | status | collect

for _command in _LAUNCH_COMMANDS:
    study.add_command(_command)


def _preset_help() -> str:
    return (
        "Write PRESET into params.yaml; presets: " + ", ".join(presets()) + ". Your own testsets (declared "
        "under data.testsets, with their place in evaluate.testsets) and your comments carry over; the old "
        "file is kept as params.yaml.bak (one backup, replaced by the next switch), and --restore swaps it back. "
        "--diff shows the change first."
    )


@study.command("use", help=_preset_help(), short_help="Switch params.yaml to a preset (or --restore a backup).")
@click.argument("preset", required=False)
@click.option(
    "--params",
    "params_file",
    default="params.yaml",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="The params file to write.",
)
@click.option("--models", help="Comma list overriding the preset's models (aliases or hub ids).")
@click.option("--shots", help="Comma list overriding the preset's shots, e.g. 16,64.")
@click.option("--seeds", help="Comma list overriding the preset's seeds.")
@click.option("--train-sets", help="Comma list overriding the ID training pools, e.g. mnli_train.")
@click.option("--diff", "show_diff", is_flag=True, help="Print what would change in params.yaml; write nothing.")
@click.option("--force", is_flag=True, help="Write the preset as it is, without carrying your testsets over.")
@click.option(
    "--restore", is_flag=True, help="Bring params.yaml.bak back; the file it replaces becomes the backup (no PRESET)."
)
def use_cmd(preset, params_file, models, shots, seeds, train_sets, show_diff, force, restore):
    import difflib

    from oodcorr.settings import params_edit

    target = Path(params_file)
    if restore:
        if preset:
            raise UserError(f"--restore takes no PRESET (got {preset!r}): it brings the newest backup back")
        back, saved = params_edit.restore(target)
        kept = f"; the file it replaced is now {back.name}" if saved else ""
        click.echo(f"{target}: restored from {back.name}{kept}; now run `dvc repro`")
        return
    if not preset:
        raise UserError(f"name a preset ({', '.join(presets())}) or pass --restore")
    tree = load_preset(
        preset,
        models=split_option("--models", models),
        shots=split_option("--shots", shots, int),
        seeds=split_option("--seeds", seeds, int),
        train_sets=split_option("--train-sets", train_sets),
    )
    old = target.read_text() if target.exists() else ""
    if old.strip() and not force:  # the old file's testsets and comments carry over: it must parse
        check_yaml_text(target, old)
    texts = [(PRESETS_DIR / f"{p}.yaml").read_text() for p in presets()]
    every = [(read_yaml(text).get("data") or {}).get("testsets") or {} for text in texts]
    text, tree, mine = params_edit.switch(
        old, (PRESETS_DIR / f"{preset}.yaml").read_text(), tree, every, keep=not force
    )
    lost = 0
    if not force and old.strip():
        text, lost = params_edit.keep_comments(old, text, texts)
    validate(tree)
    check_references(tree)
    check_study(tree)
    if show_diff:
        diff = difflib.unified_diff(
            old.splitlines(keepends=True),
            text.splitlines(keepends=True),
            fromfile=f"{target} (now)",
            tofile=f"{target} (preset {preset})",
        )
        click.echo("".join(diff) or f"{target}: already preset {preset}; nothing would change", nl=False)
        return
    from oodcorr.core.io import write_text

    backup = None
    if old and old != text:
        backup = params_edit.backup_path(target)
        shutil.copyfile(target, backup)
    write_text(target, text)
    carried = f"; kept your testsets {', '.join(mine)}" if mine else ""
    carried += f"; {lost} of your comments were on keys the preset changes or lacks" if lost else ""
    kept = f" (previous file kept as {backup.name}; `oodcorr study use --restore` brings it back)" if backup else ""
    click.echo(
        f"{target}: preset {preset} with {len(tree.get('runs') or {})} runs{carried}{kept}; now run "
        f"`dvc repro` (or `dvc exp run`)"
    )


@study.command("check")
@click.option(
    "--params",
    "params_file",
    default=None,
    type=click.Path(dir_okay=False),
    help="params.yaml to check (default: the project's).",
)
@click.option(
    "--stamp",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write this file when the check passes (dvc.yaml's check stage: every stage depends on it).",
)
def check_cmd(params_file, stamp):
    """Validate params.yaml (types, values, unknown keys, runs -> models/testsets, the local and synthetic
    testsets' rows) without running or writing anything but --stamp."""
    try:
        params = check_params(params_file, data=True)
    except UserError as e:  # under `dvc repro`: the .dvc files DVC rewrote for rejected data put back
        from oodcorr.data.dvc_sources import note
        from oodcorr.settings.config import find_project_root

        raise UserError(
            f"{e}{note(Path(params_file).resolve().parent if params_file else find_project_root())}"
        ) from None
    root = Path(params_file).resolve().parent if params_file else None
    for line in shadowed_overrides(params, committed_params(root, params_file)):
        click.echo(line, err=True)
    if stamp:
        from oodcorr.core.io import write_text

        write_text(stamp, "params.yaml passed `oodcorr study check`\n")  # constant: nothing downstream re-runs
    click.echo(
        f"ok: {len(params.get('runs') or {})} runs, "
        f"{len((params.get('evaluate') or {}).get('testsets') or [])} evaluation testsets"
    )


def committed_params(root: Path | None, params_file: str | None) -> dict | None:
    """params.yaml as git's HEAD has it (the baseline `dvc exp run -S` changes), None outside git or untracked."""
    import subprocess

    import yaml

    from oodcorr.settings.config import PARAMS_FILE, find_project_root

    path = Path(params_file).resolve() if params_file else find_project_root() / PARAMS_FILE
    try:
        res = subprocess.run(
            ["git", "show", f"HEAD:./{path.name}"], cwd=root or path.parent, capture_output=True, text=True, timeout=30
        )
        tree = yaml.safe_load(res.stdout) if res.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, yaml.YAMLError):
        return None
    return tree if isinstance(tree, dict) else None


def shadowed_overrides(params: dict, baseline: dict | None) -> list[str]:
    """A warning per `train` key changed from the baseline (`dvc exp run -S train.lr=1e-3`, or an edit) that some
    runs set themselves: the change does not reach them, so their stages have nothing to do. None without a
    baseline (no git): then nothing says what changed."""
    if baseline is None:
        return []
    train, base = params.get("train") or {}, baseline.get("train") or {}
    out = []
    for key, value in train.items():
        if key in base and base[key] == value:
            continue
        base_runs = baseline.get("runs") or {}
        own = [  # runs that keep their own value (one changed along with train's was overridden on purpose)
            k
            for k, r in (params.get("runs") or {}).items()
            if isinstance(r, dict) and key in r and (base_runs.get(k) or {}).get(key, r[key]) == r[key]
        ]
        if own:
            out.append(
                f"warning: train.{key} = {value} does not reach {len(own)} run(s) that set their own {key}: "
                f"{', '.join(own)}; change theirs with `dvc exp run -S 'runs.<run>.{key}=...'` or in params.yaml"
            )
    return out


@study.command("runs")
@click.option(
    "--params",
    "params_file",
    default=None,
    type=click.Path(dir_okay=False),
    help="params.yaml to read (default: the project's).",
)
def runs_cmd(params_file):
    """List the run keys of the study (one per line)."""
    for key in check_params(params_file).get("runs") or {}:
        click.echo(key)
