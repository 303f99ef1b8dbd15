"""The analysis' inputs: which metrics.jsonl files, read into one table, and per run the ID series and the
OOD trajectories (build_runs); the training runs' MLflow ids the analysis run links to."""

from __future__ import annotations

import json
from pathlib import Path

from oodcorr.core.errors import UserError, closest
from oodcorr.records.rundir import RUN_JSON, metrics_file, run_dir, runs_root, tracking_dir
from oodcorr.settings.project import Project
from oodcorr.stats.metrics import METRICS

REQUIRED = ("run", "model", "train_set", "shots", "seed", "step", "testset", "accuracy")
META = ("model", "train_set", "shots", "seed", "id_testset")


def metrics_files(params: dict | None, project: Project) -> list[str]:
    """Default inputs: the metrics.jsonl of every run in params (stale run folders from older params are not
    analysed), else every runs/*/eval/metrics.jsonl under `root`."""
    if params and params.get("runs"):
        return [str(metrics_file(run_dir(project, key))) for key in params["runs"]]
    if params is not None and ("runs" in params or not any(not k.startswith("_") for k in params)):
        # an empty params file or `runs: {}`: never every runs/* folder (another study's runs would be mixed in)
        raise UserError(
            f"{params.get('_path', 'params.yaml')}: no runs; the analysis reads the study's runs (add "
            "them, or `oodcorr study use <preset>`), or pass --metrics FILE..."
        )
    # an analysis-only folder (a params.yaml without a `runs` section, or none): every runs/*/eval/metrics.jsonl
    where = runs_root(project)
    return sorted(str(p) for p in where.glob("*/" + str(metrics_file(Path()))))


NAMES = ("run", "model", "train_set", "testset")  # text fields (id_testset and slice: text or null)
COUNTS = ("shots", "seed", "step")  # integers >= 0
METRIC_NAMES = frozenset(METRICS)
NUMBER = (int, float)  # type(v) in NUMBER: a JSON number (a bool is neither)


def row_problem(obj: dict) -> str | None:
    """What is wrong with one metrics row's fields (types and ranges), in words; None when nothing is. Checked
    here, once, so a hand-written or damaged row is one line naming file:line, never a wrong order of steps
    (steps as text sort '10' before '2') or a traceback deep in the analysis."""
    for k in NAMES:
        if type(obj[k]) is not str or not obj[k].strip():
            return f"{k} must be a non-empty text, got {obj[k]!r}"
    for k in ("id_testset", "slice"):
        if obj.get(k) is not None and type(obj[k]) is not str:
            return f"{k} must be a text or null, got {obj[k]!r}"
    for k in COUNTS:
        if type(obj[k]) is not int or obj[k] < 0:
            return f"{k} must be an integer >= 0, got {obj[k]!r}"
    acc = obj["accuracy"]
    if type(acc) not in NUMBER or not (acc != acc or 0 <= acc <= 1):  # acc != acc: NaN
        return f"accuracy must be a number in [0, 1] (NaN: nothing scored), got {acc!r}"
    for m in METRIC_NAMES & obj.keys():
        if obj[m] is not None and type(obj[m]) not in NUMBER:
            return f"{m} must be a number, got {obj[m]!r}"
    return None


def load_metrics(files, slices: bool = False):
    """Read metrics.jsonl files into one DataFrame; bad lines raise UserError naming file:line.

    Slice rows (slice != null) are dropped unless `slices`, in which case each slice becomes its own
    pseudo-testset named "<testset>[<slice>]" (an extra OOD series in the same analysis)."""
    import pandas as pd

    from oodcorr.core.io import iter_json_objects

    rows, empty = [], []
    for path in map(Path, files):
        if not path.exists():
            raise UserError(f"metrics file not found: {path}")
        before = len(rows)
        for lineno, obj in iter_json_objects(path):
            missing = [k for k in REQUIRED if k not in obj]
            if missing:
                raise UserError(f"{path}:{lineno}: missing field(s) {', '.join(missing)}")
            problem = row_problem(obj)
            if problem:
                raise UserError(f"{path}:{lineno}: {problem}")
            obj["_source"] = str(path)
            absent = METRIC_NAMES - obj.keys()  # a field not written (vs NaN: undefined)
            obj["_absent"] = ",".join(sorted(absent)) if absent else ""
            rows.append(obj)
        if len(rows) == before:
            empty.append(path)
    if rows and empty:  # one run's file empty: the study is never analysed without that run
        raise UserError(
            f"{empty[0]}: no metrics rows (an evaluation that wrote nothing); run `oodcorr evaluate` for that run again"
        )
    if not rows:
        raise UserError(
            "no metrics rows found"
            + (f" in {', '.join(map(str, files))}" if files else " (no metrics files; run `oodcorr evaluate` first)")
        )
    df = pd.DataFrame(rows)
    for col in ("slice", "id_testset"):
        if col not in df:
            df[col] = None
    df["slice"] = df["slice"].where(df["slice"].notna(), None)
    if slices:
        is_slice = df["slice"].notna()
        df.loc[is_slice, "testset"] = df.loc[is_slice, "testset"] + "[" + df.loc[is_slice, "slice"].astype(str) + "]"
    else:
        df = df[df["slice"].isna()]
    # a re-evaluated checkpoint appends again: the last line wins
    return df.drop_duplicates(["run", "step", "testset"], keep="last").reset_index(drop=True)


def _id_testset(run: str, g) -> str:
    declared = {v for v in g["id_testset"].dropna().unique()}
    testsets = set(g["testset"])
    if len(declared) > 1:
        raise UserError(f"run {run!r}: conflicting id_testset values {sorted(declared)}")
    if declared:
        name = declared.pop()
    else:
        train_set = str(g["train_set"].iloc[0])
        name = train_set[: -len("_train")] if train_set.endswith("_train") else train_set
        if name not in testsets:
            raise UserError(
                f"run {run!r}: no id_testset field and no testset named {name!r} "
                f"(from train_set {train_set!r}); testsets: {', '.join(sorted(testsets))}"
            )
    if name not in testsets:
        raise UserError(f"run {run!r}: id_testset {name!r} was not evaluated{closest(name, testsets)}")
    return name


def build_runs(df) -> dict:
    """{run: {"meta": {...}, "steps": array, "x": ID accuracy, "Y": DataFrame step x OOD testset,
    "n_id": items per ID accuracy (metrics' `n`, None when the files lack it)}}."""
    runs = {}
    for run, g in df.groupby("run", sort=True):
        id_name = _id_testset(run, g)
        meta = {"run": run, "id_testset": id_name}
        for col in META[:-1]:
            values = g[col].dropna().unique()
            if len(values) != 1:
                raise UserError(f"run {run!r}: expected one {col}, found {list(values)}")
            meta[col] = values[0].item() if hasattr(values[0], "item") else values[0]
        wide = g.pivot(index="step", columns="testset", values="accuracy").sort_index()
        wide = wide[wide[id_name].notna()]
        ood = sorted(c for c in wide.columns if c != id_name and not c.startswith(id_name + "["))
        ood += sorted(c for c in wide.columns if c.startswith(id_name + "["))
        n_id = g.loc[g["testset"] == id_name, "n"].dropna() if "n" in g else ()  # items behind each ID accuracy
        runs[run] = {
            "meta": meta,
            "steps": wide.index.to_numpy(),
            "x": wide[id_name].to_numpy(float),
            "Y": wide[ood].astype(float),
            "sources": sorted(set(g["_source"])),
            "n_id": float(n_id.median()) if len(n_id) else None,
        }
    return runs


def training_run_ids(runs: dict) -> dict[str, str]:
    """run key -> mlflow_run_id from runs/<run>/run.json next to each metrics file (when present)."""
    ids = {}
    for run, data in runs.items():
        for src in data["sources"]:
            rdir = Path(src).resolve().parent.parent
            rid = None
            for info in (tracking_dir(rdir) / "mlflow.json", rdir / RUN_JSON):  # run.json: older versions
                try:
                    rid = rid or json.loads(info.read_text()).get(
                        "mlflow_run_id" if info.name == "run.json" else "run_id"
                    )
                except (OSError, json.JSONDecodeError):
                    pass
                if rid:
                    ids[run] = rid
    return ids
