"""The prepared-testset folder (written by the data stage, read by train and evaluate):
data/prepared/<name>.jsonl (rows: id, premise, hypothesis, label, slice) + manifest.json."""

from __future__ import annotations

import json
from pathlib import Path

from oodcorr.core import io
from oodcorr.core.errors import UserError
from oodcorr.settings.names import check_name, inside
from oodcorr.settings.project import Project, scored_testsets  # noqa: F401

MANIFEST = "manifest.json"


def prepared_dir(project: Project | dict, out_dir: str | Path | None = None) -> Path:
    """Where prepared testsets live: `out_dir`, else params `data.out` (project-relative; Project.data_out)."""
    if out_dir is not None:
        return Path(out_dir)
    project = Project.of(project)
    return project.path(project.data_out)


def testset_file(out_dir: str | Path, name: str) -> Path:
    """<out_dir>/<name>.jsonl for a checked testset name, contained in `out_dir`: the one place a testset
    name becomes a path (prepare writes and removes it, train and evaluate read it)."""
    return inside(out_dir, check_name(name, "testset", "testset name"), ".jsonl")


def read_manifest_file(out: Path) -> dict | None:
    path = Path(out) / MANIFEST
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise UserError(
            f"{path}:{e.lineno}: invalid manifest JSON ({e.msg}); delete it and re-run `oodcorr data prepare`"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("testsets"), dict):
        raise UserError(f"{path}: not an oodcorr manifest (no 'testsets' mapping)")
    for name in data["testsets"]:  # a key becomes a file name (and prepare's cleanup removes stale ones)
        check_name(name, "testset", f"{path}: testsets")
    return data


def read_manifest(out_dir: str | Path) -> dict:
    """The manifest of a prepared folder ({"testsets": {}} when nothing was prepared yet)."""
    return read_manifest_file(Path(out_dir)) or {"testsets": {}}


def load_prepared(out_dir: str | Path, name: str) -> list[dict]:
    """Rows of a prepared testset; UserError telling how to prepare it when it is missing."""
    out = Path(out_dir)
    path = testset_file(out, name)
    if name not in read_manifest(out)["testsets"] or not path.exists():
        raise UserError(f"testset {name} was not prepared; run `oodcorr data prepare` (or dvc repro prepare)")
    rows = []
    for lineno, row in io.iter_json_objects(path, prefix=f"prepared testset {name}: "):
        missing = [k for k in ("id", "premise", "hypothesis", "label") if k not in row]
        if missing or row.get("label") not in ("entailment", "non_entailment"):
            what = f"missing {', '.join(missing)}" if missing else f"label {row.get('label')!r}"
            raise UserError(f"{path}:{lineno}: prepared testset {name}: {what}; re-run `oodcorr data prepare`")
        rows.append(row)
    return rows
