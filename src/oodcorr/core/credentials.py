"""Credentials in URIs: the one masking function for every message, log line, tag and file that shows a
tracking URI (`mask_secrets`), and the check that keeps them out of params.yaml (`has_credentials`: params
are recorded in dvc.lock and DVC's run cache). MLflow reads credentials from MLFLOW_TRACKING_USERNAME /
MLFLOW_TRACKING_PASSWORD or MLFLOW_TRACKING_TOKEN, so a URI never needs to hold them."""

from __future__ import annotations

import re

MLFLOW_CREDENTIAL_VARS = "MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN)"

# `scheme://<userinfo>@`: everything up to the URI's last `@` before its query or fragment, so a password holding
# `@` (or `/`) is masked whole, and a token given as the user name (`http://TOKEN@host`) too; it stops at
# whitespace and quotes, and a URI without a host (`sqlite:////path`, `file:///path`) has no user info
_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)(?!/)[^\s'\"<>@?#]*(?:@[^\s'\"<>@?#]*)*@")
_SECRET_QUERY = re.compile(
    r"([?&;](?:[A-Za-z0-9_.-]*(?:token|key|secret|password|passwd|pwd|auth|sig|signature|"
    r"credential|session)[A-Za-z0-9_.-]*)=)[^&;#\s'\"]+",
    re.IGNORECASE,
)


def mask_secrets(text) -> str:
    """`text` with credentials in URIs masked: the user info of `scheme://user:password@host` (`***@`: the
    user name may be a token) and the values of query parameters that carry secrets (token, key, password,
    signature, ...)."""
    text = _USERINFO.sub(lambda m: f"{m.group(1)}***@", str(text))
    return _SECRET_QUERY.sub(lambda m: f"{m.group(1)}***", text)


def has_credentials(uri: str) -> bool:
    """Credentials, or anything that may be one: a masked part, or an `@` anywhere after a host."""
    rest = uri.split("://", 1)[1] if "://" in uri else ""
    return mask_secrets(uri) != uri or (not rest.startswith("/") and "@" in rest)


def mask_logging() -> None:
    """Every log record (urllib3's retry warnings name the request's path and query, MLflow's name the URI)
    masked as it is made, whoever handles it. Idempotent."""
    import logging

    make = logging.getLogRecordFactory()
    if getattr(make, "masks_secrets", False):
        return

    def masked(*args, **kwargs):
        record = make(*args, **kwargs)
        try:
            text = record.getMessage()
        except Exception:  # a malformed record: left to logging's own error report
            return record
        if mask_secrets(text) != text:
            record.msg, record.args = mask_secrets(text), ()
        return record

    masked.masks_secrets = True
    logging.setLogRecordFactory(masked)
