"""study.tracking_uri's form, checked with every other params value (settings.config.check_values): a URI
with a scheme MLflow opens and no spaces or control characters, so a value such as `not a uri ;rm -rf /` is one
line naming the key, not something MLflow (or a shell) is handed later."""

from __future__ import annotations

import re

from oodcorr.core.errors import UserError

# study.tracking_uri: a URI MLflow can open (a scheme it knows, no spaces); the driver of `postgresql+psycopg2` aside
URI_SCHEMES = ("sqlite", "http", "https", "file", "postgresql", "mysql", "mssql", "databricks", "databricks-uc", "uc")
_URI = re.compile(r"([A-Za-z][A-Za-z0-9.-]*)(?:\+[A-Za-z0-9_]+)?:[^\s\x00-\x1f\x7f]+")


def check_tracking_uri(uri, where: str = "params: study.tracking_uri") -> None:
    """One line naming `where` unless `uri` is null or looks like a URI MLflow opens."""
    if uri is None:
        return
    match = _URI.fullmatch(uri) if isinstance(uri, str) else None
    if match is None or match.group(1).lower() not in URI_SCHEMES:
        raise UserError(
            f"{where}: {str(uri)[:120]!r} is not a tracking URI; expected e.g. "
            "sqlite:///mlruns/mlflow.db or http(s)://host:port (schemes: " + ", ".join(URI_SCHEMES) + ")"
        )
