"""Bad-input cases a team meets: a params.yaml that git merged with its conflict markers left in (every command
that reads params names params.yaml:LINE), prediction files written by a newer version of the tool (a schema
version, a column this reader does not know: what to upgrade), run folders restored from a backup with other
timestamps (nothing rescored, nothing retrained), an MLflow store or a port held by a process left behind (a
server of a killed `oodcorr ui`: the holder is named), and a saved study analysed with other package versions
(a major version apart refused, a minor one a note). A new case is one Case in cases()."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from bad_inputs_runner import BASE, CHECK, A, Case, E, T, edit_params, env, text_params
from bad_inputs_saved import CHECK as SAVED_CHECK
from bad_inputs_saved import DVC_OWN, saved

MARKERS = r"params\.yaml:(\d+): invalid YAML: git merge conflict markers"


def _conflict(text: str) -> str:
    """The line after `train:` in conflict, both sides kept with the markers between (what `git merge` leaves)."""
    lines = text.splitlines(keepends=True)
    i = next(j for j, line in enumerate(lines) if line.startswith("train:")) + 1
    theirs = lines[i].replace("0", "1")
    lines[i : i + 1] = ["<<<<<<< HEAD\n", lines[i], "=======\n", theirs, ">>>>>>> teammate/lr\n"]
    return "".join(lines)


CONFLICT_COMMANDS = {
    "check": CHECK,
    "runs": ["study", "runs"],
    "prepare": ["data", "prepare"],
    "train": T,
    "evaluate": E,
    "analyze": A,
    "sync": ["sync"],
    "use": ["study", "use", "quickstart"],
    "ui": ["ui", "--port", "1"],
    "plan": ["plan"],
}

PRED = "runs/a/eval/predictions/step-4/synth_overlap.parquet"
NOISE = edit_params(lambda p: p["analyze"].update(noise=True))


def _predictions(fn):
    """analyze.noise on (the analysis reads the per-item predictions), `fn(table)` applied to one file."""

    def mutate(root):
        import pyarrow.parquet as pq

        NOISE(root)
        pq.write_table(fn(pq.read_table(root / PRED)), root / PRED)

    return mutate


def _schema(version: str):
    return _predictions(lambda t: t.replace_schema_metadata({"oodcorr.predictions_schema": version}))


def _new_column(t):
    import numpy as np
    import pyarrow as pa

    return t.append_column("logp_neutral", pa.array(np.zeros(t.num_rows)))


def _restored(root):
    """Every file of the run folder rewritten as a backup restores it: same bytes, new inode, another mtime."""
    for p in sorted((root / "runs").rglob("*")):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            p.unlink()
            p.write_bytes(data)
            os.utime(p, (1_000_000_000, 1_000_000_000))  # 2001


def _nothing_redone(root, res):
    out = res.stderr + res.stdout
    if "nothing to do" not in out and res.args[3:4] == ["train"]:
        return f"train did something: {out.strip().splitlines()[-1:]}"
    for rel in ("runs/a/eval/metrics.jsonl", "runs/a/run.json"):
        if (root / rel).read_bytes() != (BASE[0] / rel).read_bytes():
            return f"{rel} differs from the base project's"
    cache = sorted(p.name for p in (root / "runs/a/eval/cache").glob("*.parquet"))
    base = sorted(p.name for p in (BASE[0] / "runs/a/eval/cache").glob("*.parquet"))
    return None if cache == base else f"evaluation cache changed: {len(cache)} files, base {len(base)}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PORT = _free_port()


def _port_held(root):
    """A process listening on PORT, as an MLflow server left by a killed `oodcorr ui` does; it exits when the
    case's project is removed (or after 5 minutes). Tracking on: the base project has none."""
    edit_params(lambda p: p["study"].pop("tracking"))(root)
    code = (
        "import os, socket, time, sys; s = socket.socket(); "
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
        f"s.bind(('127.0.0.1', {PORT})); s.listen(); print('up', flush=True); t = time.time()\n"
        f"while os.path.exists({str(root)!r}) and time.time() - t < 300: time.sleep(0.5)"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env())
    p.stdout.readline()


def _lock_store(root):
    from bad_inputs_tracking import _lock_store as lock

    lock(root)


def _versions(fn):
    """The saved study `demo` (bad_inputs_saved), its results/versions.json edited by `fn(record) -> None`."""

    def change(root):
        import json

        f = root / "studies" / "demo" / "results" / "versions.json"
        doc = json.loads(f.read_text())
        fn(doc["analysed_with"])
        f.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")

    return saved(change)


def _apart(pkg: str, major: bool):
    """`pkg`'s recorded version one major (or minor) version below this machine's."""
    from importlib.metadata import version

    parts = [int(x) for x in version(pkg).split(".")[:2]]
    if major:
        return f"{parts[0] - 1}.{parts[1]}.0" if parts[0] > 1 else f"{parts[0] + 1}.0.0"
    return f"{parts[0]}.{parts[1] - 1}.0" if parts[1] > 0 else f"{parts[0]}.{parts[1] + 1}.0"


def _noted(pkg: str):
    def check(root, res):
        lines = [x for x in res.stdout.splitlines() if x.startswith("note: ")]
        if len(lines) != 1 or pkg not in lines[0] or "minor version apart" not in lines[0]:
            return f"no one-line note naming {pkg}: {res.stdout.strip()[-200:]}"
        return None

    return check


def cases() -> list[Case]:
    out = [
        Case(
            f"team:params-conflict-{name}",
            args,
            text_params(_conflict),
            must=MARKERS,
            item="params.yaml merged by git with conflict markers",
            fast=name == "check",
        )
        for name, args in CONFLICT_COMMANDS.items()
    ]
    out += [
        Case(
            "team:predictions-newer-schema",
            A,
            _schema("2"),
            must=r"synth_overlap\.parquet: predictions schema version 2, newer than this oodcorr reads \(1\); "
            r"upgrade oodcorr",
            item="predictions written by a newer version",
            fast=True,
        ),
        Case(
            "team:predictions-schema-not-a-number",
            A,
            _schema("two"),
            must=r"synth_overlap\.parquet: schema version b'two' is not a number",
            item="predictions written by a newer version",
        ),
        Case(
            "team:predictions-schema-current",
            A,
            _schema("1"),
            expect="ok",
            allowed=("results/*", "results/**", ".oodcorr-outputs.json"),
            item="predictions written by a newer version",
        ),
        Case(
            "team:predictions-unknown-column",
            A,
            _predictions(_new_column),
            must=r"synth_overlap\.parquet: column 'logp_neutral' is not one this oodcorr knows .*upgrade oodcorr",
            item="predictions written by a newer version",
        ),
        Case(
            "team:restored-timestamps-train",
            T,
            _restored,
            expect="ok",
            check=_nothing_redone,
            item="run folder restored with other timestamps",
            fast=True,
        ),
        Case(
            "team:restored-timestamps-evaluate",
            E,
            _restored,
            expect="ok",
            check=_nothing_redone,
            allowed=("runs/a/eval/*.json", "runs/a/eval/*.jsonl", "runs/a/eval/*.csv", "runs/a/eval/predictions*"),
            item="run folder restored with other timestamps",
        ),
        Case(
            "team:store-locked-holder-named",
            T,
            _lock_store,
            wrap="lock",
            must=r"mlflow\.db: the MLflow store is locked by another process .*held by process \d+: `.*python.*`; "
            r"stop it with `kill \d+`",
            item="MLflow store left locked by a killed oodcorr ui",
            allowed=("mlruns/**",),
        ),
        Case(
            "team:ui-port-held-holder-named",
            ["ui", "--port", PORT],
            _port_held,
            must=rf"--port {PORT}: cannot listen on 127\.0\.0\.1:{PORT} .*held by process \d+.*kill \d+",
            item="MLflow store left locked by a killed oodcorr ui",
            fast=True,
        ),
    ]
    out += [
        Case(
            f"team:versions-{pkg}-major-apart",
            SAVED_CHECK,
            _versions(lambda r, pkg=pkg: r.update({pkg: _apart(pkg, major=True)})),
            must=rf"studies/demo/results/versions\.json: the study was analysed with {pkg} [0-9.]+, this machine has "
            rf"{pkg} [0-9.]+: it needs {pkg}>=\d+,<\d+",
            allowed=DVC_OWN,
            item="a saved study re-analysed with other package versions",
            fast=pkg == "numpy",
        )
        for pkg in ("numpy", "pandas", "pyarrow")
    ]
    out += [
        Case(
            f"team:versions-{pkg}-minor-apart",
            SAVED_CHECK,
            _versions(lambda r, pkg=pkg: r.update({pkg: _apart(pkg, major=False)})),
            expect="ok",
            check=_noted(pkg),
            allowed=DVC_OWN,
            item="a saved study re-analysed with other package versions",
        )
        for pkg in ("numpy", "pandas", "pyarrow")
    ]
    out.append(
        Case(
            "team:versions-record-damaged",
            SAVED_CHECK,
            saved(lambda root: (root / "studies/demo/results/versions.json").write_text("{not json")),
            must=r"studies/demo/results/versions\.json: not a versions record",
            allowed=DVC_OWN,
            item="a saved study re-analysed with other package versions",
        )
    )
    return out
