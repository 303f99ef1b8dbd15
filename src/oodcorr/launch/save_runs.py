"""`oodcorr study save`'s copies of runs: each run copied without following any link (a link or special file
anywhere in the run is refused), checked against the project's dvc.lock, and installed only once every run
passed; after `dvc add` and `dvc push`, the .dvc files and the studies remote checked (verify.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

from oodcorr.core.errors import UserError
from oodcorr.launch import share_guard, verify
from oodcorr.records import studies_repo


def copy_run(source: Path, sdir: Path, key: str, run_files: tuple[str, ...]) -> tuple[Path, str]:
    """The analysis inputs of one run into studies/<name>/runs/.<run>.saving (installed by install_run), no link
    followed, checked against the project's dvc.lock (verify.py); (that folder, its md5 as DVC names it)."""
    src, dst = source / "runs" / key, sdir / "runs" / key
    tmp = dst.with_name(f".{key}.saving")
    shutil.rmtree(tmp, ignore_errors=True)
    verify.scan(src, f"run {key}")  # a link or special file anywhere in the run: refused before any copy
    try:
        for rel in run_files:
            if not (src / rel).exists():
                if rel.endswith((".json", ".jsonl")) or rel.endswith("predictions"):
                    raise UserError(f"run {key}: {src / rel} missing; it is part of what the analysis reads")
                continue
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            if (src / rel).is_dir():
                shutil.copytree(src / rel, tmp / rel, symlinks=True)
            else:
                shutil.copy2(src / rel, tmp / rel, follow_symlinks=False)
        return tmp, verify.check_copy(tmp, key, source, run_files)
    except (UserError, OSError) as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, UserError):
            raise
        raise UserError(f"run {key}: cannot copy {getattr(e, 'filename', '') or src}: {e.strerror or e}") from None


def install_run(tmp: Path) -> Path:
    """A checked copy (copy_run) in place of the run's older copy, whole."""
    dst = tmp.with_name(tmp.name[1 : -len(".saving")])
    shutil.rmtree(dst, ignore_errors=True)
    tmp.rename(dst)
    return dst


def stage(source: Path, sdir: Path, keys: list[str], run_files: tuple[str, ...]) -> tuple[list[Path], dict[str, str]]:
    """(installed run folders, {run: folder md5}): every run copied and checked before any is installed, so a
    refused run leaves the study as it was."""
    staged: list[tuple[Path, str]] = []
    new = not sdir.exists()
    try:
        for k in keys:
            staged.append(copy_run(source, sdir, k, run_files))
        for k, (tmp, _) in zip(keys, staged):  # what the analysis would refuse, named in the project it ran in
            share_guard.check_predictions(k, tmp / "eval", source / "runs" / k)
    except UserError:
        for tmp, _ in staged:
            shutil.rmtree(tmp, ignore_errors=True)
        if new:  # a first save refused: no studies/<name>/ left behind
            shutil.rmtree(sdir, ignore_errors=True)
        raise
    return [install_run(tmp) for tmp, _ in staged], {k: md5 for k, (_, md5) in zip(keys, staged)}


def check_saved(
    root: Path,
    sdir: Path,
    files: dict[str, Path],
    md5s: dict[str, str],
    saved: list[str],
    push: bool,
    remote: str,
    run_files: tuple[str, ...],
    pushed=None,
) -> list[str]:
    """After `dvc add` (and push): each new .dvc names the checked copy, every saved run (older ones too) matches
    the study's dvc.lock, and (with push) every object of the study is in the remote, else a UserError saying
    the study is INCOMPLETE; without push, the objects not in the remote yet. `pushed`: the Remote push()
    returned, so an object it already read sound is not streamed again."""
    wrong = verify.pointer_problems(files, md5s)
    problems = verify.study_problems(
        root, sdir, saved, remote=True, workspace=False, remote_name=remote, saved=run_files, pushed=pushed
    )[0]
    missing = [p for p in problems if " is not in the " in p]
    if wrong or (problems and (push or len(missing) < len(problems))):
        line = verify.summary(sdir.name, wrong or problems, verify_hint=False)
        raise UserError(line.replace(": ", " is INCOMPLETE: ", 1) + "; do not commit it: save again once that is fixed")
    return missing


def damaged(rem, root: Path, dvc_files: list[Path]) -> list[str]:
    """Objects of the study on the remote whose content is not their name (a push killed while writing them),
    and the folder listings of runs with such (or missing) files: what DVC must write again."""
    from oodcorr.launch.remote import open_repo

    with open_repo(studies_repo.path(root)) as repo:
        cache = repo.cache.local
    bad = []
    for f in dvc_files:
        md5, _ = verify.read_pointer(f, f.name[: -len(".dvc")])
        path = Path(cache.oid_to_path(md5)) if md5 else None
        if path is None or not path.is_file():
            continue
        entries = verify.cache_listing(studies_repo.path(root))(md5) or {}
        wrong = [oid for oid in entries.values() if rem.present(oid) and rem.md5(oid) != oid]
        if (
            wrong
            or any(not rem.present(oid) for oid in entries.values())
            or (rem.present(md5) and rem.md5(md5) != md5[: -len(".dir")])
        ):
            bad += [*wrong, md5]
    return bad


def push(root: Path, name: str, dvc_files: list[Path], dvc):
    """`dvc push` of the study's runs to remote `name` (in the studies subrepo); objects found damaged there
    afterwards (DVC skips what it believes present) are deleted and pushed again, once. -> the Remote, whose
    objects read sound need not be read again (check_saved)."""
    from oodcorr.launch.remote import Remote

    args = ["push", "-r", name, *sorted({studies_repo.rel(root, f) for f in dvc_files})]
    dvc(args, root)
    rem = Remote(root, name)
    bad = damaged(rem, root, dvc_files)
    if bad:
        rem.delete(sorted(set(bad)))
        dvc(args, root)
    return rem


RUN_STAGES = ("train@", "evaluate@")


def merged_lock(saved: Path, source: Path, keys: list[str], saved_keys: list[str]) -> str | None:
    """The text of studies/<name>/dvc.lock after saving `keys` from the project whose lock is `source`: the
    saved lock's stages with the source's over them, so runs saved earlier from another clone or session keep
    their record. A run saved before and not saved now keeps the record it was saved with; a stage both locks
    hold that is not a run's (prepare, check) must have the same outputs, or the runs were made from other data
    or params: refused, naming the stage. None: no source lock (the saved one is kept)."""
    import yaml

    if not source.is_file():
        return None
    if not saved.is_file():
        return source.read_text()
    old, new = verify.read_lock(saved), verify.read_lock(source)
    stages = dict(old.get("stages") or {})
    for name, entry in (new.get("stages") or {}).items():
        run = name.split("@", 1)[1] if name.startswith(RUN_STAGES) else None
        if run is None and name in stages and (stages[name] or {}).get("outs") != (entry or {}).get("outs"):
            raise UserError(
                f"{source}: stage {name} made other outputs than {saved} records for the runs saved before (other "
                "data or params): save these runs under another study name"
            )
        if run is not None and run in saved_keys and run not in keys:
            continue  # the record the run was saved with
        stages[name] = entry
    return yaml.safe_dump({**old, **new, "stages": stages}, sort_keys=False)
