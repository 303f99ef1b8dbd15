"""`oodcorr study verify NAME`: whether a saved study is complete and unaltered (verify.py's checks, all of them,
every problem counted), without pulling or analysing anything."""

from __future__ import annotations

import click

from oodcorr.core.errors import UserError
from oodcorr.launch import verify
from oodcorr.launch.common import echo
from oodcorr.launch.saved import REMOTE, RUN_FILES, STUDIES, repo_root, saved_runs, study_dir


@click.command("verify")
@click.argument("name")
def verify_cmd(name):
    """Check that studies/NAME is complete and unaltered: every object its runs/*.dvc files name is in the
    studies remote with content matching its name, every run matches the study's dvc.lock, and pulled copies
    (where present) match their .dvc files. Exit 2 naming the run and file otherwise."""
    root = repo_root()
    sdir = study_dir(root, name)
    if not (sdir / "params.yaml").exists():
        raise UserError(f"no study {name!r} in {root / STUDIES}")
    keys = saved_runs(sdir)
    pulled = [k for k in keys if (sdir / "runs" / k).exists()]
    problems, checked = verify.study_problems(
        root, sdir, keys, remote=True, workspace=False, remote_name=REMOTE, saved=RUN_FILES
    )
    stores = verify.Stores(root, REMOTE) if pulled else None
    for k in pulled:  # copies pulled earlier: against their .dvc listing too
        md5, _ = verify.read_pointer(sdir / "runs" / f"{k}.dvc", k)
        entries, _ = stores.listing(md5, use_remote=False) if md5 else (None, "")
        if entries is not None:
            problems += verify.copy_problems(sdir / "runs" / k, k, entries, f"runs/{k}.dvc")
    if problems:
        line = verify.summary(name, problems, verify_hint=False)
        raise UserError(line.replace(": ", " is INCOMPLETE or altered: ", 1))
    echo(
        f"study {name}: complete: {len(keys)} run(s), {checked} object(s) in the {REMOTE} remote, each matching "
        f"its name and the study's dvc.lock" + (f"; {len(pulled)} pulled copy(ies) match" if pulled else "")
    )
