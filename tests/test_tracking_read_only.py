"""A read-only MLflow store is named as read-only, with what to do, in one line and a non-zero exit, by
`oodcorr sync` (which asks for MLflow explicitly) and by `oodcorr analyze` (a read-only store never heals by
waiting, unlike a server that is down): never reported "unreachable", nothing written. As root, a permission bit
does not stop a write, so the store's folder is mounted read-only in a private mount namespace instead."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import yaml

from oodcorr.core.io import write_json, write_jsonl
from oodcorr.stats.simulate import metrics_rows
from oodcorr.tracking import mirror
from oodcorr.tracking import store as tracking
from study_helpers import BIN, env

OOD = ["hans", "anli", "wnli"]


def project(root):
    params = {"study": {"name": "ro"}, "analyze": {"out": "results", "methods": ["linear"], "bootstrap": 0}}
    for model in ("m1", "m2"):
        for seed in (0, 1):
            run = f"{model}-s{seed}"
            rows = metrics_rows(model, seed, 12, 0.6, OOD, run=run)
            write_jsonl(root / "runs" / run / "eval" / "metrics.jsonl", rows)
            write_json(root / "runs" / run / "run.json", {"run": run})
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    p = {**params, "_root": str(root)}
    tracking.ensure_store(tracking.tracking_uri(p))
    mirror.start_train(p, "m1-s0", "id", {"oodcorr.run_key": "m1-s0"}, {"lr": "1"}, "m1 s0")
    return root / "mlruns"


def read_only(cmd: list[str], cwd, store) -> subprocess.CompletedProcess:
    if os.geteuid() != 0:
        for p in [store, *store.rglob("*")]:
            p.chmod(0o555 if p.is_dir() else 0o444)
        return subprocess.run(cmd, cwd=cwd, env=env(), capture_output=True, text=True, timeout=600)
    if not shutil.which("unshare"):
        pytest.skip("root without unshare: cannot make the store read-only")
    script = f'mount --bind "{store}" "{store}" && mount -o remount,bind,ro "{store}" && exec "$@"'
    res = subprocess.run(
        ["unshare", "-m", "sh", "-c", script, "sh", *cmd],
        cwd=cwd,
        env=env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    if "mount" in res.stderr and "permission denied" in res.stderr.lower():
        pytest.skip(f"no private read-only mount here: {res.stderr.strip()[:120]}")
    return res


@pytest.mark.parametrize("command", [["sync"], ["analyze"]])
def test_a_read_only_store_is_named_read_only_with_what_to_do(tmp_path, command, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # the project's own store, as `oodcorr` sees it
    store = project(tmp_path)
    before = sorted((p.name, p.stat().st_size) for p in store.rglob("*"))
    res = read_only([str(BIN / "oodcorr"), *command], tmp_path, store)
    errors = [x for x in res.stderr.splitlines() if x.startswith("error:")]
    assert res.returncode != 0 and len(errors) == 1, res.stdout + res.stderr
    assert "mlflow.db: the MLflow store is read-only" in errors[0] and "study.tracking: none" in errors[0], errors
    assert "unreachable" not in res.stderr and "Traceback" not in res.stderr
    assert sorted((p.name, p.stat().st_size) for p in store.rglob("*")) == before
    assert not (tmp_path / "results").exists()  # refused before the analysis ran
