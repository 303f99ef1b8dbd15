"""The DVC remote a saved study lives on, asked itself: which remote (`--remote`, else the one its runs/*.dvc
name, else `studies`, else the project's default), and its objects listed, streamed and hashed through DVC's own
object database for that remote (`repo.cloud.get_remote_odb`: an fsspec filesystem for a folder, S3, SSH, GCS,
Azure, ...), never as paths on this machine's disk.

A remote that cannot be read is one UserError saying so with the library's own reason (a missing plugin names
the extra that installs it); a missing object is `False` from `present()`, never an exception."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from oodcorr.core.credentials import mask_secrets
from oodcorr.core.errors import UserError
from oodcorr.records import studies_repo

DEFAULT = "studies"  # the in-repository remote of the bundled demo studies (.dvc/studies-remote)
EXTRAS = {"s3": "s3", "ssh": "ssh", "gs": "gs", "gcs": "gs", "azure": "azure", "az": "azure"}
CHUNK = 1 << 20


def reason(err: BaseException) -> str:
    """The first line of a library's own message (its type when it has none), secrets masked."""
    text = str(err).strip() or type(err).__name__
    for cause in (err.__cause__, err.__context__):  # DVC wraps the library's error: say the library's too
        if cause is not None and str(cause).strip() and str(cause).strip() not in text:
            text += f" ({str(cause).strip().splitlines()[0]})"
    return mask_secrets(text.splitlines()[0])


def open_repo(root: Path):
    from dvc.repo import Repo
    from dvc.scm import SCMError

    try:
        return Repo(str(root))
    except SCMError:  # a study copied outside a git checkout: DVC's objects are still checked
        return Repo(str(root), config={"core": {"no_scm": True}})


def _config(dvc_dir: Path) -> dict:
    from dvc.config import Config

    if not dvc_dir.is_dir():
        return {}
    try:
        return Config(dvc_dir=str(dvc_dir), validate=False)
    except Exception as e:  # noqa: BLE001 - a damaged config: said with DVC's reason
        raise UserError(f"{dvc_dir / 'config'}: not a readable DVC config ({reason(e)})") from None


def remotes(root: Path) -> tuple[dict[str, str], str]:
    """({remote name: url}, default remote name or '') that a study command sees: the saved studies' subrepo's
    merged DVC config (studies/.dvc) under the project's (.dvc), whose remotes `studies_repo.sync` copies there;
    local urls resolved."""
    urls, default = {}, ""
    for conf in (_config(studies_repo.path(root) / ".dvc"), _config(Path(root) / ".dvc")):
        urls.update({name: str(sect.get("url", "")) for name, sect in (conf.get("remote") or {}).items()})
        default = str((conf.get("core") or {}).get("remote") or "") or default
    return urls, default


def pointer_remote(sdir: Path) -> str:
    """The `remote:` a study's runs/*.dvc name ('' when none does)."""
    from oodcorr.settings.yaml_dialect import read_yaml

    for f in sorted((sdir / "runs").glob("*.dvc")):
        try:
            outs = (read_yaml(f.read_text()) or {}).get("outs") or []
        except Exception:  # noqa: BLE001 - a damaged pointer is verify.py's to name
            continue
        for o in outs if isinstance(outs, list) else []:
            if isinstance(o, dict) and o.get("remote"):
                return str(o["remote"])
    return ""


def choose(root: Path, sdir: Path, explicit: str | None) -> str:
    """The study's remote: `explicit`, else its pointers' `remote:`, else `studies` when configured (or nothing
    else is), else the project's default remote."""
    if explicit:
        return explicit
    named = pointer_remote(sdir)
    if named:
        return named
    urls, default = remotes(root)
    if DEFAULT in urls or not default:
        return DEFAULT
    return default


def scheme(url: str) -> str:
    m = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", url)
    return m.group(1).lower() if m else ""


def outside(root: Path, name: str) -> Path | None:
    """The folder a local-path remote `name` writes to when it lies outside the project (else None); DVC's
    config holds it resolved (a relative url is relative to the .dvc/ folder of the config naming it)."""
    url = remotes(root)[0].get(name, "")
    if not url or (scheme(url) and scheme(url) != "file"):
        return None
    where = Path(re.sub(r"^file://", "", url)).resolve()
    return None if where.is_relative_to(root.resolve()) else where


class Remote:
    """One DVC remote's object database as the saved studies' subrepo opens it (the project's section of it
    copied there first), for reading and hashing its objects (and deleting a damaged one)."""

    def __init__(self, root: Path, name: str):
        from dvc.config import RemoteNotFoundError

        self.name = name
        studies_repo.sync(root, name)  # into studies/.dvc/config.local only: a read changes nothing git tracks
        urls, _ = remotes(root)
        self.url = mask_secrets(urls.get(name, ""))
        repo = open_repo(studies_repo.path(root))
        try:
            self.odb = repo.cloud.get_remote_odb(name, "verify")
        except RemoteNotFoundError as e:
            raise UserError(
                f"the {name!r} remote is not configured here ({reason(e)}): commit .dvc/config from the clone "
                f"that saved the study, or add it (`dvc remote add {name} URL` in the project)"
            ) from None
        except ImportError as e:
            extra = EXTRAS.get(scheme(urls.get(name, "")))
            plugin = re.search(r"requires '([\w.-]+)'", str(e))
            how = f"'oodcorr[{extra}]'" if extra else (plugin.group(1) if plugin else "the remote's DVC plugin")
            raise UserError(
                f"the {name} remote {self.url} needs a DVC plugin: pip install {how} ({reason(e)})"
            ) from None
        except Exception as e:  # noqa: BLE001 - a bad url or config: said with DVC's reason
            raise UserError(f"cannot open the {name} remote {self.url}: {reason(e)}") from None
        finally:
            repo.close()
        self.fs = self.odb.fs
        self._listed: set[str] | None = None
        self._md5: dict[str, str] = {}  # oid -> md5 of its bytes as read here (md5)

    def fail(self, err: BaseException) -> UserError:
        """A remote that cannot be read: refused credentials (PermissionError, asyncssh's PermissionDenied) said
        as such, anything else (down, unreachable, no such bucket) as 'cannot reach'."""
        kinds = {c.__name__ for c in type(err).__mro__}
        if kinds & {"PermissionError", "PermissionDenied", "ClientAuthenticationError"}:
            return UserError(f"the {self.name} remote {self.url} refused the credentials: {reason(err)}")
        return UserError(f"cannot reach the {self.name} remote {self.url}: {reason(err)}")

    def path(self, oid: str) -> str:
        return self.odb.oid_to_path(oid)

    def listed(self) -> set[str]:
        """Every object path under the remote (one listing, batched by the filesystem; cached)."""
        if self._listed is None:
            try:
                self._listed = set(self.fs.find(self.odb.path))
            except FileNotFoundError:  # nothing pushed yet
                self._listed = set()
            except Exception as e:  # noqa: BLE001 - down, refused, no such bucket: one line with the reason
                raise self.fail(e) from None
        return self._listed

    def present(self, oid: str) -> bool:
        return self.path(oid) in self.listed()

    def md5(self, oid: str) -> str | None:
        """The md5 of the object's bytes on the remote (streamed), None when it is not there. Read once per
        Remote: `study save` checks every object after its push and again in its final verify through the same
        Remote, and a content-addressed object changes only when `delete` removes it (which forgets it)."""
        if oid in self._md5:
            return self._md5[oid]
        h = hashlib.md5()
        try:
            with self.fs.open(self.path(oid), "rb") as f:
                for block in iter(lambda: f.read(CHUNK), b""):
                    h.update(block)
        except FileNotFoundError:
            return None
        except Exception as e:  # noqa: BLE001
            raise self.fail(e) from None
        self._md5[oid] = h.hexdigest()
        return self._md5[oid]

    def read(self, oid: str) -> bytes | None:
        try:
            return self.fs.cat_file(self.path(oid))
        except FileNotFoundError:
            return None
        except Exception as e:  # noqa: BLE001
            raise self.fail(e) from None

    def delete(self, oids: list[str]) -> None:
        """Remove damaged objects, so the next `dvc push` (which skips what it believes present) rewrites them."""
        for oid in oids:
            self._md5.pop(oid, None)
            try:
                self.fs.rm_file(self.path(oid))
            except FileNotFoundError:
                pass
            except Exception as e:  # noqa: BLE001
                raise self.fail(e) from None
        self._listed = None


def dir_listing(raw: bytes) -> dict[str, str] | None:
    """A DVC folder listing ({relpath: md5}) from its object's bytes; None when it is not one."""
    try:
        return {str(e["relpath"]): str(e["md5"]) for e in json.loads(raw)}
    except (ValueError, KeyError, TypeError):
        return None
