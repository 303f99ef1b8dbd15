"""The bad-input bench's shared runner: the base project every case copies, the Case record, the helpers
that mutate params.yaml, and running a case (its environment, snapshot before and after, classification)
and a list of cases (`main`: the results file). The cases themselves live one module per concern
(bad_inputs_<concern>.py); bench/bad_inputs/bad_inputs.py lists the concerns and is the command line."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
BIN = Path(sys.executable).parent

BASE_PARAMS = {
    "study": {"name": "bench", "tracking": "none"},
    "data": {
        "out": "data/prepared",
        "max_examples": 24,
        "seed": 0,
        "neutral": "drop",
        "prepare": [],
        "testsets": {"synth_train": {"max_examples": 64}},
    },
    "train": {
        "lr": 0.005,
        "batch_size": 8,
        "max_steps": 8,
        "warmup_ratio": 0.0,
        "quiet": True,
        "checkpoints": {"every": 2},
        "max_length": 64,
        "lora": {"dropout": 0.1},
    },
    "runs": {
        "a": {
            "model": "tiny-olmo2",
            "train_set": "synth_train",
            "id_testset": "synth_id",
            "shots": 16,
            "data_seed": 0,
            "seed": 0,
        }
    },
    "evaluate": {
        "testsets": ["synth_id", "synth_overlap", "synth_negation", "synth_vocab"],
        "batch_size": 16,
        "max_length": 64,
        "quiet": True,
    },
    "analyze": {"out": "results", "methods": ["linear"], "bootstrap": 0, "mlflow": False, "noise": False},
}


def env(**extra) -> dict:
    e = dict(os.environ)
    e.update(
        {
            "PATH": f"{BIN}{os.pathsep}{e.get('PATH', '')}",
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "DVC_NO_ANALYTICS": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "OODCORR_THREADS": "1",
            "PYTHONPATH": str(REPO / "src"),
            "GIT_AUTHOR_NAME": "b",
            "GIT_AUTHOR_EMAIL": "b@b",
            "GIT_COMMITTER_NAME": "b",
            "GIT_COMMITTER_EMAIL": "b@b",
            # third-party deprecation notices (MLflow/SQLAlchemy) are not oodcorr's output
            "PYTHONWARNINGS": "ignore::DeprecationWarning,ignore::FutureWarning",
        }
    )
    e.pop("MLFLOW_TRACKING_URI", None)
    e.update({k: str(v) for k, v in extra.items()})
    return e


def oodcorr(args, cwd: Path, prefix=(), timeout: int = 600, **extra) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*prefix, sys.executable, "-m", "oodcorr", *map(str, args)],
        cwd=cwd,
        env=env(**extra),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


BASE: list[Path] = []  # the finished base project (set by build_base), for checks that compare with it


def build_base(root: Path) -> Path:
    """A finished tiny study: prepared data, run `a` trained (8 steps, checkpoints every 2), evaluated and
    analysed; no MLflow (tracking: none), so each case is fast."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "params.yaml").write_text(yaml.safe_dump(BASE_PARAMS, sort_keys=False))
    for args in (
        ["data", "prepare"],
        ["train", "--run", "a"],
        ["evaluate", "--run", "a", "--quiet"],
        ["analyze", "--no-plots"],
    ):
        res = oodcorr(args, root)
        if res.returncode != 0:
            raise RuntimeError(f"base project: oodcorr {' '.join(args)} failed:\n{res.stderr[-3000:]}")
    BASE[:] = [root]
    return root


# ------------------------------------------------------------------------------------------------ cases


@dataclass
class Case:
    id: str
    args: list
    mutate: Callable[[Path], None] | None = None
    expect: str = "error"  # error | ok
    must: str | None = None  # regex the error line must match (names the field / file)
    check: Callable[[Path, subprocess.CompletedProcess], str | None] | None = None  # ok cases: problem or None
    allowed: tuple = ()  # globs that may change (an ok case's own outputs)
    wrap: str | None = None  # fsize:<bytes> | readonly:<path> | lock | flock:<name> | env:K=V
    item: str = ""  # which finding it covers
    fast: bool = False  # also in the fast test run


def edit_params(fn: Callable[[dict], None]) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        p = yaml.safe_load((root / "params.yaml").read_text())
        fn(p)
        (root / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False, allow_unicode=True))

    return mutate


def text_params(fn: Callable[[str], str]) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        (root / "params.yaml").write_text(fn((root / "params.yaml").read_text()))

    return mutate


def corrupt(rel: str, how: str):
    def mutate(root):
        files = sorted(root.glob(rel))
        assert files, rel
        for f in files[:1]:
            data = f.read_bytes()
            f.write_bytes(b"" if how == "empty" else data[: len(data) // 2] if how == "truncate" else b"garbage" * 50)

    return mutate


# every credential a case plants holds this; it must appear in no output and in no file but params.yaml
SECRET = "s3cr3t"


def leaked(res: subprocess.CompletedProcess, after: dict) -> str | None:
    if SECRET in (res.stdout or "") + (res.stderr or ""):
        return "secret printed"
    files = [k for k, v in after.items() if v and SECRET.encode() in v and not k.endswith("params.yaml")]
    return f"secret written to {files[:3]}" if files else None


# the commands a case runs most
T, E, A = ["train", "--run", "a"], ["evaluate", "--run", "a", "--quiet"], ["analyze", "--no-plots"]
CHECK = ["study", "check"]
LOCK_FILES = (".oodcorr", ".oodcorr/locks", ".oodcorr/locks/*")  # the holder's own lock file (a killed holder's stays)


# ------------------------------------------------------------------------------------------------ running


def snapshot(root: Path) -> dict[str, bytes | None]:
    out = {}
    for p in root.rglob("*"):
        rel = p.relative_to(root).as_posix()
        if p.is_symlink():
            out[rel] = b"->" + os.readlink(p).encode()
        elif p.is_file():
            out[rel] = p.read_bytes()
        elif p.is_dir():
            out[rel + "/"] = None
    return out


def changed(before: dict, after: dict, allowed: tuple) -> list[str]:
    import fnmatch

    keys = set(before) | set(after)
    diff = [k for k in keys if before.get(k, "<gone>") != after.get(k, "<gone>")]
    return sorted(
        k
        for k in diff
        if not any(fnmatch.fnmatch(k.rstrip("/"), g.rstrip("/")) or fnmatch.fnmatch(k, g) for g in allowed)
    )


def _prefix(wrap: str | None, root: Path) -> tuple[list, dict, Callable | None]:
    """(command prefix, extra env, preexec_fn) for the case's environment."""
    if not wrap:
        return [], {}, None
    kind, _, arg = wrap.partition(":")
    if kind == "env":
        k, v = arg.split("=", 1)
        return [], {k: v}, None
    if kind == "fsize":
        import resource

        limit = int(arg)
        return [], {}, lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    if kind == "readonly":
        if os.geteuid() != 0:
            (root / arg).chmod(0o555)
            return [], {}, None
        path = str(root / arg)
        return (
            [
                "unshare",
                "-m",
                "sh",
                "-c",
                f'mount --bind "{path}" "{path}" && mount -o remount,bind,ro "{path}" "{path}" && exec "$@"',
                "sh",
            ],
            {},
            None,
        )
    return [], {}, None


def classify(case: Case, res: subprocess.CompletedProcess) -> tuple[str, str]:
    out = (res.stderr or "") + (res.stdout or "")
    if "Traceback (most recent call last)" in out:
        return "traceback", out.strip().splitlines()[-1][:300]
    lines = [x for x in out.splitlines() if x.strip()]
    errors = [x for x in lines if x.startswith("error: ")]
    others = [x for x in lines if not x.startswith(("error: ", "warning: ", "train ", "ok: "))]
    if case.expect == "error":
        if res.returncode == 0:
            return "wrongly_accepted", (lines[-1] if lines else "")[:300]
        if len(errors) != 1 or others:
            return "unclear_error", " | ".join(lines[-3:])[:300]
        if case.must and not re.search(case.must, errors[0]):
            return "unclear_error", f"does not match {case.must!r}: {errors[0][:250]}"
        return "clean_error", errors[0][:300]
    if res.returncode != 0:
        return "wrong_behaviour", " | ".join(lines[-2:])[:300]
    return "correct", ""


def run_case(case: Case, base: Path, work: Path) -> dict:
    root = work / "p"
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(base, root, symlinks=True)
    holder = None
    try:
        if case.mutate:
            case.mutate(root)
        before = snapshot(root)
        prefix, extra, preexec = _prefix(case.wrap, root)
        if case.wrap == "lock":
            holder = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    f"""
import sqlite3, time
con = sqlite3.connect({str(root / 'mlruns' / 'mlflow.db')!r}, isolation_level=None)
con.execute("begin exclusive"); print("locked", flush=True); time.sleep(600)""",
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            holder.stdout.readline()
            extra["OODCORR_STORE_BUSY_TIMEOUT_S"] = "2"
        elif case.wrap and case.wrap.startswith("flock:"):  # another oodcorr process holding this work's lock
            holder = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    f"""
import time
from oodcorr.core import locks
with locks.exclusive(locks.lock_path({str(root)!r}, {case.wrap.split(':', 1)[1]!r}), "busy"):
    print("locked", flush=True); time.sleep(600)""",
                ],
                stdout=subprocess.PIPE,
                text=True,
                env=env(),
            )
            holder.stdout.readline()
        t0 = time.time()
        res = subprocess.run(
            [*prefix, sys.executable, "-m", "oodcorr", *map(str, case.args)],
            cwd=root,
            env=env(**extra),
            capture_output=True,
            text=True,
            timeout=900,
            preexec_fn=preexec,
        )
        seconds = time.time() - t0
    finally:
        if holder:
            holder.kill()
            holder.wait()
        if case.wrap and case.wrap.startswith("readonly") and os.geteuid() != 0:
            (root / case.wrap.split(":", 1)[1]).chmod(0o755)
    outcome, detail = classify(case, res)
    if outcome == "correct" and case.check:
        try:
            problem = case.check(root, res)
        except Exception as e:  # noqa: BLE001 - the check itself failed: the behaviour is not what was due
            problem = f"check failed: {type(e).__name__}: {e}"
        if problem:
            outcome, detail = "wrong_behaviour", problem
    after = snapshot(root)
    leak = leaked(res, after)
    if leak:
        outcome, detail = "secret_leaked", leak
    diff = changed(before, after, case.allowed)
    for name in ("PWNED", "PWN3", "X"):
        if (root / name).exists() or (root.parent / name).exists():
            diff.append(f"{name} created")
    return {
        "id": case.id,
        "item": case.item,
        "expect": case.expect,
        "outcome": outcome,
        "detail": detail,
        "data_changed": diff[:5],
        "rc": res.returncode,
        "seconds": round(seconds, 2),
    }


COUNTS = (
    "clean_error",
    "correct",
    "traceback",
    "wrongly_accepted",
    "unclear_error",
    "wrong_behaviour",
    "secret_leaked",
)


def main(cases: list[Case], argv=None, description: str = "") -> dict:
    """Run `cases` (those matching --only) against one base project, print a line per case and write the
    results file (bench/bad_inputs/results/bad_inputs.json)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--only", default=None, help="run the cases whose id contains this")
    ap.add_argument("--out", default=str(HERE / "results" / "bad_inputs.json"))
    ap.add_argument("--jobs", type=int, default=2, help="cases run at once (each in its own project copy)")
    ap.add_argument(
        "--update",
        action="store_true",
        help="replace these cases' results in the existing --out file (a rerun after a fix)",
    )
    args = ap.parse_args(argv)
    cases = [c for c in cases if not args.only or args.only in c.id]
    with tempfile.TemporaryDirectory(prefix="oodcorr-bad-inputs-") as tmp:
        t0 = time.time()
        base = build_base(Path(tmp) / "base")
        build_s = time.time() - t0
        from concurrent.futures import ThreadPoolExecutor

        def one(item):
            i, case = item
            r = run_case(case, base, Path(tmp) / f"work{i}")
            shutil.rmtree(Path(tmp) / f"work{i}", ignore_errors=True)
            flag = " DATA CHANGED " + ", ".join(r["data_changed"]) if r["data_changed"] else ""
            print(f"[{i}/{len(cases)}] {r['outcome']:16s} {case.id}: {r['detail'][:140]}{flag}", flush=True)
            return r

        with ThreadPoolExecutor(args.jobs) as pool:  # each case in its own copy; subprocess-bound
            results = list(pool.map(one, enumerate(cases, 1)))
    command = "PYTHONPATH=src python bench/bad_inputs/bad_inputs.py" + (f" --only {args.only}" if args.only else "")
    reruns = []
    if args.update and Path(args.out).exists():  # these cases again, after a fix: replace them in the full run
        old = json.loads(Path(args.out).read_text())
        fresh = {r["id"]: r for r in results}
        reruns = old.get("reruns", []) + [{"command": command + " --update", "ids": sorted(fresh)}]
        results = [fresh.pop(r["id"], r) for r in old["results"]] + list(fresh.values())
        command = old["command"]
    counts = {k: sum(r["outcome"] == k for r in results) for k in COUNTS}
    counts["data_changed"] = sum(bool(r["data_changed"]) for r in results)
    summary = {
        "cases": len(results),
        "counts": counts,
        "base_build_s": round(build_s, 1),
        "jobs": args.jobs,
        "command": command,
        "reruns": reruns,
        "results": results,
    }
    print(json.dumps({"cases": len(results), **counts}))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(summary, indent=1) + "\n")
    return summary
