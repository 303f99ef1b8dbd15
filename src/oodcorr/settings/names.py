"""Names that become folders, DVC stage names and command-line arguments: run keys (runs/<key>,
train@<key>, `--run <key>`) and hub model ids. Checked before anything uses them, so no name can leave the
project folder or reach a shell as anything but one plain word."""

from __future__ import annotations

import re

from oodcorr.errors import UserError

RUN_KEY_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
RUN_KEY_MAX = 128
HUB_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")


def check_run_key(key, where: str = "params: runs") -> str:
    """A run key names a folder (runs/<key>), a DVC stage (train@<key>) and a command-line argument: letters,
    digits, `.`, `_` and `-` only, starting with a letter, digit or `_`, at most RUN_KEY_MAX characters."""
    text = str(key)
    if not isinstance(key, str) or not RUN_KEY_RE.fullmatch(text) or len(text) > RUN_KEY_MAX:
        why = (f"longer than {RUN_KEY_MAX} characters" if isinstance(key, str) and len(text) > RUN_KEY_MAX
               and RUN_KEY_RE.fullmatch(text) else "use only letters, digits, '.', '_' and '-', starting with a "
               "letter, digit or '_'")
        raise UserError(f"{where}: run key {text[:80]!r}{'...' if len(text) > 80 else ''} is not allowed "
                        f"({why}); it names a folder and a DVC stage")
    return text
