"""What `oodcorr study save` checks before it writes, pushes or prints a commit line, and how it undoes a failed
save: a credential in a committed DVC config, the project's .dvc/config or studies/.dvc/config (refused: `dvc
remote modify --local` keeps it out of git), git conflict markers in the study, prediction files the analysis
would refuse (read by its own reader), DVC's own error lines, and a snapshot of the git index and the study's files
restored when the save fails."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from oodcorr.core.credentials import mask_secrets
from oodcorr.core.errors import UserError
from oodcorr.records import studies_repo

# DVC remote options that hold a secret (a key file's path is not one; its passphrase is)
SECRET_KEYS = (
    "password",
    "passphrase",
    "key_passphrase",
    "secret_access_key",
    "access_key_id",
    "session_token",
    "sas_token",
    "account_key",
    "connection_string",
    "client_secret",
    "gdrive_client_secret",
    "token",
)
MARKERS = re.compile(rb"^(<{7}|>{7})( |$)|^={7}$", re.MULTILINE)
FOOTER = ("Having any troubles?", "Hit us up at")


def dvc_failure(args: list[str], where: Path, res: subprocess.CompletedProcess) -> str:
    """DVC's own ERROR line(s) of a failed `dvc` run (not its support footer), secrets masked."""
    lines = [x.strip() for x in ((res.stderr or "") + "\n" + (res.stdout or "")).splitlines() if x.strip()]
    errors = [x for x in lines if x.startswith("ERROR")]
    if not errors:
        errors = [x for x in lines if not x.startswith(FOOTER)][-1:] or [f"exit {res.returncode}"]
    if len(errors) > 2:  # one per object (a full disk): the first, how many more, and DVC's summary
        errors = [errors[0], f"({len(errors) - 2} more ERROR lines)", errors[-1]]
    return mask_secrets(f"`dvc {' '.join(args)}` failed in {where}: " + " / ".join(errors))


def committed_secrets(config: Path) -> list[tuple[str, str]]:
    """[(remote, key)] of every credential a committed DVC config holds (a secret key, or user:password@ in a
    url)."""
    if not config.is_file():
        return []
    found = []
    for section, values in studies_repo.read_config(config).items():
        m = studies_repo.REMOTE_SECTION.fullmatch(section)
        if not (m and isinstance(values, dict)):
            continue
        for key, value in values.items():
            if key.lower() in SECRET_KEYS and str(value).strip():
                found.append((m.group(1), key))
            elif key.lower() == "url" and password_in_url(str(value)):
                found.append((m.group(1), "url (user:password@)"))
    return found


def password_in_url(url: str) -> bool:
    """A password in the url's user part (scheme://user:password@host); a user name alone (ssh://alice@host/...,
    DVC's documented SSH form) is not a secret."""
    return bool(re.match(r"[A-Za-z][A-Za-z0-9+.-]*://[^/@?#]*:[^/@?#]*@", url))


def refuse_secrets(root: Path) -> None:
    """One line naming the remote, the key and the fix when a committed DVC config (the project's, or the studies
    subrepo's, where `studies_repo.sync` copies remotes) holds a credential."""
    for config in (root / ".dvc" / "config", root / "studies" / ".dvc" / "config"):
        found = committed_secrets(config)
        if found:
            remote, key = found[0]
            fix = (
                f"`dvc remote modify --local {remote} {key} VALUE` (DVC keeps .dvc/config.local out of git)"
                if not key.startswith("url")
                else f"put the user in the url and the password in `dvc remote modify --local {remote} password ...`"
            )
            raise UserError(
                f"{config.relative_to(root)}: remote {remote!r} holds a credential ({key}) that `git add` would "
                f"commit; remove it from {config.name} and keep it out of git with {fix}"
                + (f"; {len(found) - 1} more" if len(found) > 1 else "")
            )


def refuse_conflicts(sdir: Path) -> None:
    """A study folder with git merge conflict markers (its params, lock, pointers or tables): refused, with what
    to do."""
    if not sdir.is_dir():
        return
    runs, results = sdir / "runs", sdir / "results"
    files = [sdir / "params.yaml", sdir / "dvc.lock", runs / ".gitignore", *runs.glob("*.dvc")]
    files += sorted(p for p in results.rglob("*") if p.is_file()) if results.is_dir() else []
    for path in files:
        try:
            text = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
        except OSError:
            continue
        if MARKERS.search(text):
            raise UserError(
                f"{path}: git merge conflict markers; finish the merge first: keep both collaborators' runs/*.dvc "
                f"and runs/.gitignore, then `oodcorr study reanalyze {sdir.name}` rebuilds results/ from them; "
                "commit, and save again"
            )


def check_predictions(run: str, eval_dir: Path, shown: Path) -> None:
    """Every predictions file of a run read by the analysis' own reader (oodcorr.records.predictions: its schema,
    finite numeric log-probs, one row per item): the first problem one UserError naming the run and the file
    (as `shown`, the run's folder in the project it ran in)."""
    from oodcorr.records.predictions import BadPredictions, _read_predictions, check_step_dirs

    pred_dir, hint = eval_dir / "predictions", f"rerun `oodcorr evaluate --run {run}` where it ran, then save again"
    check_step_dirs(run, pred_dir, hint)
    for path in sorted(pred_dir.glob("step-*/*")):
        name = shown / path.relative_to(eval_dir.parent)
        if path.suffix != ".parquet" or not path.is_file():
            raise UserError(f"run {run!r}: {name}: not a predictions file (<testset>.parquet); remove it or {hint}")
        try:
            _read_predictions(path)
        except KeyError as e:
            raise UserError(
                f"run {run!r}: {name} has no column {e.args[0]} (an older version wrote it); {hint}"
            ) from None
        except BadPredictions as e:
            raise UserError(f"run {run!r}: {name}: {e}; {hint}") from None
        except Exception as e:  # noqa: BLE001 - pyarrow raises several types for a damaged file
            raise UserError(f"run {run!r}: cannot read {name}: {str(e).splitlines()[0]}") from None


class Rollback:
    """The git index and the study's small files as they were; `restore()` puts them back and removes what the
    save added (new run folders, new .dvc files, a new study folder)."""

    def __init__(self, root: Path, sdir: Path):
        self.root, self.sdir, self.new = root, sdir, not sdir.exists()
        self.new_parent = not sdir.parent.exists()
        git = subprocess.run(["git", "rev-parse", "--git-path", "index"], cwd=root, capture_output=True, text=True)
        self.index = (root / git.stdout.strip()) if git.returncode == 0 and git.stdout.strip() else None
        self.index_bytes = self.index.read_bytes() if self.index and self.index.is_file() else None
        self.files = {}
        sub = root / "studies"  # the saved studies' DVC subrepo (records/studies_repo.py): a save may create it
        self.sub_new = None if (sub / ".dvc").exists() else sub
        configs = [root / ".dvc" / "config", sub / ".dvc" / "config", sub / ".dvc" / "config.local"]
        for p in [*configs, *self._small(sdir)]:
            self.files[p] = p.read_bytes() if p.is_file() else None
        self.runs = {p for p in (sdir / "runs").iterdir() if p.is_dir()} if (sdir / "runs").is_dir() else set()

    @staticmethod
    def _small(sdir: Path) -> list[Path]:
        return [sdir / "params.yaml", sdir / "dvc.lock", sdir / "runs" / ".gitignore", *(sdir / "runs").glob("*.dvc")]

    def restore(self) -> None:
        if self.index is not None:
            if self.index_bytes is None:
                self.index.unlink(missing_ok=True)
            else:
                self.index.write_bytes(self.index_bytes)
        if self.sub_new is not None:  # a subrepo this save created: gone again
            shutil.rmtree(self.sub_new / ".dvc", ignore_errors=True)
            (self.sub_new / ".dvcignore").unlink(missing_ok=True)
        if self.new:
            shutil.rmtree(self.sdir, ignore_errors=True)
            if self.new_parent and self.sdir.parent.is_dir() and not any(self.sdir.parent.iterdir()):
                self.sdir.parent.rmdir()
        else:
            for p in self._small(self.sdir):
                if p not in self.files:
                    p.unlink(missing_ok=True)
            if (self.sdir / "runs").is_dir():
                for p in (self.sdir / "runs").iterdir():
                    if p.is_dir() and p not in self.runs:
                        shutil.rmtree(p, ignore_errors=True)
        for p, data in self.files.items():
            if data is None:
                if p.parent.exists() and (not self.new or not p.is_relative_to(self.sdir)):
                    p.unlink(missing_ok=True)
            elif p.parent.is_dir() or p.parent == self.root / ".dvc":
                p.write_bytes(data)
