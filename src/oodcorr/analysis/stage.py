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
RELIABILITY_COLUMNS = ["run", "model", "seed", "metric", "method", "testset", "n_items", "n", "reliability", "flag"]


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
        runs[run] = {"meta": meta, "steps": wide.index.to_numpy(), "x": wide[id_name].to_numpy(float),
                     "Y": wide[ood].astype(float), "sources": sorted(set(g["_source"])),
                     "n_id": float(n_id.median()) if len(n_id) else None}
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


def noise_enabled(runs: dict, noise, metric: str) -> bool:
    """Whether the noise analysis runs (analyze.noise: auto | true | false); raises for missing predictions.

    auto: on when every run has stored predictions, skipped when none has (older outputs; the report says
    so), an error naming the first run without them when only some have. true: required. A metric other
    than accuracy needs predictions whatever `noise` says."""
    from oodcorr.analysis.noise import METRICS

    if metric not in METRICS:
        raise UserError(f"analyze.metric: unknown metric {metric!r}{closest(metric, METRICS)}; "
                        f"known: {', '.join(METRICS)}")
    if noise in (False, "false", "off") and metric == "accuracy":
        return False
    if noise not in (True, False, "auto", "true", "false", "on", "off"):
        raise UserError(f"analyze.noise: expected auto, true or false, got {noise!r}")
    have = {run: (Path(d["sources"][0]).parent / "predictions").is_dir() for run, d in runs.items()}
    missing = [run for run, ok in have.items() if not ok]
    required = noise in (True, "true", "on") or metric != "accuracy"
    if missing and (required or len(missing) < len(have)):
        run = missing[0]
        why = f"analyze.metric={metric} needs them" if metric != "accuracy" else "the noise analysis needs them"
        raise UserError(f"run {run!r}: no per-example predictions in "
                        f"{Path(runs[run]['sources'][0]).parent / 'predictions'} ({why}); run `oodcorr evaluate "
                        f"--run {run}` to write them, or set analyze.noise: false")
    return not missing


def compute_noise(runs: dict, partials, metric: str = "accuracy", reliability_min: float = 0.5, splits: int = 200,
                  seed: int = 0, items: dict | None = None, bootstrap: int = 1000, alpha: float = 0.05):
    """Reliability table and the noise columns of `partials` (rel_a, rel_b, r_disattenuated, ci2_low,
    ci2_high, distinguishable). `items`: {run: {metric: {testset: (n, I)}}} (loaded when None). ci2 is the
    row's Fisher CI (ci_low, ci_high) disattenuated like r (noise.disattenuated_ci). ci2boot is the
    two-level bootstrap view (checkpoints and, within each testset, items resampled; linear and rank):
    reported beside ci2, not used for verdicts, since it under-covers under strong attenuation
    (bench/results/noise_simulation.json)."""
    import math

    import numpy as np
    import pandas as pd

    from oodcorr.analysis.noise import (METRICS, NOISE_METHODS, analyse_run_noise, basic_ci, disattenuate,
                                        disattenuated_ci, two_level_boot, two_level_resamples)

    rng = np.random.default_rng(seed + 1)
    methods = [m for m in NOISE_METHODS if m in set(partials["method"])] if len(partials) else []
    rel_rows, extra, boots = [], [], {}
    for run, data in runs.items():
        names = list(data["Y"].columns)
        mats = items[run] if items is not None else None
        if mats is None:
            raise UserError(f"run {run!r}: no item matrices")
        rel_items = {metric: mats[metric], **{m: mats[m] for m in METRICS if m != metric}}
        rr, pr = analyse_run_noise(data["x"], data["Y"].to_numpy(float), names, methods, splits, rng,
                                   {m: {nm: rel_items[m][nm] for nm in names} for m in rel_items})
        for row in rr:
            row.update(run=run, model=data["meta"]["model"], seed=data["meta"]["seed"])
        rel_rows += rr
        for row in pr:
            row["run"] = run
        extra += pr
        id_items = mats[metric].get(data["meta"]["id_testset"])
        Y_items = [mats[metric][nm] for nm in names]
        if id_items is not None and names and np.isfinite(data["x"]).all() and np.isfinite(data["Y"].to_numpy(float)).all():
            res = two_level_resamples(id_items, Y_items, bootstrap, rng)  # shared by the methods (paired)
            for method in ("linear", "rank"):
                if method in methods:
                    boots[(run, method)] = (two_level_boot(id_items, Y_items, method, bootstrap, rng, resamples=res),
                                            names)
    rel = pd.DataFrame(rel_rows)
    if rel.empty:
        rel = pd.DataFrame(columns=RELIABILITY_COLUMNS)
    rel = rel[RELIABILITY_COLUMNS]
    out = partials.copy()
    for col in ("rel_a", "rel_b", "r_disattenuated", "ci2_low", "ci2_high", "ci2boot_low", "ci2boot_high"):
        out[col] = math.nan
    out["distinguishable"] = False
    lookup = {(e["run"], e["method"], e["testset_a"], e["testset_b"]): e for e in extra}
    flags = out["flag"].fillna("").astype(str).tolist()
    for i, row in enumerate(out.itertuples(index=False)):
        e = lookup.get((row.run, row.method, row.testset_a, row.testset_b))
        if e is None:
            continue
        ra, rb = e["rel_a"], e["rel_b"]
        d = float(disattenuate(row.r, ra, rb, reliability_min))
        lo, hi = (float(v) for v in disattenuated_ci(row.ci_low, row.ci_high, ra, rb, reliability_min))
        new = [f"unreliable:{t}" for t, v in ((row.testset_a, ra), (row.testset_b, rb))
               if not (np.isfinite(v) and v >= reliability_min)]
        flags[i] = ";".join(filter(None, [flags[i], *new]))
        out.iloc[i, out.columns.get_indexer(["rel_a", "rel_b", "r_disattenuated", "ci2_low", "ci2_high"])] = \
            [ra, rb, d, lo, hi]
        if (row.run, row.method) in boots:
            B, nm = boots[(row.run, row.method)]
            out.iloc[i, out.columns.get_indexer(["ci2boot_low", "ci2boot_high"])] = list(basic_ci(
                row.r, B[:, nm.index(row.testset_a), nm.index(row.testset_b)], alpha, n=int(row.n), k=float(row.k)))
        out.iat[i, out.columns.get_loc("distinguishable")] = bool(
            np.isfinite(lo) and (lo > 0 or hi < 0) and not new)
    out["flag"] = flags
    return out, rel


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


OUTPUT_NAMES = {"partial_correlations.csv", "pooled_seeds.csv", "consistency.csv", "reliability.csv", "plots",
                "figures", "summary.json", "metrics.json", "report.html", ".gitignore"}
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
                 training_run_ids: list[str] | None = None, noise="auto", metric: str = "accuracy",
                 reliability_min: float = 0.5, reliability_splits: int = 200) -> dict:
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
    if not 0 <= reliability_min <= 1:
        raise UserError(f"analyze.reliability_min: must be in [0, 1], got {reliability_min}")
    if reliability_splits < 1:
        raise UserError(f"analyze.reliability_splits: must be >= 1, got {reliability_splits}")
    use_noise = noise_enabled(runs, noise, metric)
    items = {}
    if use_noise:
        from oodcorr.analysis.noise import METRICS, load_run_items

        for run, d in runs.items():
            names = [d["meta"]["id_testset"], *d["Y"].columns]
            items[run] = load_run_items(run, Path(d["sources"][0]).parent, d["steps"], names, METRICS)
            if metric != "accuracy":  # analyse the chosen metric's trajectories instead of accuracy
                mats = items[run][metric]
                d["x"] = mats[names[0]].mean(axis=1)
                d["Y"] = pd.DataFrame({n: mats[n].mean(axis=1) for n in names[1:]}, index=d["Y"].index)
    all_methods = methods + (["raw"] if "raw" not in methods else [])
    partials = compute_partials(runs, all_methods, bootstrap, alpha, seed)
    reliability = None
    if use_noise:
        partials, reliability = compute_noise(runs, partials, metric, reliability_min, reliability_splits, seed,
                                              items, bootstrap or 1000, alpha)
    pooled = pool_seeds(partials, alpha)
    consistency = cross_model(pooled, alpha, reliability_min)
    summary = summarise(partials, consistency, all_methods, alpha)
    summary.update(alpha=alpha, bootstrap=bootstrap, methods_requested=methods,
                   models=sorted(partials["model"].unique().tolist()) if len(partials) else [])
    summary["noise"] = _noise_summary(use_noise, metric, partials, reliability, reliability_min)
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
        if reliability is None:  # no predictions / noise off: the same columns, no rows (a declared DVC out)
            reliability = pd.DataFrame(columns=RELIABILITY_COLUMNS)
        reliability.to_csv(tmp / "reliability.csv", index=False)
        (tmp / "plots").mkdir()
        curves.to_csv(tmp / "plots" / "accuracy_vs_step.csv", index=False)
        figures = {}
        if plots:
            from oodcorr.analysis.plots import make_figures

            (tmp / "figures").mkdir()
            figures = make_figures(tmp / "figures", runs, pooled, all_methods, pair, alpha)
            if reliability is not None and len(reliability):
                from oodcorr.analysis.plots import reliability_heatmaps

                figures.update(reliability_heatmaps(tmp / "figures", reliability, reliability_min, metric))
        summary["figures"] = sorted(figures)
        (tmp / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
        from oodcorr.analysis.headline import headline

        io_json = json.dumps(headline(summary, curves, methods[0]), indent=2)
        (tmp / "metrics.json").write_text(io_json + "\n")  # the DVC metric: a few headline numbers
        from oodcorr.analysis.report import write_report

        write_report(tmp / "report.html", summary, runs, partials, pooled, consistency, figures, alpha,
                     reliability=reliability)
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


def _noise_summary(use_noise: bool, metric: str, partials, reliability, reliability_min: float) -> dict:
    """summary.json "noise" block: plain numbers a reader (and MLflow) can compare between analyses."""
    import numpy as np

    if not use_noise:
        return {"enabled": False, "metric": metric,
                "note": "no per-example predictions: reliability and noise-corrected CIs skipped"}
    out = {"enabled": True, "metric": metric, "reliability_min": reliability_min,
           "ci2": "fisher_ci / sqrt(rel_a * rel_b)", "methods": {}}
    for m, g in partials.groupby("method"):
        if m == "raw" or g["ci2_low"].isna().all() and g["rel_a"].isna().all():
            continue
        rel = reliability[(reliability["method"] == m) & (reliability["metric"] == metric)]["reliability"]
        fin = g[np.isfinite(g["r"])]
        out["methods"][m] = {
            "median_reliability": float(rel.median()) if rel.notna().any() else None,
            "share_reliable": float((rel >= reliability_min).mean()) if len(rel) else None,
            "share_distinguishable": float(fin["distinguishable"].mean()) if len(fin) else None,
            "mean_abs_r": float(fin["r"].abs().mean()) if len(fin) else None,
            "mean_abs_r_disattenuated": float(fin["r_disattenuated"].abs().mean())
            if fin["r_disattenuated"].notna().any() else None,
        }
    by_metric = reliability[reliability["method"] == "linear"].groupby("metric")["reliability"].median()
    out["median_reliability_linear_by_metric"] = {k: (float(v) if np.isfinite(v) else None)
                                                 for k, v in by_metric.items()}
    return out


def _inputs_key(metrics_files, summary: dict) -> str:
    """Hash of what the analysis read and how: rerunning it on the same inputs replaces its MLflow run."""
    import hashlib

    h = hashlib.sha256()
    for f in sorted(str(f) for f in metrics_files):
        h.update(Path(f).read_bytes())
    h.update(json.dumps({k: summary.get(k) for k in ("alpha", "bootstrap", "methods_requested", "noise")},
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
        client.set_tag(rid, "mlflow.note.content", report_note(rid))
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


def report_note(run_id: str) -> str:
    """The analysis run's description (markdown, shown on its Overview tab): a link to its report."""
    return (f"**[Open the report (report.html)](get-artifact?path=report.html&run_uuid={run_id})** — partial "
            "correlations, cross-model verdicts and figures; tables and figures are under Artifacts.")


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
@click.option("--metric", default=None, type=click.Choice(["accuracy", "mean_margin", "mean_logp_gold"]),
              help="Per-checkpoint metric to correlate (default: params analyze.metric, else accuracy).")
def analyze_cmd(metrics, params_file, out, bootstrap, methods, alpha, slices, use_mlflow, no_plots, metric):
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
    from oodcorr import tracking

    use_mlflow = use_mlflow if use_mlflow is not None else cfg.get("mlflow", True) and tracking.enabled(params)
    tracking_uri, experiment = _tracking(params, root) if use_mlflow else (None, None)

    summary = run_analysis(
        files, out_dir,
        methods=tuple(methods) or tuple(cfg.get("methods") or ("linear", "rank", "gam")),
        bootstrap=bootstrap if bootstrap is not None else int(cfg.get("bootstrap", 0)),
        alpha=alpha if alpha is not None else float(cfg.get("alpha", 0.05)),
        slices=slices if slices is not None else bool(cfg.get("slices", False)),
        seed=int(cfg.get("seed", 0)), scatter_pair=cfg.get("scatter_pair"), plots=not no_plots,
        mlflow=use_mlflow, tracking_uri=tracking_uri, experiment=experiment,
        noise=cfg.get("noise", "auto"), metric=metric or cfg.get("metric", "accuracy"),
        reliability_min=float(cfg.get("reliability_min", 0.5)),
        reliability_splits=int(cfg.get("reliability_splits", 200)))
    click.echo(f"analysed {summary['n_runs']} runs, {summary['n_models']} models, {summary['n_pairs']} OOD pairs "
               f"-> {out_dir}")
    for method, s in summary["methods"].items():
        counts = ", ".join(f"{k}={v}" for k, v in s["verdicts"].items() if v)
        click.echo(f"  {method:6s} mean|r|={s['mean_abs_r'] if s['mean_abs_r'] is None else round(s['mean_abs_r'], 3)}"
                   f"  {counts or 'no verdicts'}")
    if summary.get("mlflow_run_id"):
        click.echo(f"  mlflow run {summary['mlflow_run_id']} ({experiment})")
