"""`oodcorr study verify NAME | --all`: whether a saved study is complete and unaltered (verify.py's checks, all of
them, every problem counted, each object asked of the study's remote itself), without pulling or analysing
anything; with --all, every study on its own, so one damaged study does not make an intact one read damaged."""

from __future__ import annotations

import click

from oodcorr.core.errors import UserError
from oodcorr.launch import remote, verify
from oodcorr.launch.common import echo
from oodcorr.launch.saved import REMOTE_OPTION, RUN_FILES, STUDIES, repo_root, saved_runs, study_dir


def check_one(root, sdir, remote_name: str | None) -> tuple[list[str], str]:
    """(problems, the line saying the study is complete) for one study."""
    name = sdir.name
    keys = saved_runs(sdir)
    target = remote.choose(root, sdir, remote_name)
    pulled = [k for k in keys if (sdir / "runs" / k).exists()]
    problems, checked = verify.study_problems(
        root, sdir, keys, remote=True, workspace=False, remote_name=target, saved=RUN_FILES
    )
    stores = verify.Stores(root, target) if pulled else None
    for k in pulled:  # copies pulled earlier: against their .dvc listing too
        md5, _ = verify.read_pointer(sdir / "runs" / f"{k}.dvc", k)
        entries, _ = stores.listing(md5, use_remote=False) if md5 else (None, "")
        if entries is not None:
            problems += verify.copy_problems(sdir / "runs" / k, k, entries, f"runs/{k}.dvc")
    return problems, (
        f"study {name}: complete: {len(keys)} run(s), {checked} object(s) in the {target} remote, each matching "
        f"its name and the study's dvc.lock" + (f"; {len(pulled)} pulled copy(ies) match" if pulled else "")
    )


@click.command("verify")
@click.argument("name", required=False)
@REMOTE_OPTION
@click.option("--all", "every", is_flag=True, help="Check every saved study, each on its own (complete / damaged).")
def verify_cmd(name, remote_name, every):
    """Check that studies/NAME is complete and unaltered: every object its runs/*.dvc files name is on the
    study's remote (asked itself) with content matching its name, every run matches the study's dvc.lock, and
    pulled copies (where present) match their .dvc files. Exit 2 naming the run and file otherwise."""
    root = repo_root()
    if every == bool(name):
        raise UserError("study verify: name one study, or pass --all (not both)")
    if every:
        return verify_all(root, remote_name)
    sdir = study_dir(root, name)
    if not (sdir / "params.yaml").exists():
        raise UserError(f"no study {name!r} in {root / STUDIES}")
    problems, ok = check_one(root, sdir, remote_name)
    if problems:
        line = verify.summary(name, problems, verify_hint=False)
        raise UserError(line.replace(": ", " is INCOMPLETE or altered: ", 1))
    echo(ok)


def verify_all(root, remote_name: str | None) -> None:
    """One line per study: complete, or damaged with its damaged runs; exit 2 when any is damaged."""
    names = sorted(p.parent.name for p in (root / STUDIES).glob("*/params.yaml"))
    if not names:
        raise UserError(f"no saved study in {root / STUDIES}")
    damaged = []
    for name in names:
        try:
            problems, ok = check_one(root, root / STUDIES / name, remote_name)
        except UserError as e:  # this study's remote cannot be read: said for it, the others still checked
            problems, ok = [str(e)], ""
        if problems:
            runs = sorted({p.split(":")[0][len("run ") :] for p in problems if p.startswith("run ")})
            damaged.append(name)
            echo(f"study {name}: DAMAGED" + (f" (run(s) {', '.join(runs)})" if runs else "") + f": {problems[0]}")
        else:
            echo(ok)
    if damaged:
        raise UserError(f"{len(damaged)} of {len(names)} studies damaged: {', '.join(damaged)}")
