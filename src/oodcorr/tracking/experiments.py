"""What tells MLflow runs apart across DVC experiments and model families: the DVC experiment a stage runs in
(`dvc exp run` names it in $DVC_EXP_NAME) and the params it changed against its baseline commit, the git commit
and data hashes of a run, and one colour per model family (MLflow's UI draws a run in the colour of its
`mlflow.runColor` tag, else in a colour hashed from its id, which can give two families two shades of pink)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

EXP_TAG, EXP_PARAMS_TAG, STUDY_TAG = "oodcorr.dvc_exp", "oodcorr.dvc_exp_params", "oodcorr.study"
COLOR_TAG = "mlflow.runColor"
# one hue per model family (in the order the study lists them), a shade per run of the family; the hues are
# the Okabe-Ito colour-blind-safe set, the shades darker and lighter versions of each
FAMILY_COLORS = (
    ("#0072B2", "#004C78", "#3B9BD6", "#002E4A"),  # blue
    ("#E69F00", "#A36F00", "#FFC34D", "#6B4900"),  # orange
    ("#009E73", "#00694C", "#4CC9A4", "#00402E"),  # green
    ("#CC79A7", "#8F4F73", "#E6A8CB", "#5C3049"),  # purple
    ("#D55E00", "#933F00", "#FF8C3F", "#5C2700"),
)  # red
ANALYSIS_COLOR = "#333333"


def run_color(cfg: dict, runs: dict | None) -> str | None:
    """The colour of a training run: its model family's hue (families in the order of the study's `runs`), a
    shade per run of that family (in the same order); None when the run is not among `runs`."""
    runs = {k: v for k, v in (runs or {}).items() if isinstance(v, dict)}
    families = list(dict.fromkeys(str(v.get("model")) for v in runs.values()))
    model = str(cfg.get("model"))
    if model not in families:
        return None
    same = [v for v in runs.values() if str(v.get("model")) == model]
    shade = next(
        (
            i
            for i, v in enumerate(same)
            if v.get("seed") == cfg.get("seed")
            and v.get("shots") == cfg.get("shots")
            and v.get("train_set") == cfg.get("train_set")
        ),
        0,
    )
    hues = FAMILY_COLORS[families.index(model) % len(FAMILY_COLORS)]
    return hues[shade % len(hues)]


def dvc_experiment(params_file: Path | None = None) -> dict[str, str]:
    """{EXP_TAG: name, EXP_PARAMS_TAG: "train.lr=0.001, ..."} inside `dvc exp run` (DVC sets $DVC_EXP_NAME and
    $DVC_EXP_BASELINE_REV for every stage it runs), the params being those of params.yaml that differ from the
    baseline commit's; {} outside an experiment."""
    name = os.environ.get("DVC_EXP_NAME")
    if not name:
        return {}
    tags = {EXP_TAG: name}
    changed = changed_params(params_file, os.environ.get("DVC_EXP_BASELINE_REV"))
    if changed:
        tags[EXP_PARAMS_TAG] = changed[:5000]
    return tags


def changed_params(params_file: Path | None, baseline: str | None) -> str:
    """ "a.b=new, ..." for the leaves of `params_file` that differ from the same file at git revision `baseline`."""
    import yaml

    from oodcorr.tracking.store import flatten

    if not params_file or not baseline or not Path(params_file).is_file():
        return ""
    path = Path(params_file).resolve()
    try:
        top = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], cwd=path.parent, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        rel = path.relative_to(Path(top).resolve()).as_posix() if top else path.name
        old = subprocess.run(
            ["git", "show", f"{baseline}:{rel}"], cwd=path.parent, capture_output=True, text=True, timeout=10
        )
        if old.returncode != 0:
            return ""
        before = flatten(yaml.safe_load(old.stdout) or {})
        after = flatten(yaml.safe_load(path.read_text()) or {})
    except (OSError, ValueError, subprocess.SubprocessError, yaml.YAMLError):
        return ""
    return ", ".join(f"{k}={after.get(k)}" for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k))


def exp_suffix(tags: dict) -> str:
    """ " · <experiment>" for a run name inside a DVC experiment, else ""."""
    return f" · {tags[EXP_TAG]}" if tags.get(EXP_TAG) else ""


def git_commit(root: Path) -> str | None:
    try:
        return (
            subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
            ).stdout.strip()
            or None
        )
    except (OSError, subprocess.SubprocessError):
        return None


def dvc_data_hashes(root: Path) -> dict[str, str]:
    """md5s of the DVC-tracked data (*.dvc files) for the run's tags."""
    import yaml

    tags = {}
    for f in sorted(root.glob("*.dvc")):
        try:
            outs = (yaml.safe_load(f.read_text()) or {}).get("outs") or []
        except Exception:
            continue
        for out in outs:
            if out.get("md5"):
                tags[f"dvc.{out.get('path', f.stem)}"] = out["md5"]
    return tags
