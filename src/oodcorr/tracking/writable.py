"""Where tracking may write, checked before it does: a local MLflow store that is read-only is a one-line error
saying so and what to do (it never heals by waiting, unlike a server that is down), and a run folder that is a
DVC-tracked output of its own (a saved study's `runs/<run>.dvc`) never gets tracking records written into it:
that would change the output DVC tracks (`dvc status`: modified), which `dvc checkout` does not undo."""

from __future__ import annotations

import os
from pathlib import Path

from oodcorr.core.errors import UserError


def read_only_reason(db: Path) -> str | None:
    """Why the sqlite store `db` cannot be written, or None: a read-only file system, the file without write
    permission, or its folder without (sqlite writes its journal next to the file)."""
    db = Path(db)
    try:
        if os.statvfs(db).f_flag & os.ST_RDONLY:
            return "on a read-only file system"
    except OSError:
        return None
    if not os.access(db, os.W_OK):
        return "no write permission on the file"
    if not os.access(db.parent, os.W_OK):
        return f"no write permission on its folder {db.parent}, where sqlite writes its journal"
    return None


def check_writable(db: Path) -> None:
    """UserError naming `db` when the store cannot be written (read_only_reason)."""
    why = read_only_reason(db)
    if why:
        raise UserError(
            f"{db}: the MLflow store is read-only ({why}); make it writable (chmod u+w on the file "
            "and its folder, or remount), or set MLFLOW_TRACKING_URI / study.tracking_uri to a writable "
            "store, or run without MLflow (study.tracking: none, `oodcorr analyze --no-mlflow`)"
        )


def dvc_tracked(run_folder: Path) -> Path | None:
    """The .dvc file that tracks `run_folder` as an output of its own (`dvc add`, e.g. a saved study's runs), or
    None."""
    marker = Path(run_folder).with_name(Path(run_folder).name + ".dvc")
    return marker if marker.is_file() else None


def refuse_dvc_tracked(run_folder: Path) -> None:
    marker = dvc_tracked(run_folder)
    if marker is not None:
        study = marker.parent.parent
        hint = (
            f"; `oodcorr ui --study {study.name}` shows it in MLflow from a store of its own"
            if study.parent.name == "studies"
            else ""
        )
        raise UserError(
            f"{run_folder}: a DVC-tracked output ({marker.name}); tracking records are never written into it{hint}"
        )
