"""studies/ is a DVC repository of its own (a subrepo, as `dvc init --subdir` makes it), so the project's
`dvc status` never lists the saved studies' runs/<run>.dvc pointers (their outputs are pulled only on demand).

Every DVC command on a saved study runs inside it (cwd studies/, paths relative to it: `dvc --cd studies pull -R
-r studies NAME/runs` by hand), with its own cache (studies/.dvc/cache, git-ignored) and its own config:

    studies/.dvc/config         committed: the in-git `studies` remote (url ../../.dvc/studies-remote, relative
                                to studies/.dvc/) and the sections of the remotes studies were saved to, copied
                                from the project's .dvc/config by `study save` (a relative local url rebased)
    studies/.dvc/config.local   git-ignored: every option of the remote a study command uses, as the project's
                                .dvc/config and .dvc/config.local set it (credentials only ever here)

Users name remotes in the project (`dvc remote add`, `dvc remote modify --local`); `sync` copies the one a
study command uses into the subrepo, the project's options winning."""

from __future__ import annotations

import os
import re
from pathlib import Path

from oodcorr.core.errors import UserError

STUDIES = "studies"
IN_GIT = "studies"  # the remote inside the repository: the project's .dvc/studies-remote folder
IN_GIT_URL = "../../.dvc/studies-remote"  # as studies/.dvc/config holds it (relative to studies/.dvc/)
CORE = "[core]\n    analytics = false\n    autostage = true\n"
DVC_GITIGNORE = "/config.local\n/tmp\n/cache\n"  # what `dvc init --subdir` writes
DVCIGNORE = (
    "# Add patterns of files dvc should ignore, which could improve\n# the performance. Learn more at\n"
    "# https://dvc.org/doc/user-guide/dvcignore\n"
)


def path(root: Path) -> Path:
    """The saved studies' DVC repository: <project>/studies."""
    return Path(root) / STUDIES


def rel(root: Path, target: Path) -> str:
    """`target` as DVC commands in studies/ name it (posix, relative to studies/)."""
    return Path(target).resolve().relative_to(path(root).resolve()).as_posix()


def files(root: Path) -> list[Path]:
    """The subrepo's committed files (what a `git add` line of a save names)."""
    sub = path(root)
    return [sub / ".dvc" / "config", sub / ".dvc" / ".gitignore", sub / ".dvcignore"]


def ensure(root: Path) -> Path:
    """studies/ as a DVC subrepo (created as `dvc init --subdir` does, with the project's core settings and the
    in-git `studies` remote) when it is not one yet."""
    sub = path(root)
    dvc_dir = sub / ".dvc"
    if not (dvc_dir / "config").is_file():
        dvc_dir.mkdir(parents=True, exist_ok=True)
        (dvc_dir / ".gitignore").write_text(DVC_GITIGNORE)
        (dvc_dir / "config").write_text(CORE + f"['remote \"{IN_GIT}\"']\n    url = {IN_GIT_URL}\n")
        if not (sub / ".dvcignore").exists():
            (sub / ".dvcignore").write_text(DVCIGNORE)
    return sub


REMOTE_SECTION = re.compile(r'\s*remote\s+"(.+)"\s*')  # a DVC config's ['remote "NAME"'] section


def read_config(config: Path):
    """A DVC config file as configobj reads it (as DVC does); one error line naming the file if it cannot."""
    from configobj import ConfigObj, ConfigObjError

    try:
        return ConfigObj(str(config), encoding="utf-8", list_values=False, write_empty_values=True)
    except (ConfigObjError, OSError, UnicodeDecodeError) as e:
        raise UserError(f"{config}: not a readable DVC config ({str(e).splitlines()[0]})") from None


def _section(conf, name: str) -> str | None:
    for key in conf:
        m = REMOTE_SECTION.fullmatch(key)
        if m and m.group(1) == name:
            return key
    return None


def rebase(url: str, project_dvc: Path, sub_dvc: Path) -> str:
    """A relative local-path url of the project's config (relative to .dvc/) as studies/.dvc/config needs it."""
    if not url or re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", url) or os.path.isabs(os.path.expanduser(url)):
        return url
    return Path(os.path.relpath(os.path.normpath(project_dvc / url), sub_dvc)).as_posix()


def keep_local(sub_dvc: Path) -> None:
    """studies/.dvc/.gitignore names config.local (credentials never committed), whatever was done to it."""
    ignore = sub_dvc / ".gitignore"
    text = ignore.read_text() if ignore.is_file() else ""
    if "/config.local" not in text.split():
        ignore.write_text(text + ("" if not text or text.endswith("\n") else "\n") + "/config.local\n")


def _project_section(project_dvc: Path, sub_dvc: Path, leaf: str, name: str) -> dict[str, str] | None:
    """Remote `name`'s options in the project's .dvc/<leaf> (a relative url rebased for studies/.dvc/)."""
    if not (project_dvc / leaf).is_file():
        return None
    conf = read_config(project_dvc / leaf)
    key = _section(conf, name)
    if key is None:
        return None
    values = {k: str(v) for k, v in conf[key].items()}
    if "url" in values:
        values["url"] = rebase(values["url"], project_dvc, sub_dvc)
    return values


def _write(config: Path, name: str, values: dict[str, str], replace: bool) -> bool:
    """Remote `name`'s section in `config` set to `values` (`replace`: exactly; else those keys overwritten, the
    others kept); True when the file changed."""
    dst = read_config(config)
    key = _section(dst, name) or f'remote "{name}"'
    old = {k: str(v) for k, v in dst[key].items()} if key in dst else {}
    new = dict(values) if replace else {**old, **values}
    if new == old:
        return False
    dst[key] = new
    dst.write()
    return True


def sync(root: Path, name: str, commit: bool = False) -> bool:
    """Remote `name` as the project's .dvc/config and .dvc/config.local configure it, made what the subrepo's
    DVC reads: every option into its git-ignored studies/.dvc/config.local (credentials only ever there), and
    with `commit` (a save, whose commit line names it) the project's committed section into the committed
    studies/.dvc/config, so a clone has it; True when studies/.dvc/config changed. Nothing is copied for a remote
    the project does not configure (the subrepo's own, e.g. the in-git one); a read (verify, reanalyze) changes
    no file git tracks."""
    sub_dvc = ensure(root) / ".dvc"
    project_dvc = Path(root) / ".dvc"
    shared = _project_section(project_dvc, sub_dvc, "config", name)
    local = _project_section(project_dvc, sub_dvc, "config.local", name)
    if shared is None and local is None:
        return False
    changed = commit and shared is not None and _write(sub_dvc / "config", name, shared, replace=True)
    keep_local(sub_dvc)
    _write(sub_dvc / "config.local", name, {**(shared or {}), **(local or {})}, replace=False)
    return bool(changed)
