"""A local MLflow store that was copied or moved with its project keeps writing artifacts inside itself.

MLflow stores absolute artifact locations: every experiment's, run's and logged model's URI is fixed when it
is created, and MLflow has no API to change them. A project folder copied with `cp -r` (mlruns/ included)
would therefore log every new run's artifacts into the ORIGINAL project's mlruns/artifacts, and a moved one
into a folder that no longer exists. oodcorr builds each sqlite store with its artifacts next to it
(<store folder>/artifacts; the Default experiment's location records where that was), so a store whose
Default experiment points at another folder of the same name was copied or moved: its artifact URIs under
that old root are rewritten to the same paths under its own folder, in one transaction. Locations outside
the old root (an experiment a user pointed elsewhere, a remote bucket) are left as they are.
"""

from __future__ import annotations

import contextlib
import re
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

# (table, column, condition): every stored artifact URI in MLflow's sqlite schema
URI_COLUMNS = (
    ("experiments", "artifact_location", ""),
    ("runs", "artifact_uri", ""),
    ("logged_models", "artifact_location", ""),
    ("trace_tags", "value", " and key = 'mlflow.artifactLocation'"),
    ("workspaces", "default_artifact_root", ""),
)


def own_root(db: Path) -> str:
    """The artifact root of the store `db`: <its folder>/artifacts, as a file URI."""
    return (Path(db).parent / "artifacts").as_uri()


def created_root(con) -> str | None:
    """The artifact root the store was created with (from the Default experiment's location), if it is one
    oodcorr built: file://<folder>/artifacts."""
    row = con.execute("select artifact_location from experiments where experiment_id = 0").fetchone()
    found = re.fullmatch(r"(file://.+/artifacts)/0", row[0] or "") if row else None
    return found.group(1) if found else None


def relocate(db: Path, timeout: float) -> str | None:
    """Point the artifact URIs of a copied or moved store `db` into its own folder; returns the old root
    (None when the store is where it was created, or was not built by oodcorr)."""
    import sqlite3

    new = own_root(db)
    with contextlib.closing(sqlite3.connect(db, timeout=timeout, isolation_level=None)) as con:
        old = created_root(con)
        if old is None or old == new or Path(unquote(urlparse(old).path)).parent.name != Path(db).parent.name:
            return None
        tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
        con.execute("begin immediate")
        try:
            for table, column, where in URI_COLUMNS:
                if table in tables:
                    con.execute(
                        f"update {table} set {column} = ? || substr({column}, ?) "  # noqa: S608 (fixed names)
                        f"where ({column} = ? or substr({column}, 1, ?) = ?){where}",
                        (new, len(old) + 1, old, len(old) + 1, old + "/"),
                    )
            con.execute("commit")
        except BaseException:
            con.execute("rollback")
            raise
    print(
        f"warning: {db} was created in {Path(unquote(urlparse(old).path)).parent} (the project was copied or "
        f"moved); its artifact locations now point into {Path(db).parent / 'artifacts'}",
        file=sys.stderr,
    )
    return old
