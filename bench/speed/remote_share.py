#!/usr/bin/env python3
"""A saved study shared through a real remote: seconds of `oodcorr study save`, of `study verify` and of `study
reanalyze --check` in a collaborator's fresh clone, for the simulated study of tests/test_studies_saved.py, on the
in-repository folder remote (the baseline: `.dvc/studies-remote`, committed), an OpenSSH server and moto's S3
server with authentication on (.ci/servers-up.sh, 127.0.0.1), with each remote's time as a ratio of the folder's.
And the repository size the study adds: the bytes git tracks and the packed size of the repository's history
(`git gc`, then `git count-objects -v`) before and after the study's commit, folder remote vs real remote.
Writes bench/speed/results/remote_share.json. (The one bench of remote sharing: bench/studies/share_remotes.py,
which timed the same commands on a folder outside the project and an S3 server without authentication, was
folded into this one.)

    PYTHONPATH=src .venv/bin/python bench/speed/remote_share.py [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests"))

from remote_servers import Servers, add_remote, credentials, from_env, run_script  # noqa: E402
from study_helpers import BIN, sh  # noqa: E402
from test_studies_saved import source_project  # noqa: E402

STUDY = "tiny"


def timed(cmd: list, cwd: Path) -> float:
    t0 = time.perf_counter()
    sh([BIN / "oodcorr", *cmd], cwd, AWS_EC2_METADATA_DISABLED="true")
    return time.perf_counter() - t0


def repo_size(repo: Path) -> dict:
    """Bytes of the files git tracks, and of the packed history after `git gc`."""
    sh(["git", "gc", "-q", "--aggressive", "--prune=now"], repo)
    counts = dict(ln.split(": ") for ln in sh(["git", "count-objects", "-v"], repo).stdout.splitlines())
    files = sh(["git", "ls-files", "-z"], repo).stdout.split("\0")
    tracked = sum((repo / f).stat().st_size for f in files if f and (repo / f).is_file())
    return {
        "tracked_files": len([f for f in files if f]),
        "tracked_bytes": tracked,
        "packed_kib": int(counts["size-pack"]),
    }


def one(kind: str, servers: Servers | None, work: Path) -> dict:
    src = source_project(work / "ran")
    repo = work / "repo"
    repo.mkdir()
    for cmd in (["git", "init", "-q"], ["dvc", "init", "-q"], ["dvc", "config", "core.autostage", "true"]):
        sh(cmd, repo)
    sh(["git", "add", "-A"], repo)
    sh(["git", "commit", "-qm", "init"], repo)
    args = []
    if kind != "folder":
        add_remote(repo, servers, kind, f"bench-{uuid.uuid4().hex[:8]}")
        args = ["--remote", "team"]
        sh(["git", "add", "-A"], repo)
        sh(["git", "commit", "-qm", "remote"], repo)
    before = repo_size(repo)
    out = {"save_s": timed(["study", "save", STUDY, "--from", src, *args], repo)}
    sh(["git", "add", "-A"], repo)
    sh(["git", "commit", "-qm", "study"], repo)
    after = repo_size(repo)
    out["adds"] = {k: after[k] - before[k] for k in after}
    clone = work / "clone"
    sh(["git", "clone", "-q", repo, clone], work)
    if kind != "folder":
        credentials(clone, servers, kind)
    out["verify_s"] = timed(["study", "verify", STUDY, *args], clone)
    out["reanalyze_check_s"] = timed(["study", "reanalyze", STUDY, "--check", *args], clone)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    servers, started = from_env(), None
    if servers is None:
        started = Path(tempfile.mkdtemp(prefix="oodcorr-servers-"))
        started.chmod(0o755)
        servers = Servers(run_script(started))
    try:
        results = {}
        for kind in ("folder", "ssh", "s3"):
            if kind != "folder" and (why := servers.reason(kind)):
                results[kind] = {"skipped": why}
                print(why)
                continue
            runs = []
            for _ in range(a.repeat):
                with tempfile.TemporaryDirectory() as tmp:
                    runs.append(one(kind, servers, Path(tmp)))
            results[kind] = {
                **{
                    k: round(statistics.median(r[k] for r in runs), 2)
                    for k in ("save_s", "verify_s", "reanalyze_check_s")
                },
                "adds": runs[0]["adds"],
            }
    finally:
        if started:
            import shutil

            run_script(started, "--down")
            shutil.rmtree(started, ignore_errors=True)
    base = results["folder"]
    for kind in ("ssh", "s3"):
        r = results[kind]
        if "skipped" not in r:
            r["ratio_vs_folder"] = {k: round(r[k] / base[k], 2) for k in ("save_s", "verify_s", "reanalyze_check_s")}
    for kind, r in results.items():
        print(kind, json.dumps(r))
    out = HERE / "results" / "remote_share.json"
    out.parent.mkdir(exist_ok=True)
    meta = {
        "machine": platform.machine(),
        "repeat": a.repeat,
        "load_avg_1m": round(__import__("os").getloadavg()[0], 1),
    }
    out.write_text(json.dumps({"meta": meta, **results}, indent=1) + "\n")
    print(f"wrote {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
