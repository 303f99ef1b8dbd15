"""DVC plumbing for the launcher: `dvc` on the project's own PATH, which runs are out of date, each stage's
command and dependency fingerprint from dvc.yaml, and the .gitignore files a `dvc commit` leaves behind."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from oodcorr.core.errors import UserError
from oodcorr.launch.common import echo


def _env() -> dict:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.setdefault("DVC_NO_ANALYTICS", "1")
    return env


def dvc(args: list[str], root: Path, capture: bool = True) -> subprocess.CompletedProcess:
    exe = shutil.which("dvc", path=_env()["PATH"])
    if exe is None:
        raise UserError("dvc not found next to this Python or on PATH (activate the project's environment)")
    res = subprocess.run([exe, *args], cwd=root, env=_env(), text=True, capture_output=capture)
    if res.returncode != 0:
        lines = [line.strip() for line in ((res.stderr or "") + (res.stdout or "")).splitlines() if line.strip()]
        ours = [line[len("error: ") :] for line in lines if line.startswith("error: ")]  # a stage's own line
        if ours:
            raise UserError(ours[0])
        errors = [line for line in lines if line.startswith("ERROR")] or lines[:1]
        raise UserError(f"`dvc {' '.join(args)}` failed: {errors[0] if errors else f'exit {res.returncode}'}")
    return res


def dvc_status(root: Path) -> dict:
    out = dvc(["status", "--json"], root).stdout.strip()
    return json.loads(out) if out else {}


def stale_runs(status: dict, runs: dict) -> dict[str, list[str]]:
    """{run key: [stage names to run, in order]} for runs whose train or evaluate stage is out of date
    (a stale train stage means its evaluation reruns too, as `dvc repro` would)."""
    out = {}
    for key in runs:
        train, evaluate = f"train@{key}", f"evaluate@{key}"
        if train in status:
            out[key] = [train, evaluate]
        elif evaluate in status:
            out[key] = [evaluate]
    return out


def _hash_path(path: Path) -> str:
    h = hashlib.sha256()
    if path.is_dir():
        for f in sorted(p for p in path.rglob("*") if p.is_file()):
            h.update(str(f.relative_to(path)).encode() + b"\0")
            h.update(hashlib.sha256(f.read_bytes()).digest())
    elif path.is_file():
        h.update(path.read_bytes())
    else:
        return "missing"
    return h.hexdigest()


def _lookup(tree, dotted: str):
    for part in dotted.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return None
        tree = tree[part]
    return tree


def stage_specs(root: Path, names: list[str], prepare_outputs: bool) -> dict[str, dict]:
    """For each stage: its command (from dvc.yaml), and a fingerprint of its dependencies that the launched
    stages do not produce themselves (code, data, params values), checked again before `dvc commit`.
    With prepare_outputs, the stage's outputs are readied as `dvc repro` does before running it
    (non-persistent outputs removed, persistent ones unprotected)."""
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    from oodcorr.settings.yaml_dialect import read_yaml

    specs = {}
    with Repo(str(root)) as repo, repo.lock if prepare_outputs else contextlib.nullcontext():
        try:
            dvc_yaml = str(root / "dvc.yaml")  # not relative to the current folder
            stages = {name: repo.stage.collect(f"{dvc_yaml}:{name}")[0] for name in names}
        except DvcException as e:
            raise UserError(f"dvc.yaml: {e}") from None
        produced = {o.def_path for s in stages.values() for o in s.outs}
        for name, stage in stages.items():
            fingerprint = {}
            for dep in stage.deps:
                if getattr(dep, "params", None) is not None:
                    tree = read_yaml((root / dep.def_path).read_text()) or {}
                    keys = dep.params if isinstance(dep.params, list) else list(dep.params)
                    value = {k: _lookup(tree, k) for k in keys}
                    fingerprint[f"params:{dep.def_path}"] = hashlib.sha256(
                        json.dumps(value, sort_keys=True, default=str).encode()
                    ).hexdigest()
                elif dep.def_path not in produced:
                    fingerprint[dep.def_path] = _hash_path(root / dep.def_path)
            if prepare_outputs:
                stage.remove_outs(ignore_remove=False, force=False)
            specs[name] = {"cmd": stage.cmd, "fingerprint": fingerprint, "outs": [o.def_path for o in stage.outs]}
    return specs


def changed_deps(root: Path, names: list[str], recorded: dict[str, dict]) -> list[str]:
    """Dependencies whose fingerprint differs from the one recorded at launch."""
    now = stage_specs(root, names, prepare_outputs=False)
    changed = []
    for name in names:
        old, new = recorded.get(name) or {}, now[name]["fingerprint"]
        changed += [f"{dep}" for dep in sorted(set(old) | set(new)) if old.get(dep) != new.get(dep)]
    return sorted(set(changed))


def stage_gitignores(root: Path, outs: list[str]) -> None:
    """The .gitignore files DVC writes next to the committed outputs: `git add` them when the project sets
    core.autostage (as `dvc repro` does), else say so."""
    files = sorted(
        {str(Path(o).parent / ".gitignore") for o in outs if (root / Path(o).parent / ".gitignore").is_file()}
    )
    if not (root / ".git").exists():
        return
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        autostage = bool(repo.config["core"].get("autostage", False))
    files = ["dvc.lock", *files]
    if autostage:
        subprocess.run(["git", "add", "--", *files], cwd=root, capture_output=True)
    else:
        echo("To track the changes with git, run:\n\n\tgit add " + " ".join(files), err=True)
