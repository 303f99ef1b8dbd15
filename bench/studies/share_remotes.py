#!/usr/bin/env python3
"""Saved studies on each remote kind: wall time of `oodcorr study save`, `study verify` (in a fresh clone) and
`study reanalyze --check` (in a fresh clone), for the saved-study tests' study (tests/test_studies_saved.py's
source_project: 2 evaluated runs, 10 checkpoints x 4 testsets, 90 DVC objects), on

    in-git     the repository's own folder remote (.dvc/studies-remote, committed): the baseline
    folder     a folder outside the project (--allow-outside)
    s3         a moto S3 server on 127.0.0.1 (DVC's dvc-s3 plugin)

and the repository size a study adds (bytes of the files its commit adds, and the packed size after `git gc`).
Prints each time and its ratio to the in-git baseline; writes bench/studies/results/share_remotes.json.

    PATH=.venv/bin:$PATH python bench/studies/share_remotes.py [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
OUT = Path(__file__).parent / "results" / "share_remotes.json"


def sh(cmd, cwd, **env):
    from study_helpers import sh as run

    return run(cmd, cwd, **env)


def timed(cmd, cwd, **env) -> float:
    t = time.perf_counter()
    sh(cmd, cwd, **env)
    return time.perf_counter() - t


def packed_kib(repo: Path) -> int:
    sh(["git", "gc", "-q"], repo)
    out = sh(["git", "count-objects", "-v"], repo).stdout
    return int(dict(line.split(": ") for line in out.splitlines())["size-pack"])


def tracked_bytes(repo: Path) -> int:
    out = sh(["git", "ls-tree", "-r", "-l", "HEAD"], repo).stdout
    return sum(int(line.split()[3]) for line in out.splitlines() if line.split()[3] != "-")


def moto(tmp: Path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [Path(sys.executable).with_name("moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    import boto3

    url = f"http://127.0.0.1:{port}"
    c = boto3.client("s3", endpoint_url=url, aws_access_key_id="k", aws_secret_access_key="s", region_name="us-east-1")
    for _ in range(100):
        try:
            c.create_bucket(Bucket="studies")
            return proc, url
        except Exception:  # noqa: BLE001 - not listening yet
            time.sleep(0.2)
    raise SystemExit("moto_server did not start")


def new_repo(kind: str, root: Path, endpoint: str) -> tuple[Path, list[str], dict]:
    """A git + DVC repository with the remote of `kind`; (it, the save's extra arguments, its environment)."""
    root.mkdir(parents=True)
    for cmd in (["git", "init", "-q"], ["dvc", "init", "-q"], ["dvc", "config", "core.autostage", "true"]):
        sh(cmd, root)
    extra: list[str] = []
    if kind == "folder":
        sh(["dvc", "remote", "add", "team", str(root.parent / f"{kind}-remote")], root)
        extra = ["--remote", "team", "--allow-outside"]
    elif kind == "s3":
        sh(["dvc", "remote", "add", "team", "s3://studies/oodcorr"], root)
        sh(["dvc", "remote", "modify", "team", "endpointurl", endpoint], root)
        sh(["dvc", "remote", "modify", "--local", "team", "access_key_id", "k"], root)
        sh(["dvc", "remote", "modify", "--local", "team", "secret_access_key", "s"], root)
        extra = ["--remote", "team"]
    sh(["git", "add", "-A"], root)
    sh(["git", "commit", "-qm", "init"], root)
    return root, extra, {"AWS_EC2_METADATA_DISABLED": "true"}


def one(kind: str, source: Path, tmp: Path, endpoint: str) -> dict:
    repo, extra, env = new_repo(kind, tmp / kind, endpoint)
    before_bytes, before_pack = tracked_bytes(repo), packed_kib(repo)
    save = timed(["oodcorr", "study", "save", "demo", "--from", source, *extra], repo, **env)
    sh(["git", "add", "-A"], repo)
    sh(["git", "commit", "-qm", "study demo"], repo)
    fresh = tmp / f"{kind}-fresh"
    sh(["git", "clone", "-q", repo, fresh], tmp)
    if (repo / ".dvc" / "config.local").exists():
        (fresh / ".dvc" / "config.local").write_text((repo / ".dvc" / "config.local").read_text())
    verify = timed(["oodcorr", "study", "verify", "demo"], fresh, **env)
    check = timed(["oodcorr", "study", "reanalyze", "demo", "--check"], fresh, **env)
    return {
        "save_s": round(save, 2),
        "verify_s": round(verify, 2),
        "reanalyze_check_s": round(check, 2),
        "git_bytes_added": tracked_bytes(repo) - before_bytes,
        "git_packed_kib_added": packed_kib(repo) - before_pack,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    from test_studies_saved import source_project

    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    results: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="oodcorr-share-") as t:
        tmp = Path(t)
        source = source_project(tmp / "ran")
        proc, endpoint = moto(tmp)
        try:
            for i in range(args.repeat):
                for kind in ("in-git", "folder", "s3"):
                    results.setdefault(kind, []).append(one(kind, source, tmp / f"r{i}", endpoint))
        finally:
            proc.kill()
    base = results["in-git"][-1]
    for kind, rows in results.items():
        r = rows[-1]
        ratios = {k: round(r[k] / base[k], 2) for k in ("save_s", "verify_s", "reanalyze_check_s")}
        print(f"{kind:7s} " + " ".join(f"{k}={v}" for k, v in r.items()) + f"  ratio vs in-git: {ratios}")
    OUT.write_text(json.dumps({"study": "tests/test_studies_saved.py source_project", "runs": results}, indent=1))
    print(f"wrote {OUT.relative_to(REPO)}")


if __name__ == "__main__":
    main()
