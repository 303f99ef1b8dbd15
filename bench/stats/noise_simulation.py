"""Signal or noise: the interval grid, the earlier simulation study, `oodcorr plan` checks and runtime.

0. Interval grid (the default part; `--quick` for a CI-sized subset): coverage of the noise-corrected 95 % CI
   (interval.partial_interval, what `oodcorr analyze` reports as ci2) of the noise-free partial r, in every
   cell of: 5 scenarios (independent / smooth AR(1) phi 0.8 residual trajectories; ID testset of 1,000 items /
   as small as the OOD testsets; a shared per-checkpoint answer bias (SD 1 logit) with label-imbalanced
   testsets (ID 33 %, OOD 28 % and 40 % gold "Yes") analysed with the bias-invariant balanced margin) x 9, 20,
   40, 63 checkpoints x 64, 128, 350, 1,000 items x true r 0, 0.5, 0.8. Items are fixed over checkpoints
   (oodcorr.stats.simulate.design_runs). Per cell: coverage and false-"distinguishable" rate (true r = 0)
   among the replicates where the interval is defined (both reliabilities >= 0.5, enough effective
   checkpoints), the defined share, median width, zero-width count, and the earlier ci2 (checkpoint Fisher CI
   / sqrt(rel_a rel_b), independent checkpoints, ID taken as exact) on the same data for contrast.
   Replicates: 300 per cell (coverage SE 0.013 at 0.95), 100 with --quick.
   Plan check: `oodcorr plan`'s predicted power (plan.power) vs the simulated rejection rate in a few cells.

1. Coverage/bias table: >= 200 simulated runs per condition from the item-response simulator
   (oodcorr.stats.simulate.irt_study; the estimand is the population partial r of the TRUE expected
   accuracies given true ID accuracy = the known rho). Per condition: coverage of the noise-corrected 95% CI
   ci2 (superseded.disattenuated_ci: Fisher CI of r / sqrt(rel_a rel_b) with the split-half reliabilities, as
   `oodcorr analyze` computes it; defined where both reliabilities >= 0.5, so conditions where that is rare
   get extra studies until >= 200 have it), of the earlier two-level bootstrap CI (noise.basic_ci over
   two_level_boot, for comparison), of the checkpoint-only Fisher CI and checkpoint-only percentile bootstrap
   (ci_low/ci_high and boot_ci_*), mean/absolute error of the split-half reliability and of Cronbach's alpha
   on the residualised items (an analytic alternative, not used by the tool) vs the simulator's true
   reliability, bias of the disattenuated r where both reliabilities >= 0.5.
2. Plan check (kept only as its committed result, `plan_check` in the results file): the first planner's
   plan_design (a Fisher-CI half-width for a pilot) checked on 200 simulated studies. That planner is gone;
   today's (`oodcorr plan`, the GP interval and gate) is checked by bench/planner/plan_power_check.py and
   plan_gate_check.py.
3. Runtime: 10 models x 3 seeds x 50 checkpoints x 8 testsets (1 ID + 7 OOD) x 1,000 items, 1,000
   bootstraps, methods linear+rank+gam(+raw): today's analysis (compute_partials with the checkpoint
   bootstrap, seed pooling, verdicts) vs the same plus the noise analysis (3 metrics' reliabilities,
   ci2), both in memory in this process; loading the predictions is timed on one run
   and scaled by 30.
Writes bench/stats/results/noise_simulation.json. Usage: python bench/stats/noise_simulation.py [--studies 200]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("MPLBACKEND", "Agg")

CONDITIONS = [  # (rho, items per OOD testset, checkpoints)
    (0.0, 100, 30),
    (0.5, 200, 30),
    (0.3, 400, 50),
    (0.5, 1000, 50),
    (0.8, 300, 40),
]
TAU, ID_ITEMS = 0.03, 1000


def alpha_reliability(items, x):
    """Cronbach's alpha of the OLS-residualised item scores, checkpoints as subjects (the mean of all
    split-half Rulon coefficients): k/(k-1) (1 - sum_i var(r_i) / var(sum_i r_i)). Comparison only."""
    from oodcorr.stats.noise import linear_operator

    R = linear_operator(x) @ items
    k = items.shape[1]
    return float(k / (k - 1) * (1 - (R**2).sum() / (R.sum(axis=1) ** 2).sum()))


def one_study(rho, k, n, n_boot, rng, old=True):
    from superseded import disattenuate, disattenuated_ci

    from oodcorr.stats.noise import basic_ci, reliability, two_level_boot
    from oodcorr.stats.partial import _corr_cols, fisher_ci, residualise_linear
    from oodcorr.stats.simulate import irt_study, true_reliability

    st = irt_study(n, k, np.array([[1, rho], [rho, 1]]), tau=TAU, n_id_items=ID_ITEMS, rng=rng)
    x = st["x_items"].mean(axis=1)
    Y = np.column_stack([m.mean(axis=1) for m in st["items"]])
    r = float(_corr_cols(residualise_linear(x, Y))[0, 1])
    flo, fhi = fisher_ci(r, n, 1)
    t0 = time.perf_counter()
    rel = [reliability(m.astype(float), x, "linear", 200, rng)[0] for m in st["items"]]
    lo, hi = (float(v) for v in disattenuated_ci(flo, fhi, rel[0], rel[1], 0.5))
    t_new = time.perf_counter() - t0
    lo_any, hi_any = (float(v) for v in disattenuated_ci(flo, fhi, rel[0], rel[1], 1e-9))  # no threshold
    out = {
        "r": r,
        "cov_new": lo <= rho <= hi if np.isfinite(lo) else np.nan,
        "hw_new": (hi - lo) / 2,
        "cov_new_any": lo_any <= rho <= hi_any if np.isfinite(lo_any) else np.nan,
        "cov_fisher": flo <= rho <= fhi,
        "rel": rel[0],
        "rel_b": rel[1],
        "rel_true": true_reliability(st, 0),
        "alpha": alpha_reliability(st["items"][0].astype(float), x),
        "dis": float(disattenuate(r, rel[0], rel[1], 0.5)),
        "t_new": t_new,
        "cov2": np.nan,
        "hw2": np.nan,
        "cov_ckpt_boot": np.nan,
        "t_old": np.nan,
    }
    if old:
        t0 = time.perf_counter()
        boot = two_level_boot(
            st["x_items"].astype(float), [m.astype(float) for m in st["items"]], "linear", n_boot, rng
        )[:, 0, 1]
        lo2, hi2 = basic_ci(r, boot, n=n)
        out.update(cov2=lo2 <= rho <= hi2, hw2=(hi2 - lo2) / 2, t_old=time.perf_counter() - t0 - t_new)
        ck = rng.integers(0, n, size=(n_boot, n))  # checkpoint-only percentile bootstrap (boot_ci_*)
        cb = _corr_cols(residualise_linear(x[ck], Y[ck]))[:, 0, 1]
        blo, bhi = np.nanpercentile(cb, [2.5, 97.5])
        out["cov_ckpt_boot"] = blo <= rho <= bhi
    return out


def coverage_table(studies, n_boot, seed=0, min_defined=200, max_studies=4000):
    rows = []
    for rho, k, n in CONDITIONS:
        rng = np.random.default_rng(seed + int(1000 * rho) + k + n)
        t0 = time.perf_counter()
        res = [one_study(rho, k, n, n_boot, rng) for _ in range(studies)]
        f = {key: np.array([r[key] for r in res], float) for key in res[0]}
        extra = []  # ci2 is NaN where a reliability < 0.5: more studies (ci2 only) until >= min_defined have it
        while (
            np.isfinite(f["cov_new"]).sum() + np.isfinite([e["cov_new"] for e in extra]).sum() < min_defined
            and studies + len(extra) < max_studies
        ):
            extra.append(one_study(rho, k, n, n_boot, rng, old=False))
        new = np.r_[f["cov_new"], [e["cov_new"] for e in extra]]
        hw_new = np.r_[f["hw_new"], [e["hw_new"] for e in extra]]
        new_any = np.r_[f["cov_new_any"], [e["cov_new_any"] for e in extra]]
        ok = np.isfinite(f["dis"])
        err, err_a = f["rel"] - f["rel_true"], f["alpha"] - f["rel_true"]
        row = {
            "rho": rho,
            "items": k,
            "checkpoints": n,
            "studies": studies,
            "coverage_new_ci": float(np.nanmean(new)),
            "studies_new_ci_defined": int(np.isfinite(new).sum()),
            "studies_new_ci_total": int(len(new)),
            "share_new_ci_defined": float(np.isfinite(new).mean()),
            "median_half_width_new_ci": float(np.nanmedian(hw_new)),
            "coverage_new_ci_any_reliability": float(np.nanmean(new_any)),
            "coverage_two_level": float(np.nanmean(f["cov2"])),
            "coverage_checkpoint_fisher": float(f["cov_fisher"].mean()),
            "coverage_checkpoint_bootstrap": float(np.nanmean(f["cov_ckpt_boot"])),
            "median_half_width_two_level": float(np.nanmedian(f["hw2"])),
            "mean_r_observed": float(f["r"].mean()),
            "true_reliability_mean": float(f["rel_true"].mean()),
            "reliability_estimate_mean": float(f["rel"].mean()),
            "reliability_bias": float(err.mean()),
            "reliability_mae": float(np.abs(err).mean()),
            "alpha_reliability_bias": float(err_a.mean()),
            "alpha_reliability_mae": float(np.abs(err_a).mean()),
            "disattenuated_mean": float(f["dis"][ok].mean()) if ok.any() else None,
            "disattenuated_bias": float(f["dis"][ok].mean() - rho) if ok.any() else None,
            "share_disattenuated_defined": float(ok.mean()),
            "ms_per_study_new_ci": round(1000 * float(f["t_new"].mean()), 2),
            "ms_per_study_two_level": round(1000 * float(f["t_old"].mean()), 2),
            "seconds": round(time.perf_counter() - t0, 1),
        }
        rows.append(row)
        print(
            f"rho={rho:.1f} items={k:5d} n={n}: ci2 {row['coverage_new_ci']:.3f} ({row['studies_new_ci_defined']}/"
            f"{row['studies_new_ci_total']} defined; any reliability {row['coverage_new_ci_any_reliability']:.3f}) | "
            f"old two-level {row['coverage_two_level']:.3f} | checkpoint-only Fisher "
            f"{row['coverage_checkpoint_fisher']:.3f} boot {row['coverage_checkpoint_bootstrap']:.3f} | rel "
            f"{row['reliability_estimate_mean']:.3f} vs true {row['true_reliability_mean']:.3f} (bias "
            f"{row['reliability_bias']:+.3f}, MAE {row['reliability_mae']:.3f}; "
            f"alpha {row['alpha_reliability_bias']:+.3f}"
            f" / {row['alpha_reliability_mae']:.3f}) | r {row['mean_r_observed']:+.3f} r_dis "
            f"{row['disattenuated_mean'] if row['disattenuated_mean'] is None else round(row['disattenuated_mean'], 3)}"
            f" | hw ci2 {row['median_half_width_new_ci']:.3f} old {row['median_half_width_two_level']:.3f} "
            f"({row['seconds']}s)",
            flush=True,
        )
    return rows


def runtime(n_boot, models=10, seeds=3, steps=50, ood=7, items=1000):
    import pandas as pd

    from oodcorr.analysis.noise_tables import compute_noise
    from oodcorr.analysis.pipeline import compute_partials
    from oodcorr.records.predictions import load_run_items
    from oodcorr.records.run_tables import build_runs
    from oodcorr.records.simulated_runs import write_predictions
    from oodcorr.settings.analyze import AnalyzeSettings
    from oodcorr.stats.consistency import cross_model, pool_seeds
    from oodcorr.stats.simulate import irt_metrics_rows, irt_study

    names = [f"ood{j}" for j in range(ood)]
    sigma = np.full((ood, ood), 0.3) + 0.7 * np.eye(ood)
    sigma[0, 1] = sigma[1, 0] = 0.6
    rows, mats, first = [], {}, None
    stepv = list(range(0, 10 * steps, 10))
    for m in range(models):
        for s in range(seeds):
            st = irt_study(steps, items, sigma, tau=TAU, n_id_items=items, rng=np.random.default_rng(100 * m + s))
            run = f"model{m}-s{s}"
            rows += irt_metrics_rows(st, run, f"model{m}", s, stepv, "mnli", names)
            first = first or (run, st)
            acc = {"mnli": st["x_items"].astype(float), **{nm: it.astype(float) for nm, it in zip(names, st["items"])}}
            mar = {"mnli": st["x_margin"], **dict(zip(names, st["margins"]))}
            lpg = {k_: -np.logaddexp(0, -v_) for k_, v_ in mar.items()}
            mats[run] = {"accuracy": acc, "mean_margin": mar, "mean_logp_gold": lpg}
    df = pd.DataFrame(rows)
    df["_source"] = "mem"
    runs = build_runs(df)
    methods = ["linear", "rank", "gam", "raw"]
    boot = AnalyzeSettings(bootstrap=n_boot)  # the checkpoint bootstrap; the noise pass keeps its default

    def today():
        p = compute_partials(runs, methods, boot)
        cross_model(pool_seeds(p))
        return p

    def new():
        p = compute_partials(runs, methods, boot)
        p, rel = compute_noise(runs, p, AnalyzeSettings(), mats)
        cross_model(pool_seeds(p), 0.05, 0.5)
        return p

    warm = {k_: runs[k_] for k_ in list(runs)[:1]}  # imports and first-call costs outside the timings
    compute_noise(
        warm,
        compute_partials(warm, methods, AnalyzeSettings(bootstrap=10)),
        AnalyzeSettings(reliability_splits=10),
        mats,
    )
    t0 = time.perf_counter()
    today()
    t_today = time.perf_counter() - t0
    t0 = time.perf_counter()
    new()
    t_new = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:  # loading predictions: one run written, read, x runs
        run, st = first
        write_predictions(Path(tmp), st, stepv, "mnli", names)
        t0 = time.perf_counter()
        load_run_items(run, Path(tmp), stepv, ["mnli", *names])
        t_load = (time.perf_counter() - t0) * models * seeds
    out = {
        "scale": {
            "models": models,
            "seeds": seeds,
            "checkpoints": steps,
            "testsets": ood + 1,
            "items": items,
            "bootstrap": n_boot,
            "methods": methods,
        },
        "today_s": round(t_today, 2),
        "with_noise_s": round(t_new, 2),
        "ratio": round(t_new / t_today, 2),
        "noise_part_s": round(t_new - t_today, 2),
        "loading_predictions_s_estimated": round(t_load, 2),
        "ratio_including_loading": round((t_new + t_load) / t_today, 2),
    }
    print(
        f"runtime: today's analysis {t_today:.1f}s, with the noise analysis {t_new:.1f}s (x{t_new / t_today:.2f}); "
        f"+ loading predictions ~{t_load:.1f}s (x{(t_new + t_load) / t_today:.2f} in all)",
        flush=True,
    )
    return out


SCENARIOS = {  # name -> design_runs keywords (id_items None: as small as the OOD testsets)
    "independent": {"phi": 0.0, "id_items": 1000},
    "smooth": {"phi": 0.8, "id_items": 1000},
    "independent_small_id": {"phi": 0.0, "id_items": None},
    "smooth_small_id": {"phi": 0.8, "id_items": None},
    "smooth_small_id_answer_bias": {
        "phi": 0.8,
        "id_items": None,
        "metric": "balanced_margin",
        "bias_sd": 1.0,
        "yes_share": (1 / 3, 0.28, 0.40),
    },
}
CHECKPOINTS, ITEMS, RHOS = (9, 20, 40, 63), (64, 128, 350, 1000), (0.0, 0.5, 0.8)
QUICK = {"scenarios": ("smooth", "smooth_small_id_answer_bias"), "checkpoints": (20, 40), "items": (128, 350)}
TARGET = (0.93, 0.97)
RELIABILITY_MIN = 0.5


def cell_seed(scenario: str, n: int, k: int, rho: float, seed: int = 20) -> int:
    """The random seed of one grid cell (interval_grid's seed + the cell's coordinates)."""
    return seed + 100000 * list(SCENARIOS).index(scenario) + 1000 * n + 10 * k + int(10 * rho)


def cell_draws(scenario: str, n: int, k: int, rho: float, reps: int, seed: int, chunk: int = 150):
    """A grid cell's simulated runs, `chunk` replicates at a time: yields (series [ID, A, B] (c, n), their
    item-noise covariances (c, n, n)); the same seed and chunk give the same draws."""
    from oodcorr.stats.item_cov import noise_cov
    from oodcorr.stats.simulate import design_runs

    kw = dict(SCENARIOS[scenario])
    kw["id_items"] = kw["id_items"] or k
    rng = np.random.default_rng(seed)
    for start in range(0, reps, chunk):
        d = design_runs(min(chunk, reps - start), n, k, rho, rng=rng, **kw)
        yield (
            [m.mean(-1, dtype=np.float64) for m in d["items"]],
            [noise_cov(m, lab) for m, lab in zip(d["items"], d["labels"])],
        )


def grid_cell(scenario: str, n: int, k: int, rho: float, reps: int, seed: int, chunk: int = 150) -> dict:
    """One cell of the interval grid (module notes, part 0)."""
    from superseded import disattenuated_ci

    from oodcorr.stats.interval import partial_interval
    from oodcorr.stats.partial import _corr_cols, fisher_ci, residualise_linear

    cols = {c: [] for c in ("lo", "hi", "old_lo", "old_hi", "r_hat", "n_eff", "reason")}
    for ser, V in cell_draws(scenario, n, k, rho, reps, seed, chunk):
        res = partial_interval(*ser, *V, reliability_min=RELIABILITY_MIN)
        cols["lo"].append(res["ci_low"]), cols["hi"].append(res["ci_high"])
        cols["r_hat"].append(res["r_hat"]), cols["n_eff"].append(res["n_eff"]), cols["reason"].append(res["reason"])
        # the earlier ci2 on the same data: Fisher CI of the OLS partial r (n - 4) / sqrt(rel_a rel_b), with the
        # same moment reliabilities but residuals on the observed ID and the ID taken as exact
        r = _corr_cols(residualise_linear(ser[0], np.stack(ser[1:], -1)))[:, 0, 1]
        old = partial_interval(*ser, np.zeros_like(V[0]), V[1], V[2], eiv=False)
        flo, fhi = fisher_ci(r, n, 1)
        olo, ohi = disattenuated_ci(flo, fhi, old["rel_a"], old["rel_b"], RELIABILITY_MIN)
        cols["old_lo"].append(olo), cols["old_hi"].append(ohi)
    f = {c: np.concatenate(v) for c, v in cols.items()}
    ok = np.isfinite(f["lo"]) & np.isfinite(f["hi"])
    cover = (f["lo"] <= rho) & (rho <= f["hi"])
    excl = (f["lo"] > 0) | (f["hi"] < 0)
    ook = np.isfinite(f["old_lo"]) & np.isfinite(f["old_hi"])
    reasons = {str(r): int((f["reason"] == r).sum()) for r in np.unique(f["reason"]) if r}
    out = {
        "scenario": scenario,
        "checkpoints": n,
        "items": k,
        "rho": rho,
        "replicates": reps,
        "defined": int(ok.sum()),
        "share_defined": float(ok.mean()),
        "coverage": float(cover[ok].mean()) if ok.any() else None,
        "coverage_se": float(np.sqrt(cover[ok].mean() * (1 - cover[ok].mean()) / ok.sum())) if ok.any() else None,
        "rejects_zero": float(excl[ok].mean()) if ok.any() else None,
        "median_width": float(np.median((f["hi"] - f["lo"])[ok])) if ok.any() else None,
        "zero_width": int(((f["hi"] - f["lo"]) <= 0)[ok].sum()),
        "median_n_eff": float(np.nanmedian(f["n_eff"])),
        "mean_r_hat": float(np.nanmean(f["r_hat"][ok])) if ok.any() else None,
        "undefined_reasons": reasons,
        "old_ci2_coverage": float(((f["old_lo"] <= rho) & (rho <= f["old_hi"]))[ook].mean()) if ook.any() else None,
        "old_ci2_rejects_zero": float(((f["old_lo"] > 0) | (f["old_hi"] < 0))[ook].mean()) if ook.any() else None,
    }
    out["false_distinguishable"] = out["rejects_zero"] if rho == 0 else None
    out["in_target"] = (
        None if out["coverage"] is None or out["defined"] < 30 else bool(TARGET[0] <= out["coverage"] <= TARGET[1])
    )
    return out


def interval_grid(reps: int, quick: bool = False, seed: int = 20, scenarios=None) -> dict:
    scen = scenarios or (QUICK["scenarios"] if quick else tuple(SCENARIOS))
    ns, ks = (QUICK["checkpoints"], QUICK["items"]) if quick else (CHECKPOINTS, ITEMS)
    rows = []
    t0 = time.perf_counter()
    for sc in scen:
        for n in ns:
            for k in ks:
                for rho in RHOS:
                    row = grid_cell(sc, n, k, rho, reps, cell_seed(sc, n, k, rho, seed))
                    rows.append(row)
                    cov = "  -  " if row["coverage"] is None else f"{row['coverage']:.3f}"
                    fd = "" if rho else f" false-distinguishable {row['rejects_zero']:.3f}" if row["defined"] else ""
                    old = "-" if row["old_ci2_coverage"] is None else f"{row['old_ci2_coverage']:.3f}"
                    width = "-" if row["median_width"] is None else f"{row['median_width']:.2f}"
                    print(
                        f"{sc:28s} n={n:2d} items={k:4d} r={rho:.1f}: coverage {cov} (defined {row['defined']}/"
                        f"{reps}) width {width}{fd} | earlier ci2 {old}",
                        flush=True,
                    )
    return grid_summary(rows, reps, quick, round(time.perf_counter() - t0, 1))


def grid_summary(rows: list, reps: int, quick: bool, seconds: float) -> dict:
    """Cells plus min/max coverage per scenario x true r, the largest false-distinguishable rate, the cells
    outside the target band and those with too few defined intervals to tell (< 30)."""
    summary = {}
    for sc in dict.fromkeys(r["scenario"] for r in rows):
        for rho in RHOS:
            sub = [r for r in rows if r["scenario"] == sc and r["rho"] == rho and r["in_target"] is not None]
            cv = [r["coverage"] for r in sub]
            summary[f"{sc}|r={rho}"] = {
                "min": min(cv) if cv else None,
                "max": max(cv) if cv else None,
                "cells": len(sub),
                "cells_in_target": sum(r["in_target"] for r in sub),
            }
    fd = [r["rejects_zero"] for r in rows if r["rho"] == 0 and r["defined"] >= 30]
    keys = ("scenario", "checkpoints", "items", "rho", "coverage", "rejects_zero", "defined")
    return {
        "replicates": reps,
        "quick": quick,
        "target": TARGET,
        "reliability_min": RELIABILITY_MIN,
        "seconds": seconds,
        "cells": rows,
        "by_condition": summary,
        "max_false_distinguishable": max(fd) if fd else None,
        "cells_missing_target": [{k_: r[k_] for k_ in keys} for r in rows if r["in_target"] is False],
        "cells_false_distinguishable_over_5pct": [
            {k_: r[k_] for k_ in keys}
            for r in rows
            if r["rho"] == 0 and r["defined"] >= 30 and r["rejects_zero"] > 0.05
        ],
        "cells_too_few_defined": [
            {k_: r[k_] for k_ in ("scenario", "checkpoints", "items", "rho", "defined")}
            for r in rows
            if r["in_target"] is None
        ],
    }


def grid_markdown(grid: dict) -> str:
    """The docs table (docs/statistics-reference.md) of an interval grid result: a row per scenario x checkpoints x
    items."""
    cells = {(c["scenario"], c["checkpoints"], c["items"], c["rho"]): c for c in grid["cells"]}
    fmt = lambda v: "–" if v is None else f"{v:.3f}"  # noqa: E731
    lines = [
        "| scenario | checkpoints | items | coverage r=0 | r=0.5 | r=0.8 | false distinguishable (r=0) | "
        "median width (r=0) | defined (min share) | earlier ci2 coverage r=0 / 0.5 / 0.8 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for sc, n, k in dict.fromkeys((c["scenario"], c["checkpoints"], c["items"]) for c in grid["cells"]):
        row = [cells[(sc, n, k, r)] for r in RHOS]
        cov = [("*" if c["in_target"] is None else "") + fmt(c["coverage"]) for c in row]
        old = " / ".join(fmt(c["old_ci2_coverage"]) for c in row)
        lines.append(
            f"| {sc} | {n} | {k} | {' | '.join(cov)} | {fmt(row[0]['rejects_zero'])} | "
            f"{fmt(row[0]['median_width'])} | {min(c['share_defined'] for c in row):.2f} | {old} |"
        )
    return "\n".join(lines)


def plan_power_check(reps: int, seed: int = 7) -> list[dict]:
    """power.power (the analytic prediction `oodcorr plan --detect-r` uses) vs the simulated share of runs whose
    interval excludes 0, one seed per run."""
    from superseded import power

    from oodcorr.stats.interval import partial_interval
    from oodcorr.stats.item_cov import noise_cov
    from oodcorr.stats.simulate import design_runs

    out = []
    for n, k, rho, phi in ((40, 350, 0.5, 0.0), (40, 350, 0.5, 0.8), (63, 1000, 0.5, 0.8), (20, 1000, 0.8, 0.0)):
        d = design_runs(reps, n, k, rho, phi, 1000, rng=np.random.default_rng(seed + n + k))
        ser = [m.mean(-1, dtype=np.float64) for m in d["items"]]
        V = [noise_cov(m, lab) for m, lab in zip(d["items"], d["labels"])]
        res = partial_interval(*ser, *V)
        ok = np.isfinite(res["ci_low"])
        rej = float(((res["ci_low"] > 0) | (res["ci_high"] < 0))[ok].mean())
        rel = float(np.nanmedian(res["A"]))
        pred = power(n, rho, rel, phi)
        out.append(
            {
                "checkpoints": n,
                "items": k,
                "rho": rho,
                "phi": phi,
                "reliability": rel,
                "predicted_power": pred,
                "simulated_rejection": rej,
                "mc_se": float(np.sqrt(rej * (1 - rej) / ok.sum())),
            }
        )
        print(
            f"plan power n={n} items={k} r={rho} phi={phi}: predicted {pred:.3f} simulated {rej:.3f} "
            f"(reliability {rel:.2f})",
            flush=True,
        )
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="interval grid: a CI-sized subset, 100 replicates")
    ap.add_argument("--reps", type=int, default=None, help="interval grid replicates per cell (default 300)")
    ap.add_argument(
        "--scenarios",
        nargs="*",
        choices=list(SCENARIOS),
        default=None,
        help="interval grid: only these scenarios (e.g. one per process)",
    )
    ap.add_argument("--markdown", action="store_true", help="print the interval grid of --out as a markdown table")
    ap.add_argument(
        "--merge",
        nargs="*",
        default=None,
        help="interval grid: merge the cells of these results files (runs split by --scenarios) into --out",
    )
    ap.add_argument("--studies", type=int, default=200)
    ap.add_argument("--boot", type=int, default=500, help="bootstrap replicates per simulated study")
    ap.add_argument("--runtime-boot", type=int, default=1000)
    ap.add_argument(
        "--min-defined",
        type=int,
        default=200,
        help="studies per condition with a defined ci2 (both reliabilities >= 0.5) at least",
    )
    ap.add_argument(
        "--skip",
        nargs="*",
        default=["coverage", "runtime"],
        choices=["grid", "power", "coverage", "runtime"],
        help="parts to skip (default: only the interval grid and the plan power check run; the earlier "
        "parts 1-3 are kept for comparison, part 2 only as its committed result)",
    )
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "noise_simulation.json"))
    args = ap.parse_args()
    if args.markdown:
        print(grid_markdown(json.loads(Path(args.out).read_text())["interval_grid"]))
        return
    result = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "tau": TAU,
        "id_items": ID_ITEMS,
        "boot_per_study": args.boot,
    }
    if args.merge:
        parts = [json.loads(Path(f).read_text())["interval_grid"] for f in args.merge]
        rows = [c for p in parts for c in p["cells"]]
        order = list(SCENARIOS)
        rows.sort(key=lambda r: (order.index(r["scenario"]), r["checkpoints"], r["items"], r["rho"]))
        result["interval_grid"] = grid_summary(rows, parts[0]["replicates"], False, sum(p["seconds"] for p in parts))
    elif "grid" not in args.skip:
        result["interval_grid" + ("_quick" if args.quick else "")] = interval_grid(
            args.reps or (100 if args.quick else 300), args.quick, scenarios=args.scenarios
        )
    if "power" not in args.skip:
        result["plan_power_check"] = plan_power_check(args.reps or (200 if args.quick else 400))
    if "coverage" not in args.skip:
        result["coverage"] = coverage_table(args.studies, args.boot, min_defined=args.min_defined)
    if "runtime" not in args.skip:
        result["runtime"] = runtime(args.runtime_boot)
    out = Path(args.out)
    if out.exists():  # keep parts not rerun
        old = json.loads(out.read_text())
        result = {**old, **result}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
