"""User-facing errors: one clear line, non-zero exit, no traceback (the CLI catches these)."""


class UserError(Exception):
    """Bad input from the user (params, files, names). The CLI prints `error: <message>` and exits 2."""

    exit_code = 2


def closest(name: str, choices) -> str:
    """' (did you mean X?)' for the closest known name, or '' when nothing is close."""
    import difflib

    match = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5)
    return f" (did you mean {match[0]!r}?)" if match else ""
