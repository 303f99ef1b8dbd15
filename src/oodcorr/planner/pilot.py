"""What `oodcorr plan --budget` measures before it searches: a pilot's testsets under the interval's own model,
refused (one line naming the run) below PILOT_MIN_CHECKPOINTS checkpoints or with an ID series that does not move.

Pilot (gp_interval on every pair of OOD testsets, the seeds of a model pooled): per testset the signal variance
of its residual trajectory (the fitted sa2 / sb2, median over its pairs and models) and the per-item noise
variance (residual_noise, the item noise per checkpoint left in the residual space, times its item count: a
checkpoint's noise variance at I items is that over I); the length-scale (median over pairs); the slope of the OOD
series on ID (median |beta|), which carries the ID testset's item noise into both residuals; the ID testset's
per-item variance in the same residual space.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from pathlib import Path

import numpy as np

from oodcorr.core.errors import UserError

PILOT_MIN_CHECKPOINTS = 10  # fewer cannot separate a residual trajectory's signal, noise and length-scale
PILOT_FEW_ITEMS = 64  # fewer items per testset: the item-noise estimate is rough; the plan says so
METRICS = Path("eval") / "metrics.jsonl"


def pilot_files(paths) -> list[str]:
    """metrics.jsonl files from a mix of metrics files, run folders (runs/<run>) and project folders; a project
    whose runs DVC tracks but this clone has not pulled (a saved study) is refused with the pull to run."""
    files = []
    for p in map(Path, paths):
        unpulled = [d for d in sorted((p / "runs").glob("*.dvc")) if not (d.with_suffix("") / METRICS).is_file()]
        if p.is_file():
            files.append(p)
        elif (p / METRICS).is_file():
            files.append(p / METRICS)
        elif unpulled:
            raise UserError(
                f"plan --pilot: {p}: {len(unpulled)} of its runs are tracked by DVC but not pulled here; run "
                f"`{_pull_line(p, unpulled[0])}`, then plan again"
            )
        elif (p / "runs").is_dir() and sorted((p / "runs").glob(f"*/{METRICS}")):
            files += sorted((p / "runs").glob(f"*/{METRICS}"))
        else:
            raise UserError(
                f"plan --pilot: {p}: not a metrics.jsonl, a run folder (runs/<run>, with "
                f"{METRICS}) or a project with evaluated runs under runs/"
            )
    return [str(f) for f in files]


def _pull_line(p: Path, dvc_file: Path) -> str:
    """`dvc pull` of a project's runs/*.dvc, run in the DVC repository holding them: a saved study's in the
    studies subrepo (`dvc --cd studies pull -R -r studies NAME/runs`: a folder, not a glob the shell would expand
    from the cwd)."""
    here = Path(p).resolve()
    repo = next((d for d in (here, *here.parents) if (d / ".dvc").is_dir()), None)
    if repo is None or repo == Path.cwd().resolve():
        return f"dvc pull{_remote_flag(dvc_file)} {(Path(p) / 'runs').as_posix()}/*.dvc"
    cd = Path(os.path.relpath(repo)).as_posix()
    return f"dvc --cd {cd} pull -R{_remote_flag(dvc_file)} {(here / 'runs').relative_to(repo).as_posix()}"


def _remote_flag(dvc_file: Path) -> str:
    """ " -r NAME" where the .dvc file names its remote (a saved study's: the studies remote), else ""."""
    import yaml

    try:
        outs = yaml.safe_load(dvc_file.read_text())["outs"]
        return f" -r {outs[0]['remote']}" if outs[0].get("remote") else ""
    except (OSError, ValueError, KeyError, IndexError, TypeError, yaml.YAMLError):
        return ""


def _seed_inputs(runs: dict, items: dict, metric: str, splits: int) -> dict:
    """{run: {"t", "id", "series", "V", "meta"}}: each run's analysed series and item-noise covariances."""
    from oodcorr.records.predictions import GOLD
    from oodcorr.stats.metrics import METRICS
    from oodcorr.stats.noise import item_noise

    rng = np.random.default_rng(0)
    out = {}
    for run, d in runs.items():
        names = [d["meta"]["id_testset"], *d["Y"].columns]
        mats = {nm: items[run][metric][nm] for nm in names if nm in items[run][metric]}
        series, V = item_noise(mats, items[run][GOLD], METRICS[metric].aggregate, rng, splits)
        if names[0] in series and np.ptp(np.asarray(series[names[0]], float)) <= 1e-12:
            raise UserError(
                f"plan --pilot: run {run!r}: the ID series ({names[0]}, {metric}) is constant over its "
                f"{len(d['steps'])} checkpoints, so there is no ID progress to residualise on; use a "
                "pilot whose ID score moves"
            )
        steps = np.asarray(d["steps"], float)
        t = (steps - steps.min()) / max(np.ptp(steps), 1e-12)
        out[run] = {
            "t": t,
            "id": names[0],
            "series": series,
            "V": V,
            "meta": d["meta"],
            "n_items": {nm: m.shape[1] for nm, m in mats.items()},
        }
    return out


def pilot_model(paths, metric: str, splits: int = 10) -> dict:
    """The planner's inputs measured on a pilot (module notes): {"ood": {testset: {signal_var, item_var,
    items, families: [{signal_var, item_var} per family]}}, "id": {name, item_var, items}, "ell", "beta",
    "families": [(model, train_set, id_testset, shots)], "n_runs", "n_pairs"}."""
    from oodcorr.records.predictions import load_items
    from oodcorr.records.run_tables import build_runs, load_metrics

    files = pilot_files(paths)
    runs = build_runs(load_metrics(files))
    _check_checkpoints(runs)
    data = _seed_inputs(runs, load_items(runs), metric, splits)
    families: dict = {}
    for d in data.values():
        families.setdefault(_family(d), []).append(d)
    sig, fam_sig, ells, betas = _pair_fits(families)
    id_name = next(iter(data.values()))["id"]
    v, n_items = _item_var(data, id_name)
    return {
        "ood": _ood_testsets(data, sig, fam_sig),
        "id": {"name": id_name, "item_var": v, "items": n_items},
        "ell": float(np.median(ells)),
        "beta": float(np.median(betas)),
        "families": list(families),
        "n_runs": len(data),
        "n_pairs": len(ells),
        "checkpoints": int(np.median([len(d["t"]) for d in data.values()])),
        "recipes": family_recipes(files, list(families)),
    }


def _check_checkpoints(runs: dict) -> None:
    for run, d in runs.items():
        if len(d["steps"]) < PILOT_MIN_CHECKPOINTS:
            raise UserError(
                f"plan --pilot: run {run!r} has {len(d['steps'])} checkpoints; a pilot needs >= "
                f"{PILOT_MIN_CHECKPOINTS} to estimate signal, noise and length-scale (score more "
                "checkpoints of it, or plan from stated values without --pilot)"
            )


def _pair_fits(families: dict) -> tuple[dict, dict, list, list]:
    """gp_interval on every pair of OOD testsets in each family (its seeds pooled): ({testset: [signal var]},
    {testset: {family: [signal var]}}, [length-scale], [|slope on ID|]); refused where no pair has an interval."""
    from oodcorr.stats.gp_interval import gp_interval
    from oodcorr.stats.pair_ci2 import seed_dict

    sig: dict = {}
    fam_sig: dict = {}
    ells, betas = [], []
    for fam, inputs in families.items():
        names = sorted(set.intersection(*(set(d["series"]) - {d["id"]} for d in inputs)))
        for a, b in itertools.combinations(names, 2):
            res = gp_interval([seed_dict(d, a, b) for d in inputs])
            if res["reason"] or not math.isfinite(res["ell"]):
                continue
            for name, s2 in ((a, res["sa2"]), (b, res["sb2"])):
                sig.setdefault(name, []).append(s2)
                fam_sig.setdefault(name, {}).setdefault(fam, []).append(s2)
            ells.append(res["ell"])
            betas += [abs(s[k]) for s in res["terms"] for k in ("beta_a", "beta_b")]
    if not ells:
        raise UserError(
            "plan --pilot: no pair of OOD testsets with a defined interval in the pilot (it needs >= 5 "
            "checkpoints per run, a moving ID series and two OOD testsets)"
        )
    return sig, fam_sig, ells, betas


def _item_var(data: dict, name: str, fam=None) -> tuple[float, int]:
    """(a testset's per-item noise variance in the residual space, median over runs (of `fam` where given), its
    largest item count)."""
    vals = [
        residual_noise(d, name) * d["n_items"][name]
        for d in data.values()
        if name in d["V"] and fam in (None, _family(d))
    ]
    return float(np.median(vals)), max(d["n_items"].get(name, 0) for d in data.values())


def _ood_testsets(data: dict, sig: dict, fam_sig: dict) -> dict:
    """{testset: {signal_var, item_var, items, families}}: medians over its pairs and runs, and per family."""
    ood = {}
    for name, s in sorted(sig.items()):
        v, n_items = _item_var(data, name)
        ood[name] = {
            "signal_var": float(np.median(s)),
            "item_var": v,
            "items": n_items,
            "families": [
                {"name": fam[0], "signal_var": float(np.median(f)), "item_var": _item_var(data, name, fam)[0]}
                for fam, f in sorted(fam_sig[name].items())
            ],
        }
    return ood


def _family(d: dict) -> tuple:
    m = d["meta"]
    return m["model"], m["train_set"], m["id_testset"], int(m["shots"])


def residual_noise(d: dict, name: str) -> float:
    """A testset's item-noise variance per checkpoint in the residual space the interval fits (what is left after
    the intercept and the run's ID series): the mean diagonal of Q' V Q. A testset's items are the same at every
    checkpoint, so most of their noise is shared by all checkpoints and leaves with the intercept and the ID
    slope; the raw diagonal of V overstated the noise the interval meets about fivefold on real runs."""
    from scipy.linalg import null_space

    x = np.asarray(d["series"][d["id"]], float)
    Q = null_space(np.column_stack([np.ones(len(x)), x]).T)
    return float(np.trace(Q.T @ d["V"][name] @ Q) / max(Q.shape[1], 1))


SEED_KEYS = ("run", "model", "train_set", "id_testset", "shots", "seed", "data_seed")


def family_recipes(files: list[str], families: list) -> dict:
    """{family: {train key: value}}: the training settings in which the pilot's families differ (e.g. Gemma's own
    lr), read from each run's run.json beside its metrics file, so a planned study trains them as the pilot did.
    A family whose run.json is missing gets none."""

    configs = {}
    for f in files:
        try:
            cfg = json.loads((Path(f).parent.parent / "run.json").read_text())["config"]
        except (OSError, ValueError, KeyError):
            continue
        fam = (cfg.get("model"), cfg.get("train_set"), cfg.get("id_testset"), int(cfg.get("shots") or 0))
        configs.setdefault(fam, cfg)
    found = [configs[f] for f in families if f in configs]
    if len(found) < 2:
        return {}
    keys = sorted({k for c in found for k in c} - set(SEED_KEYS))
    differ = [k for k in keys if len({json.dumps(c.get(k), sort_keys=True) for c in found}) > 1]
    return {f: {k: configs[f].get(k) for k in differ} for f in families if f in configs}
