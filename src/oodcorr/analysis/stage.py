"""Analyze stage entry (dvc.yaml `analyze`, `oodcorr analyze`): metrics.jsonl files -> partial correlations, seed pooling, cross-model verdicts,
figures, report.html, summary.json (a DVC metric) and, optionally, one MLflow run.

Everything is written into a temporary folder that replaces `out_dir` only when the whole analysis
succeeded (oodcorr.io.atomic_dir), so a failed run never leaves a half-updated results folder that
DVC would cache.
"""

from __future__ import annotations

import glob
import json
from pathlib import Path

import click

from oodcorr.errors import UserError, closest

REQUIRED = ("run", "model", "train_set", "shots", "seed", "step", "testset", "accuracy")
META = ("model", "train_set", "shots", "seed", "id_testset")
DEFAULT_METHODS = ("linear", "rank", "gam")


def load_metrics(files, slices: bool = False):
    """Read metrics.jsonl files into one DataFrame; bad lines raise UserError naming file:line.

    Slice rows (slice != null) are dropped unless `slices`, in which case each slice becomes its own
    pseudo-testset named "<testset>[<slice>]" (an extra OOD series in the same analysis)."""
    import pandas as pd

    from oodcorr.io import iter_json_objects

    rows = []
    for path in map(Path, files):
        if not path.exists():
            raise UserError(f"metrics file not found: {path}")
        for lineno, obj in iter_json_objects(path):
            missing = [k for k in REQUIRED if k not in obj]
            if missing:
                raise UserError(f"{path}:{lineno}: missing field(s) {', '.join(missing)}")
            if not isinstance(obj["accuracy"], (int, float)) or isinstance(obj["accuracy"], bool):
                raise UserError(f"{path}:{lineno}: accuracy must be a number, got {obj['accuracy']!r}")
            obj["_source"] = str(path)
            rows.append(obj)
    if not rows:
        raise UserError("no metrics rows found" + (f" in {', '.join(map(str, files))}" if files else
                                                   " (no metrics files; run `oodcorr evaluate` first)"))
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
            raise UserError(f"run {run!r}: no id_testset field and no testset named {name!r} "
                            f"(from train_set {train_set!r}); testsets: {', '.join(sorted(testsets))}")
    if name not in testsets:
        raise UserError(f"run {run!r}: id_testset {name!r} was not evaluated{closest(name, testsets)}")
    return name


def build_runs(df) -> dict:
    """{run: {"meta": {...}, "steps": array, "x": ID accuracy, "Y": DataFrame step x OOD testset}}."""
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
        runs[run] = {"meta": meta, "steps": wide.index.to_numpy(), "x": wide[id_name].to_numpy(float),
                     "Y": wide[ood].astype(float), "sources": sorted(set(g["_source"]))}
    return runs


def compute_partials(runs: dict, methods, bootstrap: int = 0, alpha: float = 0.05, seed: int = 0):
    """Long table: one row per run x method x OOD pair, with Holm/BH over the pairs of a run x method."""
    import numpy as np
    import pandas as pd

    from oodcorr.analysis.partial import METHODS, adjust_pvalues, analyse_run

    for m in methods:
        if m not in METHODS:
            raise UserError(f"analyze.methods: unknown method {m!r}{closest(m, METHODS)}; known: {', '.join(METHODS)}")
    rng = np.random.default_rng(seed)
    frames = []
    for run, data in runs.items():
        names = list(data["Y"].columns)
        for m in methods:
            rows = analyse_run(data["x"], data["Y"].to_numpy(), names, m, alpha, bootstrap, rng)
            if not rows:
                continue
            f = pd.DataFrame(rows)
            f["p_holm"], f["p_bh"] = adjust_pvalues(f["p"].to_numpy())
            for key, value in data["meta"].items():
                f[key] = value
            f["method"] = m
            frames.append(f)
    cols = ["run", "model", "train_set", "shots", "seed", "id_testset", "method", "testset_a", "testset_b",
            "r", "n", "k", "df", "p", "p_holm", "p_bh", "ci_low", "ci_high"]
    if bootstrap:
        cols += ["boot_ci_low", "boot_ci_high"]
    if not frames:
        return pd.DataFrame(columns=cols + ["flag"])
    return pd.concat(frames, ignore_index=True)[cols + ["flag"]]


def _training_run_ids(runs: dict) -> dict[str, str]:
    """run key -> mlflow_run_id from runs/<run>/run.json next to each metrics file (when present)."""
    ids = {}
    for run, data in runs.items():
        for src in data["sources"]:
            rdir = Path(src).resolve().parent.parent
            rid = None
            for info in (rdir / "tracking" / "mlflow.json", rdir / "run.json"):  # run.json: older versions
                try:
                    rid = rid or json.loads(info.read_text()).get("mlflow_run_id" if info.name == "run.json"
                                                                   else "run_id")
                except (OSError, json.JSONDecodeError):
                    pass
                if rid:
                    ids[run] = rid
    return ids


OUTPUT_NAMES = {"partial_correlations.csv", "pooled_seeds.csv", "consistency.csv", "plots", "figures",
                "summary.json", "report.html", ".gitignore"}
OUTPUT_SUFFIXES = {".csv", ".json", ".png", ".svg", ".pdf", ".html", ".txt"}


def check_out_dir(out_dir: Path) -> None:
    """`out_dir` is replaced as a whole, so it must hold nothing this tool did not write: refuse a folder with
    foreign files (one line, nothing touched), a file, or a place that cannot be written."""
    import os

    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out {out_dir}: is a file, not a folder")
    if out_dir.is_dir():
        foreign = []
        for entry in sorted(out_dir.iterdir()):
            if entry.name not in OUTPUT_NAMES or entry.is_symlink():
                foreign.append(entry.name)
            elif entry.is_dir():
                foreign += [str(f.relative_to(out_dir)) for f in sorted(entry.rglob("*"))
                            if f.is_symlink() or (f.is_file() and f.suffix not in OUTPUT_SUFFIXES)]
        if foreign:
            shown = ", ".join(foreign[:3]) + (f" (+{len(foreign) - 3} more)" if len(foreign) > 3 else "")
            raise UserError(f"--out {out_dir}: holds files oodcorr did not write ({shown}); the analysis replaces "
                            "this folder as a whole, so choose an empty or new folder")
    parent = out_dir if out_dir.is_dir() else out_dir.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not os.access(parent, os.W_OK | os.X_OK) or (out_dir.is_dir() and not os.access(out_dir.parent, os.W_OK)):
        raise UserError(f"--out {out_dir}: not writable ({parent} is read-only for this user)")


def run_analysis(metrics_files, out_dir, methods=DEFAULT_METHODS, bootstrap: int = 0, alpha: float = 0.05,
                 slices: bool = False, seed: int = 0, scatter_pair=None, *, plots: bool = True,
                 mlflow: bool = False, tracking_uri: str | None = None, experiment: str | None = None,
                 training_run_ids: list[str] | None = None) -> dict:
    """Run the whole analysis and write every output into `out_dir` (atomically). Returns the summary.

    `methods` may include "raw" (the unpartialled r); it is always computed for the report/summary
    even when not listed, because it shows how much shared ID progress drives each correlation."""
    import pandas as pd

    from oodcorr.analysis.consistency import cross_model, pool_seeds, summarise
    from oodcorr.io import atomic_dir

    check_out_dir(Path(out_dir))  # before any work, and long before the folder is replaced
    methods = list(dict.fromkeys(methods))
    if not methods:
        raise UserError("analyze.methods: empty (choose from raw, linear, rank, gam)")
    if bootstrap < 0:
        raise UserError(f"analyze.bootstrap: must be >= 0, got {bootstrap}")
    if not 0 < alpha < 1:
        raise UserError(f"analyze.alpha: must be in (0, 1), got {alpha}")
    df = load_metrics(list(metrics_files), slices=slices)
    runs = build_runs(df)
    all_methods = methods + (["raw"] if "raw" not in methods else [])
    partials = compute_partials(runs, all_methods, bootstrap, alpha, seed)
    pooled = pool_seeds(partials, alpha)
    consistency = cross_model(pooled, alpha)
    summary = summarise(partials, consistency, all_methods, alpha)
    summary.update(alpha=alpha, bootstrap=bootstrap, methods_requested=methods,
                   models=sorted(partials["model"].unique().tolist()) if len(partials) else [])
    pair = _scatter_pair(runs, partials, scatter_pair, methods[0])
    curves = pd.DataFrame([
        {"run": run, "model": d["meta"]["model"], "seed": d["meta"]["seed"], "step": int(step), "testset": name,
         "role": "id" if name == d["meta"]["id_testset"] else "ood", "accuracy": float(acc)}
        for run, d in runs.items()
        for name, series in [(d["meta"]["id_testset"], pd.Series(d["x"], index=d["steps"])), *d["Y"].items()]
        for step, acc in series.items() if pd.notna(acc)])
    out_dir = Path(out_dir)
    with atomic_dir(out_dir) as tmp:
        partials.to_csv(tmp / "partial_correlations.csv", index=False)
        pooled.to_csv(tmp / "pooled_seeds.csv", index=False)
        consistency.to_csv(tmp / "consistency.csv", index=False)
        (tmp / "plots").mkdir()
        curves.to_csv(tmp / "plots" / "accuracy_vs_step.csv", index=False)
        figures = {}
        if plots:
            from oodcorr.analysis.plots import make_figures

            (tmp / "figures").mkdir()
            figures = make_figures(tmp / "figures", runs, pooled, all_methods, pair, alpha)
        summary["figures"] = sorted(figures)
        (tmp / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
        from oodcorr.analysis.report import write_report

        write_report(tmp / "report.html", summary, runs, partials, pooled, consistency, figures, alpha)
    if mlflow:
        ids = training_run_ids if training_run_ids is not None else sorted(set(_training_run_ids(runs).values()))
        uri = tracking_uri or f"sqlite:///{Path('mlruns').resolve()}/mlflow.db"
        try:  # best effort: the results folder is the truth, MLflow a mirror
            from oodcorr import tracking

            tracking.bound_http_waits()
            tracking.ensure_store(uri)
            summary["mlflow_run_id"] = log_to_mlflow(out_dir, summary, ids, experiment or "oodcorr", uri,
                                                     inputs_key=_inputs_key(metrics_files, summary))
        except UserError:
            raise
        except Exception as e:
            click.echo(f"warning: MLflow at {uri} unreachable ({type(e).__name__}); the analysis is in {out_dir}, "
                       "rerun `oodcorr analyze` to log it", err=True)
    return summary


def _inputs_key(metrics_files, summary: dict) -> str:
    """Hash of what the analysis read and how: rerunning it on the same inputs replaces its MLflow run."""
    import hashlib

    h = hashlib.sha256()
    for f in sorted(str(f) for f in metrics_files):
        h.update(Path(f).read_bytes())
    h.update(json.dumps({k: summary.get(k) for k in ("alpha", "bootstrap", "methods_requested")},
                        sort_keys=True).encode())
    return h.hexdigest()[:16]


def _scatter_pair(runs, partials, requested, method):
    """The pair drawn in the residual scatter grid: as requested, else the strongest mean |partial r|."""
    names = sorted({n for d in runs.values() for n in d["Y"].columns})
    if requested:
        if len(requested) != 2:
            raise UserError(f"analyze.scatter_pair: expected two testset names, got {requested!r}")
        for name in requested:
            if name not in names:
                raise UserError(f"analyze.scatter_pair: unknown OOD testset {name!r}{closest(name, names)}")
        return tuple(requested)
    sub = partials[(partials["method"] == method)].dropna(subset=["r"])
    if sub.empty:
        return tuple(names[:2]) if len(names) >= 2 else None
    best = sub.assign(a=sub["r"].abs()).groupby(["testset_a", "testset_b"])["a"].mean().idxmax()
    return tuple(best)


def log_to_mlflow(out_dir, summary: dict, training_run_ids: list[str], experiment: str, tracking_uri: str,
                  inputs_key: str | None = None) -> str:
    """Log the analysis as ONE MLflow run in `experiment`: summary metrics, every output file as an
    artifact, and tags linking the training runs it analysed. Returns the new run id.

    Uses MlflowClient (not the fluent API) so no global active-run state leaks into the caller."""
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    from oodcorr.analysis.consistency import flatten

    client = MlflowClient(tracking_uri=tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    exp_id = exp.experiment_id if exp else client.create_experiment(experiment)
    tags = {"oodcorr.kind": "analysis", "oodcorr.training_runs": ",".join(training_run_ids),
            "mlflow.runName": "analysis"}
    if inputs_key:  # the same inputs analysed again (e.g. a forced rerun): replace, don't duplicate
        tags["oodcorr.analysis_inputs"] = inputs_key
        for old in client.search_runs([exp_id], f"tags.`oodcorr.analysis_inputs` = '{inputs_key}'"):
            client.delete_run(old.info.run_id)
    tags.update({f"oodcorr.training_run.{i}": rid for i, rid in enumerate(training_run_ids)})
    run = client.create_run(exp_id, run_name="analysis", tags=tags)
    rid = run.info.run_id
    try:
        metrics = [Metric(key.replace("[", "(").replace("]", ")"), value, 0, 0)
                   for key, value in flatten(summary).items()]
        params = [Param("alpha", str(summary.get("alpha"))), Param("bootstrap", str(summary.get("bootstrap"))),
                  Param("methods", ",".join(summary.get("methods_requested", [])))]
        for i in range(0, len(metrics), 500):
            client.log_batch(rid, metrics=metrics[i:i + 500], params=params if i == 0 else [],
                             tags=[RunTag("oodcorr.models", ",".join(summary.get("models", [])))] if i == 0 else [])
        if not metrics:
            client.log_batch(rid, params=params)
        client.log_artifacts(rid, str(out_dir))
        client.set_terminated(rid, "FINISHED")
    except BaseException:
        client.set_terminated(rid, "FAILED")
        raise
    return rid


def _tracking(params: dict | None, root: Path) -> tuple[str, str]:
    """(tracking_uri, experiment) of the study, with the experiment created where training would."""
    from oodcorr import tracking

    params = params or {"_root": str(root)}
    from oodcorr import mirror

    mirror.sync_pending(params)  # records an earlier stage could not mirror (store was down)
    try:
        tracking.setup(params)
    except Exception:  # store down: warned once when the analysis run is logged
        pass
    return tracking.tracking_uri(params), tracking.experiment_name(params)


@click.command("analyze")
@click.option("--metrics", "metrics", multiple=True, type=click.Path(dir_okay=False),
              help="metrics.jsonl file(s); default: runs/<run>/eval/metrics.jsonl of every run in params.yaml "
                   "(else runs/*/eval/metrics.jsonl).")
@click.option("--params", "params_file", type=click.Path(dir_okay=False), default=None,
              help="params.yaml (its `analyze` section); default: the project's params.yaml if present.")
@click.option("--out", "out", type=click.Path(file_okay=False), default=None,
              help="Output folder (default: params analyze.out, else results).")
@click.option("--bootstrap", type=int, default=None, help="Bootstrap resamples over checkpoints (0 = off).")
@click.option("--method", "methods", multiple=True, type=click.Choice(["raw", "linear", "rank", "gam"]),
              help="Correlation method(s) (default: params analyze.methods, else linear rank gam).")
@click.option("--alpha", type=float, default=None, help="Significance level (default 0.05).")
@click.option("--slices/--no-slices", default=None, help="Also analyse testset slices as extra series.")
@click.option("--mlflow/--no-mlflow", "use_mlflow", default=None,
              help="Log the analysis as one MLflow run (default: params analyze.mlflow, else on).")
@click.option("--no-plots", is_flag=True, help="Skip figures (tables, summary and report only).")
def analyze_cmd(metrics, params_file, out, bootstrap, methods, alpha, slices, use_mlflow, no_plots):
    """Partial correlations between OOD testsets across checkpoints (ID accuracy regressed out),
    pooled over seeds and compared across models; writes CSVs, figures, summary.json, report.html."""
    from oodcorr.config import PARAMS_FILE, find_project_root, load_params, project_path

    if params_file:
        params = load_params(params_file)
        root = Path(params["_root"])
    else:
        root = find_project_root()
        params = load_params(root / PARAMS_FILE) if (root / PARAMS_FILE).exists() else None
    cfg = (params or {}).get("analyze") or {}
    runs = (params or {}).get("runs")
    if metrics:
        files = list(metrics)
    elif runs:  # the study's runs only: stale run folders from older params are not analysed
        files = [str(root / "runs" / key / "eval" / "metrics.jsonl") for key in runs]
    else:
        files = sorted(glob.glob(str(root / "runs" / "*" / "eval" / "metrics.jsonl")))
    out_dir = Path(out) if out else (project_path(params, cfg["out"]) if params and cfg.get("out") else root / "results")
    tracking_uri, experiment = _tracking(params, root)
    use_mlflow = use_mlflow if use_mlflow is not None else cfg.get("mlflow", True)

    summary = run_analysis(
        files, out_dir,
        methods=tuple(methods) or tuple(cfg.get("methods") or ("linear", "rank", "gam")),
        bootstrap=bootstrap if bootstrap is not None else int(cfg.get("bootstrap", 0)),
        alpha=alpha if alpha is not None else float(cfg.get("alpha", 0.05)),
        slices=slices if slices is not None else bool(cfg.get("slices", False)),
        seed=int(cfg.get("seed", 0)), scatter_pair=cfg.get("scatter_pair"), plots=not no_plots,
        mlflow=use_mlflow, tracking_uri=tracking_uri, experiment=experiment)
    click.echo(f"analysed {summary['n_runs']} runs, {summary['n_models']} models, {summary['n_pairs']} OOD pairs "
               f"-> {out_dir}")
    for method, s in summary["methods"].items():
        counts = ", ".join(f"{k}={v}" for k, v in s["verdicts"].items() if v)
        click.echo(f"  {method:6s} mean|r|={s['mean_abs_r'] if s['mean_abs_r'] is None else round(s['mean_abs_r'], 3)}"
                   f"  {counts or 'no verdicts'}")
    if summary.get("mlflow_run_id"):
        click.echo(f"  mlflow run {summary['mlflow_run_id']} ({experiment})")
