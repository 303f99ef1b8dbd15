"""Integrity of saved studies (`oodcorr study save | reanalyze | verify`): what a save copies is exactly what the
project's dvc.lock recorded, and what a reanalysis analyses is exactly what the study's .dvc files name.

Hashes are DVC's own (dvc_data's file_md5, and a folder's name as DVC computes it: the md5 of its sorted
listing), always computed afresh from the bytes: never taken from DVC's state database, which records a pulled
object under its name without reading it again.

    scan(folder, what)          regular files and folders only: a symlink, FIFO, socket or device is refused
    listing(folder)             {relpath: md5} of the files under a folder
    folder_md5(listing)         DVC's name of that folder
    lock_outputs(lock, key)     what dvc.lock recorded for a run's saved files (its train@ / evaluate@ outs)
    lock_problems(...)          saved files against those records
    study_problems(...)         per run: its .dvc pointer, its objects in the studies remote (present, content ==
                                name), dvc.lock's records and the pulled copy
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from pathlib import Path

from oodcorr.core.errors import UserError

POINTER = re.compile(r"[0-9a-f]{32}\.dir")


def scan(folder: Path, what: str) -> None:
    """Refuse a symbolic link or special file (FIFO, socket, device) at `folder` or anywhere below it: a saved
    run holds regular files only, so nothing outside the project is ever copied or pushed."""

    def check(path: Path) -> None:
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            raise UserError(
                f"{what}: {path} is a symbolic link (to {os.readlink(path)}); a saved run holds regular "
                "files only: replace the link by the file itself, or remove it"
            )
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise UserError(f"{what}: {path} is not a regular file or folder (a FIFO, socket or device); remove it")

    def fail(err: OSError):
        raise UserError(f"{what}: cannot read {err.filename}: {err.strerror}")

    try:
        check(folder)
        for dirpath, dirnames, filenames in os.walk(folder, onerror=fail):
            for name in sorted(dirnames + filenames):
                check(Path(dirpath) / name)
    except FileNotFoundError as e:
        raise UserError(f"{what}: {e.filename} missing") from None


def file_md5(path: Path) -> str:
    from dvc_data.hashfile.hash import file_md5 as dvc_md5

    return dvc_md5(str(path))


def listing(folder: Path) -> dict[str, str]:
    """{posix relpath: md5} of every regular file under `folder` (after scan())."""
    return {p.relative_to(folder).as_posix(): file_md5(p) for p in sorted(folder.rglob("*")) if p.is_file()}


def folder_md5(entries: dict[str, str]) -> str:
    """The name DVC gives a folder with these files (`<md5 of its listing>.dir`, as in a .dvc file or dvc.lock)."""
    from dvc_data.hashfile.hash_info import HashInfo
    from dvc_data.hashfile.tree import Tree

    tree = Tree()
    for rel, md5 in entries.items():
        tree.add(tuple(rel.split("/")), None, HashInfo("md5", md5))
    tree.digest()
    return tree.oid


def read_lock(lock: Path) -> dict:
    """A dvc.lock's document ({"schema": ..., "stages": {...}}); a damaged one is one line naming the file."""
    from oodcorr.settings.yaml_dialect import read_yaml

    try:
        doc = read_yaml(lock.read_text()) or {}
    except Exception as e:  # noqa: BLE001 - a damaged lock: one line
        raise UserError(f"{lock}: not a readable dvc.lock ({str(e).splitlines()[0]})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("stages") or {}, dict):
        raise UserError(f"{lock}: not a dvc.lock (no mapping of stages)")
    return doc


def lock_outputs(lock: Path, key: str, saved: tuple[str, ...]) -> dict[str, tuple[str, str]] | None:
    """{relpath in the run: (stage, md5)} that `lock` recorded for the run's `saved` files (train@<key>'s and
    evaluate@<key>'s outs); None without a lock."""
    if not lock.is_file():
        return None
    stages = read_lock(lock).get("stages") or {}
    prefix, out = f"runs/{key}/", {}
    for stage in (f"train@{key}", f"evaluate@{key}"):
        for o in (stages.get(stage) or {}).get("outs") or []:
            rel = str(o.get("path", ""))[len(prefix) :] if str(o.get("path", "")).startswith(prefix) else None
            if rel in saved and o.get("md5"):
                out[rel] = (stage, str(o["md5"]))
    return out


def lock_problems(
    key: str,
    entries: dict[str, str],
    recorded: dict[str, tuple[str, str]],
    lock: str,
    saved: tuple[str, ...],
    cached=None,
) -> list[str]:
    """Each saved file (or folder) of run `key` against what `lock` recorded: differing, missing or unrecorded
    ones, named. `cached(md5)` -> a folder's listing {relpath: md5} where DVC's cache has it (names the file)."""
    problems = []
    for rel in saved:
        inside = {r[len(rel) + 1 :]: m for r, m in entries.items() if r.startswith(rel + "/")}
        got = entries.get(rel) or (folder_md5(inside) if inside else None)
        if rel not in recorded:
            if got:
                problems.append(f"run {key}: {rel} is not recorded in {lock}; save only outputs `dvc repro` recorded")
            continue
        stage, want = recorded[rel]
        if got is None:
            problems.append(f"run {key}: {rel} missing; {lock} records it for {stage} (md5 {want})")
        elif got != want:
            old = cached(want) if cached and want.endswith(".dir") else None
            files = sorted(r for r in set(inside) | set(old or {}) if inside.get(r) != (old or {}).get(r))
            which = f"{rel}/{files[0]}" if old is not None and files else rel
            problems.append(
                f"run {key}: {which} is not what {lock} recorded for {stage} ({rel}: md5 {got}, recorded {want})"
            )
    return problems


def read_pointer(dvc_file: Path, key: str) -> tuple[str | None, str]:
    """(the folder's md5 a runs/<key>.dvc names, '') or (None, why it is not a saved run's pointer)."""
    from oodcorr.settings.yaml_dialect import read_yaml

    try:
        outs = (read_yaml(dvc_file.read_text()) or {}).get("outs")
    except Exception as e:  # noqa: BLE001 - damaged YAML: named
        return None, f"not readable ({str(e).splitlines()[0]})"
    if not (isinstance(outs, list) and len(outs) == 1 and isinstance(outs[0], dict)):
        return None, "should hold one output (the run's folder)"
    md5, path = str(outs[0].get("md5", "")), outs[0].get("path")
    if path != key or not POINTER.fullmatch(md5):
        return None, f"should name the folder {key} and its md5 (<32 hex>.dir); it names {path!r}, md5 {md5!r}"
    return md5, ""


class Stores:
    """The repository's DVC cache (a local folder) and the study's remote (remote.Remote: asked itself, opened
    when first needed)."""

    def __init__(self, root: Path, remote: str, opened=None):
        from oodcorr.launch.remote import open_repo
        from oodcorr.records import studies_repo

        self.root, self.remote_name, self._remote = root, remote, opened
        with open_repo(studies_repo.ensure(root)) as repo:  # the studies subrepo's own cache
            self.cache = repo.cache.local

    @property
    def remote(self):
        from oodcorr.launch.remote import Remote

        if self._remote is None:
            self._remote = Remote(self.root, self.remote_name)
        return self._remote

    def listing(self, md5: str, use_remote: bool) -> tuple[dict[str, str] | None, str]:
        """(the folder listing {relpath: md5} named `md5`, checked against its name, '') or (None, why not)."""
        from oodcorr.launch.remote import dir_listing

        raw, where = None, ""
        path = Path(self.cache.oid_to_path(md5))
        if not use_remote and path.is_file():
            raw, where = path.read_bytes(), str(path)
        elif self.remote.present(md5):
            raw, where = self.remote.read(md5), f"{self.remote.path(md5)} in the {self.remote_name} remote"
        if raw is None:
            return None, "missing"
        if hashlib.md5(raw).hexdigest() != md5[: -len(".dir")]:
            return None, f"its folder listing {where} does not match its name {md5}: the object was altered"
        entries = dir_listing(raw)
        return (entries, "") if entries is not None else (None, f"its folder listing {where} is not a DVC listing")


def remote_problems(stores: Stores, key: str, entries: dict[str, str], push: str) -> list[str]:
    """Each file object of a run on the remote itself: present (one listing), content md5 == its name."""
    remote, problems = stores.remote, []
    for rel, oid in entries.items():
        got = remote.md5(oid) if remote.present(oid) else None
        if got is None:
            problems.append(f"run {key}: {rel} (object {oid}) is not in the {remote.name} remote; {push}")
        elif got != oid:
            problems.append(
                f"run {key}: {rel}: the {remote.name} remote's object {remote.path(oid)} does not match its name "
                f"(content md5 {got}): it was altered after the save"
            )
    return problems


def study_problems(
    root: Path,
    sdir: Path,
    keys: list[str],
    *,
    remote: bool,
    workspace: bool,
    lock: bool = True,
    remote_name: str = "studies",
    saved: tuple[str, ...] = (),
    pushed=None,
) -> tuple[list[str], int]:
    """(problems, objects checked) for the saved runs `keys` of studies/<name>: each .dvc pointer; with `remote`,
    every object in the studies remote (present, content == its name); with `lock`, the files against the
    study's dvc.lock; with `workspace`, the pulled copy (no link, no extra or missing file, content == name).
    `pushed`: the Remote a save just pushed through (its reads reused)."""
    name = sdir.name
    stores = Stores(root, remote_name, pushed)
    push = (
        f"where the study was saved, run `oodcorr study save {name} --from ...` again or `dvc --cd studies push "
        f"-r {remote_name} {{dvc}}`"
    )
    problems, checked = [], 0
    for key in keys:
        dvc_file = sdir / "runs" / f"{key}.dvc"
        rel_dvc, sub_dvc = dvc_file.relative_to(root).as_posix(), f"{name}/runs/{key}.dvc"  # the latter in studies/
        md5, why = read_pointer(dvc_file, key)
        if md5 is None:
            problems.append(f"run {key}: {rel_dvc} {why}")
            continue
        entries, why = stores.listing(md5, use_remote=remote)
        if entries is None:
            problems.append(
                f"run {key}: {why if why != 'missing' else f'its folder listing (object {md5})'}"
                + (f" is not in the {remote_name} remote; " + push.format(dvc=sub_dvc) if why == "missing" else "")
            )
            continue
        checked += 1
        if remote:
            checked += len(entries)
            problems += remote_problems(stores, key, entries, push.format(dvc=sub_dvc))
        recorded = lock_outputs(sdir / "dvc.lock", key, saved) if lock else None
        if recorded:
            problems += lock_problems(key, entries, recorded, (sdir / "dvc.lock").relative_to(root).as_posix(), saved)
        if workspace:
            problems += copy_problems(sdir / "runs" / key, key, entries, rel_dvc)
    return problems, checked


def copy_problems(folder: Path, key: str, entries: dict[str, str], rel_dvc: str) -> list[str]:
    """The pulled copy of a run against its .dvc listing: every file there, regular, with content == its name."""
    if not folder.exists() and not folder.is_symlink():
        return [f"run {key}: not pulled ({folder} missing)"]
    try:
        scan(folder, f"run {key}")
    except UserError as e:
        return [str(e)]
    have = listing(folder)
    problems = [
        f"run {key}: {rel}: content md5 {have[rel]} is not its name in {rel_dvc} ({md5})"
        for rel, md5 in entries.items()
        if rel in have and have[rel] != md5
    ]
    problems += [
        f"run {key}: {rel} missing from the pulled copy ({rel_dvc} lists it)" for rel in entries if rel not in have
    ]
    problems += [
        f"run {key}: {rel} is not in {rel_dvc} (a file added after the save)" for rel in have if rel not in entries
    ]
    return problems


def summary(name: str, problems: list[str], verify_hint: bool = True) -> str:
    """One line: the first problems and how many more."""
    more = len(problems) - 2
    hint = f" (`oodcorr study verify {name}` lists them)" if verify_hint else ""
    return f"study {name}: " + "; ".join(problems[:2]) + (f"; and {more} more problem(s){hint}" if more > 0 else "")


def cache_listing(project: Path):
    """md5 -> the folder listing {relpath: md5} in `project`'s DVC cache (.dvc/cache), or None."""

    def get(md5: str) -> dict[str, str] | None:
        path = project / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]
        try:
            return {str(e["relpath"]): str(e["md5"]) for e in json.loads(path.read_text())}
        except (OSError, ValueError, KeyError, TypeError):
            return None

    return get


def check_copy(copy: Path, key: str, source: Path, saved: tuple[str, ...]) -> str:
    """A run's copy (made without following links) against what `source`'s dvc.lock recorded for it: every saved
    output, md5 for md5; the copy's folder md5 (what `dvc add` must record). A UserError names the file."""
    entries = listing(copy)
    recorded = lock_outputs(source / "dvc.lock", key, saved)
    if recorded is not None:
        problems = lock_problems(key, entries, recorded, str(source / "dvc.lock"), saved, cache_listing(source))
        if problems:
            raise UserError(
                f"{problems[0]}: it changed after the stage ran (`dvc status` there shows it); run "
                f"`dvc repro evaluate@{key}` in {source}, then save again"
            )
    return folder_md5(entries)


def pointer_problems(dvc_files: dict[str, Path], expected: dict[str, str]) -> list[str]:
    """Each new runs/<key>.dvc names the folder md5 computed from the verified copy."""
    out = []
    for key, f in dvc_files.items():
        md5, why = read_pointer(f, key)
        if md5 != expected[key]:
            out.append(f"run {key}: {f} records {md5 or why}, not the verified copy's {expected[key]}")
    return out


def check_study(
    root: Path,
    sdir: Path,
    keys: list[str],
    *,
    remote: bool,
    workspace: bool,
    remote_name: str,
    saved: tuple[str, ...],
    lock: bool = True,
) -> int:
    """study_problems() as one UserError (nothing is analysed after it); the objects checked otherwise."""
    problems, checked = study_problems(
        root, sdir, keys, remote=remote, workspace=workspace, lock=lock, remote_name=remote_name, saved=saved
    )
    if problems:
        raise UserError(summary(sdir.name, problems) + "; no table was written")
    return checked
