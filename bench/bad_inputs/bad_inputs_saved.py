"""Bad-input cases: saved studies (`oodcorr study save | reanalyze | verify`) and the prediction files the
analysis reads. A saved-study case replaces the base project by a fresh clone of a repository holding a saved,
committed study `demo` (simulated runs a-s0, b-s0, saved from the project `ran/` beside it, which the clone
also gets), built once per bench run; then it damages the clone, the remote inside it or `ran/`. A prediction
case edits the base project's own predictions and analyses with analyze.noise on. A new one is one Case in
cases()."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import numpy as np
import yaml
from bad_inputs_runner import SECRET, A, Case, edit_params, env, oodcorr

_SAVED: list[Path] = []
_LOCK = threading.Lock()
OOD = ["hans", "anli", "wnli"]
# what a refused save or reanalysis may still touch: DVC's own cache and state, and the pulled copies
DVC_OWN = (
    ".dvc/tmp",
    ".dvc/tmp/**",
    ".dvc/cache",
    ".dvc/cache/**",
    "studies/.dvc/tmp",  # the studies subrepo's own (oodcorr.records.studies_repo)
    "studies/.dvc/tmp/**",
    "studies/.dvc/cache",
    "studies/.dvc/cache/**",
    "studies/.dvc/config.local",  # git-ignored: the remote's options a study command copies from the project
    "studies/*/runs/*",
    "studies/*/runs/**",
)


def _source(root: Path) -> None:
    """A finished project: runs a-s0, b-s0 evaluated and recorded in its dvc.lock, as `dvc repro` records them."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
    from oodcorr.core.io import write_json, write_jsonl
    from oodcorr.launch.verify import file_md5, folder_md5, listing
    from oodcorr.records.simulated_runs import write_predictions
    from oodcorr.stats.simulate import irt_metrics_rows, irt_study

    sigma = np.array([[1, 0.5, 0.0], [0.5, 1, 0.0], [0.0, 0.0, 1]])
    runs, stages = {}, {}
    for i, (key, model) in enumerate({"a-s0": "smollm2-135m", "b-s0": "gemma3-270m"}.items()):
        runs[key] = {
            "model": model,
            "train_set": "mnli_real_train",
            "id_testset": "mnli_real",
            "shots": 16,
            "data_seed": 0,
            "seed": 0,
        }
        rdir = root / "runs" / key
        write_json(rdir / "run.json", {"run": key, "model": model})
        (rdir / "checkpoints" / "checkpoint-0").mkdir(parents=True)
        st = irt_study(10, [40, 40, 40], sigma, tau=0.04, n_id_items=80, rng=np.random.default_rng(i))
        steps, ev = list(range(0, 100, 10)), rdir / "eval"
        write_predictions(ev, st, steps, "mnli", OOD)
        write_jsonl(ev / "metrics.jsonl", irt_metrics_rows(st, key, key[0], 0, steps, "mnli", OOD))
        write_json(ev / "summary.json", {"step": 90})

        def out(rel, key=key):
            p = root / "runs" / key / rel
            return {"path": f"runs/{key}/{rel}", "md5": folder_md5(listing(p)) if p.is_dir() else file_md5(p)}

        stages[f"train@{key}"] = {"cmd": f"oodcorr train --run {key}", "outs": [out("run.json")]}
        stages[f"evaluate@{key}"] = {
            "cmd": f"oodcorr evaluate --run {key}",
            "outs": [out(r) for r in ("eval/metrics.jsonl", "eval/predictions", "eval/summary.json")],
        }
    params = {
        "study": {"name": "demo", "tracking": "none"},
        "runs": runs,
        "analyze": {"out": "results", "methods": ["linear"], "bootstrap": 20, "seed": 0},
    }
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (root / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": stages}, sort_keys=False))


def _run(args, cwd):
    res = subprocess.run([str(a) for a in args], cwd=cwd, env=env(), capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"saved-study base: {' '.join(map(str, args))} failed:\n{res.stderr[-2000:]}")


def saved_base() -> Path:
    """A fresh clone of a repository with study `demo` saved (pushed into .dvc/studies-remote) and committed,
    with the source project at ran/ (built once)."""
    with _LOCK:
        if not _SAVED:
            tmp = Path(tempfile.mkdtemp(prefix="oodcorr-bad-inputs-saved-"))
            atexit.register(shutil.rmtree, tmp, True)
            _source(tmp / "ran")
            repo = tmp / "repo"
            repo.mkdir()
            for args in (["git", "init", "-q"], ["dvc", "init", "-q"], ["git", "commit", "-qm", "init"]):
                _run(args, repo)
            res = oodcorr(["study", "save", "demo", "--from", tmp / "ran"], repo)
            if res.returncode != 0:
                raise RuntimeError(f"saved-study base: study save failed:\n{res.stderr[-2000:]}")
            _run(["git", "add", "-A"], repo)
            _run(["git", "commit", "-qm", "study demo"], repo)
            _run(["git", "clone", "-q", str(repo), str(tmp / "clone")], tmp)
            shutil.copytree(tmp / "ran", tmp / "clone" / "ran")
            _SAVED.append(tmp / "clone")
        return _SAVED[0]


def saved(*changes):
    """mutate: the case's project becomes a copy of saved_base(), then each change(root) applies."""

    def mutate(root: Path) -> None:
        shutil.rmtree(root)
        shutil.copytree(saved_base(), root, symlinks=True)
        for change in changes:
            change(root)

    return mutate


def _listing(root: Path, key: str) -> dict[str, str]:
    md5 = yaml.safe_load((root / "studies/demo/runs" / f"{key}.dvc").read_text())["outs"][0]["md5"]
    return {e["relpath"]: e["md5"] for e in json.loads(_object(root, md5).read_text())}


def _object(root: Path, md5: str) -> Path:
    return root / ".dvc" / "studies-remote" / "files" / "md5" / md5[:2] / md5[2:]


def _shift(path: Path) -> None:
    """Every logp_entailment moved by 0.5: a valid predictions file with other numbers."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    lp = pa.array(np.asarray(t.column("logp_entailment").to_numpy(), dtype="float32") + np.float32(0.5))
    t = t.set_column(t.column_names.index("logp_entailment"), "logp_entailment", lp)
    path.chmod(0o644)
    pq.write_table(t, path)


def _edit_text(path: Path) -> None:
    path.chmod(0o644)
    path.write_text(path.read_text().replace("0", "1", 1))


def tamper_object(key: str, rel: str):
    """The remote's object for a run's file altered in place (still valid: a parquet file with other numbers)."""
    return lambda root: (_shift if rel.endswith(".parquet") else _edit_text)(_object(root, _listing(root, key)[rel]))


def lose_object(key: str, rel: str | None = None):
    """One object of a run gone from the remote (all of them, with rel None: a push that never happened)."""

    def change(root):
        for r, md5 in _listing(root, key).items():
            if rel in (None, r):
                _object(root, md5).unlink()

    return change


def unpushed(key: str):
    """A save killed as `dvc push` started (and before the .dvc file named its remote), then committed."""

    def change(root):
        lose_object(key)(root)
        f = root / "studies/demo/runs" / f"{key}.dvc"
        doc = yaml.safe_load(f.read_text())
        doc["outs"][0].pop("remote", None)
        f.write_text(yaml.safe_dump(doc, sort_keys=False))

    return change


def pointer_to(key: str, other: str):
    def change(root):
        runs = root / "studies/demo/runs"
        (runs / f"{key}.dvc").write_text((runs / f"{other}.dvc").read_text().replace(f"path: {other}", f"path: {key}"))

    return change


def results_link(root):
    results = root / "studies/demo/results"
    shutil.move(results, root / "elsewhere")
    results.symlink_to(root / "elsewhere")


def no_remote(root):
    cfg = root / "studies" / ".dvc" / "config"  # the studies subrepo's, which holds the in-git remote
    cfg.write_text(cfg.read_text().replace('[\'remote "studies"\']\n    url = ../../.dvc/studies-remote\n', ""))


def ran_file(rel: str, how):
    return lambda root: how(root / "ran" / "runs" / rel)


def secret_link(path: Path) -> None:
    secret = path.parents[7] / "secret.parquet"  # outside the project
    secret.write_text(f"password={SECRET}\n")
    path.unlink()
    path.symlink_to(secret)


def summary_edit(path: Path) -> None:
    path.write_text('{"step": 80}')


def dir_link(path: Path) -> None:
    target = path.parents[5] / "elsewhere"  # outside the project
    shutil.move(path, target)
    path.symlink_to(target)


# ------------------------------------------------------------------------------------------------ predictions

PRED = "runs/a/eval/predictions/step-4/synth_overlap.parquet"
NOISE = edit_params(lambda p: p["analyze"].update(noise=True))


def predictions(fn):
    """analyze.noise on, and `fn(table) -> table` applied to one of the base run's prediction files."""

    def mutate(root):
        import pyarrow.parquet as pq

        NOISE(root)
        pq.write_table(fn(pq.read_table(root / PRED)), root / PRED)

    return mutate


def _dup(t):
    import pyarrow as pa

    return pa.concat_tables([t, t.slice(0, 1)])


def _nan(t):
    import pyarrow as pa

    lp = t.column("logp_entailment").to_numpy().astype("float64")
    lp[1] = np.nan
    return t.set_column(t.column_names.index("logp_entailment"), "logp_entailment", pa.array(lp))


def _text(t):
    import pyarrow as pa

    return t.set_column(
        t.column_names.index("logp_non_entailment"),
        "logp_non_entailment",
        t.column("logp_non_entailment").cast(pa.string()),
    )


def _step_abc(root):
    NOISE(root)
    shutil.copytree(root / "runs/a/eval/predictions/step-4", root / "runs/a/eval/predictions/step-abc")


def _analyze_results_link(root):
    shutil.move(root / "results", root / "elsewhere")
    os.symlink(root / "elsewhere", root / "results")


def recorded(rel: str, fn):
    """ran/runs/<rel> (a predictions file) rewritten by `fn(table) -> table` and recorded in ran/dvc.lock, as a
    buggy scorer's stage would leave it: only the analysis' reader can refuse it."""

    def change(root: Path) -> None:
        import pyarrow.parquet as pq

        from oodcorr.launch.verify import file_md5, folder_md5, listing

        path = root / "ran" / "runs" / rel
        pq.write_table(fn(pq.read_table(path)), path)
        lock = yaml.safe_load((root / "ran" / "dvc.lock").read_text())
        for o in lock["stages"][f"evaluate@{rel.split('/')[0]}"]["outs"]:
            out = root / "ran" / o["path"]
            o["md5"] = folder_md5(listing(out)) if out.is_dir() else file_md5(out)
        (root / "ran" / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=False))

    return change


def dvc_config(text: str):
    def change(root: Path) -> None:
        with (root / ".dvc" / "config").open("a") as f:
            f.write(text)

    return change


def conflict(root: Path) -> None:
    table = sorted((root / "studies" / "demo" / "results").glob("*.csv"))[0]
    table.write_text(f"<<<<<<< HEAD\n{table.read_text()}=======\nother\n>>>>>>> theirs\n")


REANALYZE, CHECK, VERIFY = (
    ["study", "reanalyze", "demo"],
    ["study", "reanalyze", "demo", "--check"],
    ["study", "verify", "demo"],
)
SAVE = ["study", "save", "other", "--from", "ran"]
H10 = "eval/predictions/step-10/hans.parquet"


def cases() -> list[Case]:
    return sharing_cases() + [
        Case(
            "saved:save-changed-prediction",
            SAVE,
            saved(ran_file("a-s0/eval/predictions/step-0/hans.parquet", _shift)),
            must=r"run a-s0: eval/predictions.* is not what .*dvc\.lock recorded",
            allowed=DVC_OWN,
            item="study save pushes predictions that no longer match dvc.lock",
        ),
        Case(
            "saved:save-changed-summary",
            SAVE,
            saved(ran_file("a-s0/eval/summary.json", summary_edit)),
            must=r"run a-s0: eval/summary\.json is not what",
            allowed=DVC_OWN,
        ),
        Case(
            "saved:save-symlinked-secret",
            SAVE,
            saved(ran_file("b-s0/eval/predictions/step-0/anli.parquet", secret_link)),
            must=r"run b-s0: .*anli\.parquet is a symbolic link",
            allowed=DVC_OWN,
            item="study save copies a symlinked file from outside the project into the remote",
        ),
        Case(
            "saved:save-symlinked-folder",
            SAVE,
            saved(ran_file("a-s0/eval/predictions", dir_link)),
            must=r"run a-s0: .*predictions is a symbolic link",
            allowed=DVC_OWN,
        ),
        Case(
            "saved:save-fifo",
            SAVE,
            saved(ran_file("a-s0/eval", lambda p: os.mkfifo(p / "pipe"))),
            must=r"run a-s0: .*pipe is not a regular file",
            allowed=DVC_OWN,
        ),
        Case(
            "saved:reanalyze-tampered-object",
            CHECK,
            saved(tamper_object("a-s0", H10)),
            must=r"run a-s0: eval/predictions/step-10/hans\.parquet: .* altered",
            allowed=DVC_OWN,
            fast=True,
            item="a tampered object in the remote is pulled and analysed",
        ),
        Case(
            "saved:reanalyze-tampered-object-rewrite",
            REANALYZE,
            saved(tamper_object("a-s0", H10)),
            must=r"run a-s0: eval/predictions/step-10/hans\.parquet: .* altered",
            allowed=DVC_OWN,
        ),
        Case(
            "saved:reanalyze-tampered-listing",
            CHECK,
            saved(
                lambda r: _object(
                    r, yaml.safe_load((r / "studies/demo/runs/b-s0.dvc").read_text())["outs"][0]["md5"]
                ).write_text("[]")
            ),
            must=r"run b-s0: its folder listing .* does not match its name",
            allowed=DVC_OWN,
        ),
        Case(
            "saved:reanalyze-wrong-pointer",
            CHECK,
            saved(pointer_to("a-s0", "b-s0")),
            must=r"run a-s0: eval/metrics\.jsonl is not what studies/demo/dvc\.lock recorded",
            allowed=DVC_OWN,
            item="a .dvc pointing at another run's object",
        ),
        Case(
            "saved:reanalyze-missing-object",
            CHECK,
            saved(lose_object("b-s0", "eval/metrics.jsonl")),
            must=r"run b-s0: eval/metrics\.jsonl .*not in the studies remote.*"
            r"dvc --cd studies push -r studies demo/runs/b-s0\.dvc",
            allowed=DVC_OWN,
            item="`dvc pull` failed: no output",
        ),
        Case(
            "saved:reanalyze-interrupted-push",
            CHECK,
            saved(unpushed("b-s0")),
            must=r"run b-s0: .*not in the studies remote.*dvc --cd studies push",
            allowed=DVC_OWN,
            item="a save killed as dvc push started: No remote provided",
        ),
        Case(
            "saved:verify-interrupted-push",
            VERIFY,
            saved(unpushed("a-s0")),
            must=r"study demo is INCOMPLETE .*run a-s0",
            allowed=DVC_OWN,
        ),
        Case(
            "saved:verify-tampered-object",
            VERIFY,
            saved(tamper_object("b-s0", "eval/metrics.jsonl")),
            must=r"INCOMPLETE or altered: run b-s0: eval/metrics\.jsonl: .*altered",
            allowed=DVC_OWN,
        ),
        Case(
            "saved:verify-complete",
            VERIFY,
            saved(),
            expect="ok",
            allowed=DVC_OWN,
            check=lambda r, res: None if "demo: complete: 2 run(s)" in res.stdout else res.stdout[-200:],
        ),
        Case(
            "saved:reanalyze-results-symlink",
            REANALYZE,
            saved(results_link),
            must=r"results is a symbolic link",
            allowed=DVC_OWN,
            item="results/ a symlink: traceback",
        ),
        Case(
            "saved:reanalyze-no-remote",
            CHECK,
            saved(no_remote),
            must=r"'studies' remote is not configured",
            allowed=DVC_OWN,
        ),
        Case(
            "saved:reanalyze-dvc-file-garbage",
            CHECK,
            saved(lambda r: (r / "studies/demo/runs/a-s0.dvc").write_text("outs: 3\n")),
            must=r"run a-s0: studies/demo/runs/a-s0\.dvc should hold one output",
            allowed=DVC_OWN,
        ),
        Case(
            "saved:reanalyze-no-pull-not-pulled",
            CHECK + ["--no-pull"],
            saved(),
            must=r"run a-s0: not pulled",
            allowed=DVC_OWN,
        ),
        Case(
            "predictions:duplicated-rows",
            A,
            predictions(_dup),
            must=r"synth_overlap\.parquet: id .* more than once",
            item="duplicated prediction rows accepted",
            fast=True,
        ),
        Case(
            "predictions:nan-logp",
            A,
            predictions(_nan),
            must=r"synth_overlap\.parquet: column logp_entailment has 1 value\(s\) that are not finite",
            item="NaN log-probs: LinAlgError",
        ),
        Case(
            "predictions:string-logp",
            A,
            predictions(_text),
            must=r"synth_overlap\.parquet: column logp_non_entailment holds string, not numbers",
            item="log-probs as strings: ValueError without the file",
        ),
        Case(
            "predictions:step-abc",
            A,
            _step_abc,
            must=r"predictions/step-abc: not a step-<N> folder",
            item="a step-abc folder silently ignored",
        ),
        Case(
            "predictions:analyze-results-symlink",
            ["analyze", "--no-plots"],
            _analyze_results_link,
            must=r"--out .*results: is a symbolic link",
            item="results/ a symlink: traceback",
        ),
    ]


def sharing_cases() -> list[Case]:
    """A study shared through a remote (docs/studies.md, "Share a study through a remote")."""
    b10 = f"b-s0/{H10}"
    return [
        Case(
            "saved:save-nan-logp-recorded",
            SAVE,
            saved(recorded(b10, _nan)),
            must=r"run 'b-s0': .*step-10/hans\.parquet: column logp_entailment has 1 value\(s\) that are not finite",
            allowed=DVC_OWN,
            item="study save pushes NaN log-probs that dvc.lock recorded; only the collaborator's reanalysis fails",
        ),
        Case(
            "saved:save-duplicated-rows-recorded",
            SAVE,
            saved(recorded(b10, _dup)),
            must=r"run 'b-s0': .*step-10/hans\.parquet: id .* more than once",
            allowed=DVC_OWN,
        ),
        Case(
            "saved:save-string-logp-recorded",
            SAVE,
            saved(recorded(b10, _text)),
            must=r"run 'b-s0': .*step-10/hans\.parquet: column logp_non_entailment holds string, not numbers",
            allowed=DVC_OWN,
        ),
        Case(
            "saved:save-secret-in-dvc-config",
            SAVE,
            saved(
                dvc_config("['remote \"leaky\"']\n    url = s3://b/x\n    secret_access_key = wJalrXUtnFEMI-example\n")
            ),
            must=r"remote 'leaky' holds a credential \(secret_access_key\).*dvc remote modify --local leaky",
            allowed=DVC_OWN,
            item="a secret_access_key in .dvc/config is committed by the printed git add line",
        ),
        Case(
            "saved:save-remote-outside-project",
            [*SAVE, "--remote", "drop"],
            saved(dvc_config("['remote \"drop\"']\n    url = ../../drop\n")),
            must=r"the drop remote is the folder .*drop, outside this project: nothing was written.*--allow-outside",
            allowed=DVC_OWN,
            item="a committed remote url outside the project gets 90 files written there without a word",
        ),
        Case(
            "saved:verify-missing-plugin",
            [*VERIFY, "--remote", "far"],
            saved(dvc_config("['remote \"far\"']\n    url = hdfs://127.0.0.1:1/x\n")),
            must=r"the far remote hdfs://127\.0\.0\.1:1/x needs a DVC plugin: pip install dvc-hdfs",
            allowed=DVC_OWN,
        ),
        Case(
            "saved:save-conflict-markers",
            ["study", "save", "demo", "--from", "ran"],
            saved(conflict),
            must=r"results/.*: git merge conflict markers.*oodcorr study reanalyze demo",
            allowed=DVC_OWN,
            item="two collaborators' saves: a merged study with conflict markers cannot be rebuilt",
        ),
    ]
