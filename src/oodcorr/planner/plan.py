"""`oodcorr plan`: how big a study must be for partial correlations that are signal, not testset noise.

Model (the same as noise.py measures and simulate.irt_study generates): the residual trajectory of a
testset (after regressing out ID) has a true variance S across checkpoints; a testset of I items adds
noise of variance v / I per checkpoint (v = per-item noise variance; for accuracy at most p(1 - p)).
  reliability(I)   = S / (S + v / I)             -> items needed: I >= rel/(1 - rel) * v / S
  noise-corrected  CI (ci2, noise.disattenuated_ci) with n checkpoints per run and m seeds pooled: the
                   Fisher CI of the observed r = r0 * rel (se_z = 1 / sqrt(m (n - 4))) divided by rel;
                   half-width on r at partial r = r0: the wider side, clipped to [-1, 1] like ci2
                   (checked on the simulator: bench/noise_simulation.py).
S and v come from a pilot's predictions (median over run x OOD testset series of the split-half
reliability, or the `quantile` share of series that must reach the target) or from stated assumptions
(accuracy level p -> v = p(1 - p), residual SD -> S; or a reliability at a known item count).
Compute: examples = items x checkpoints x testsets per run; hours at --examples-per-s, else at the throughput
measured for the study's model (bench/results/eval_throughput.json) when every model the hours are for (--model,
else params.yaml's runs) is that model; otherwise the hours are unknown and the plan says so.

Power mode (--detect-r r1): checkpoints x items to detect a noise-free partial |r| >= r1 against 0 with the
noise-corrected interval, seeds pooled, autocorrelated trajectories included (power.py). A pilot needs
PILOT_MIN_CHECKPOINTS checkpoints and a moving ID series (else one line saying so).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import click
import numpy as np

from oodcorr.errors import UserError
from oodcorr.metrics import BASELINE_METRIC
from oodcorr.planner.budget_cmd import budget_options, run_budget
from oodcorr.settings.analyze import AnalyzeSettings

PILOT_MIN_CHECKPOINTS = 10
DEFAULT_PHI = 0.8  # power mode without a pilot: fine-tuning trajectories are smooth


def halfwidth(n: int, rel: float, seeds: int = 1, r0: float = 0.0, alpha: float = AnalyzeSettings.alpha) -> float:
    """Expected half-width of the noise-corrected CI on partial r (module docstring); inf where n <= 4."""
    from scipy.stats import norm

    if n <= 4 or rel <= 0:
        return math.inf
    se = 1 / math.sqrt(seeds * (n - 4))
    z0 = math.atanh(min(abs(r0) * rel, 0.999))
    zc = norm.ppf(1 - alpha / 2)
    hi, lo = min(math.tanh(z0 + zc * se) / rel, 1.0), max(math.tanh(z0 - zc * se) / rel, -1.0)
    centre = min(abs(r0), 1.0)
    return max(hi - centre, centre - lo)


def items_needed(signal_var: float, noise_var_item: float, rel: float) -> int:
    if signal_var <= 0:
        return math.inf
    return int(math.ceil(rel / (1 - rel) * noise_var_item / signal_var - 1e-9))


def plan_design(signal_var: float, noise_var_item: float, half_width: float = 0.2, reliability: float = 0.8,
                seeds: int = 1, r0: float = 0.0, alpha: float = AnalyzeSettings.alpha, testsets: int = 8, runs: int = 1,
                examples_per_s: float | None = None, max_checkpoints: int = 100000) -> dict:
    """Items per testset and checkpoints per run for the targets, and the compute that implies."""
    if not 0 < reliability < 1:
        raise UserError(f"plan: target reliability must be in (0, 1), got {reliability}")
    if not 0 < half_width < 1:
        raise UserError(f"plan: target half-width must be in (0, 1), got {half_width}")
    items = items_needed(signal_var, noise_var_item, reliability)
    if items == math.inf:
        raise UserError("plan: the residual trajectories carry no signal (signal variance <= 0): no number of "
                        "items makes them reliable")
    n = 5
    while halfwidth(n, reliability, seeds, r0, alpha) > half_width and n < max_checkpoints:
        n += 1
    per_run = items * n * testsets
    out = {"items_per_testset": items, "checkpoints_per_run": n, "seeds": seeds, "reliability": reliability,
           "expected_half_width": halfwidth(n, reliability, seeds, r0, alpha), "target_half_width": half_width,
           "r0": r0, "testsets": testsets, "runs": runs, "examples_per_run": per_run, "examples_total": per_run * runs,
           "signal_var": signal_var, "noise_var_item": noise_var_item}
    if examples_per_s:
        out["examples_per_s"] = examples_per_s
        out["hours_total"] = per_run * runs / examples_per_s / 3600
    return out


def pilot_stats(metrics_files, quantile: float = 0.5, metric: str = BASELINE_METRIC,
                splits: int = AnalyzeSettings.reliability_splits) -> dict:
    """Signal variance S and per-item noise variance v of a pilot (from its stored predictions), at the
    series where the signal-to-noise ratio S/v is at the `1 - quantile` quantile (0.5: the median), and the
    median lag-1 autocorrelation phi of the residual trajectories' signal (interval.fit_ar1, no upper band).

    A pilot run with fewer than PILOT_MIN_CHECKPOINTS checkpoints or a constant ID series is a UserError naming
    the run; constant OOD series are skipped (and a pilot with none left is a UserError)."""
    from oodcorr.predictions import load_run_items
    from oodcorr.run_tables import build_runs, load_metrics
    from oodcorr.stats.interval import fit_ar1, noise_cov, residual_maker
    from oodcorr.stats.noise import reliability
    from oodcorr.stats.partial import residualise_linear

    runs = build_runs(load_metrics(list(metrics_files)))
    rows, skipped = [], []
    rng = np.random.default_rng(0)
    for run, d in runs.items():
        n = len(d["steps"])
        if n < PILOT_MIN_CHECKPOINTS:
            raise UserError(f"plan --pilot: run {run!r} has {n} checkpoints; a pilot needs >= "
                            f"{PILOT_MIN_CHECKPOINTS} to estimate signal, noise and autocorrelation")
        names = [d["meta"]["id_testset"], *d["Y"].columns]
        mats = load_run_items(run, Path(d["sources"][0]).parent, d["steps"], names, (metric,))[metric]
        x = mats[names[0]].mean(axis=1)
        if np.ptp(x) <= 1e-12:
            raise UserError(f"plan --pilot: run {run!r}: the ID series ({names[0]}, {metric}) is constant over its {n} "
                            "checkpoints, so there is no ID progress to residualise on; use a pilot whose ID score moves")
        M = residual_maker(x)
        for name in names[1:]:
            items = mats[name]
            if np.ptp(items.mean(axis=1)) <= 1e-12:
                skipped.append(f"{run}:{name}")
                continue
            rel, _ = reliability(items, x, "linear", splits, rng)
            if not np.isfinite(rel):
                continue
            resid = residualise_linear(x, items.mean(axis=1)[:, None])[:, 0]
            V = float(resid.var(ddof=2))
            if V <= 1e-12:  # the series is a linear function of ID: nothing left to split into signal and noise
                skipped.append(f"{run}:{name}")
                continue
            rel_c = min(max(rel, 0.0), 0.999)
            phi, _ = fit_ar1(M @ items.mean(axis=1), M, noise_cov(items), phi_z=0.0)
            rows.append({"run": run, "testset": name, "n_items": items.shape[1], "reliability": rel,
                         "signal_var": rel_c * V, "noise_var_item": (1 - rel_c) * V * items.shape[1],
                         "phi": float(phi)})
    if not rows:
        why = f" (constant series: {', '.join(skipped)})" if skipped else ""
        raise UserError("plan --pilot: no pilot series with >= 20 items and a moving residual to estimate noise "
                        f"from{why}")
    snr = np.array([r["signal_var"] / r["noise_var_item"] for r in rows])
    target = float(np.quantile(snr, 1 - quantile))
    i = int(np.argmin(np.abs(snr - target)))
    return {"signal_var": rows[i]["signal_var"], "noise_var_item": rows[i]["noise_var_item"], "snr": target,
            "series": rows, "n_runs": len(runs), "median_reliability": float(np.median([r["reliability"] for r in rows])),
            "n_items_median": int(np.median([r["n_items"] for r in rows])),
            "phi": float(np.median([r["phi"] for r in rows])), "skipped_constant": skipped}


def measured_throughput(root: Path, models=()) -> tuple[float | None, str]:
    """(examples/s, where it was measured) for `models`, or (None, why not): the measurement is one model's on one
    machine, so it stands for nothing else (a 7B model is not SmolLM2)."""
    path = root / "bench" / "results" / "eval_throughput.json"
    try:
        data = json.loads(path.read_text())
        eps = float(data["fast"]["examples_per_s"])
    except (OSError, KeyError, ValueError, TypeError):
        return None, "no measured throughput found"
    measured = f"{data.get('model')} on {data.get('device')}, {data.get('dtype')}"
    others = sorted({str(m) for m in models} - {str(data.get("model"))})
    if not models or others:
        what = f"for {', '.join(others)}" if others else "for an unnamed model (--model)"
        return None, f"unknown {what}: the one measured throughput is {measured} ({path})"
    return eps, f"{path} ({measured})"


def study_models(root: Path) -> list[str]:
    """The models of the project's params.yaml runs ([] without a readable one)."""
    from oodcorr.settings.config import PARAMS_FILE, load_params

    try:
        params = load_params(root / PARAMS_FILE) if (root / PARAMS_FILE).exists() else {}
    except UserError:
        return []
    return sorted({str(r.get("model")) for r in (params.get("runs") or {}).values() if isinstance(r, dict)})


@click.command("plan")
@click.option("--pilot", "pilot", multiple=True, type=click.Path(),
              help="Pilot runs: metrics.jsonl files, run folders or projects (their stored predictions are read); "
                   "default: assumptions.")
@click.option("--accuracy", type=float, default=0.6, show_default=True,
              help="Assumed accuracy level (per-item noise variance p(1-p)) when no pilot is given.")
@click.option("--residual-sd", type=float, default=0.02, show_default=True,
              help="Assumed SD of the TRUE residual trajectory (accuracy after removing ID progress).")
@click.option("--pilot-reliability", type=float, default=None,
              help="Instead of --residual-sd: a reliability observed at --pilot-items items.")
@click.option("--pilot-items", type=int, default=None, help="Items per testset behind --pilot-reliability.")
@click.option("--half-width", type=float, default=0.2, show_default=True, help="Target CI half-width on partial r.")
@click.option("--reliability", "target_rel", type=float, default=0.8, show_default=True,
              help="Target reliability of every residual trajectory.")
@click.option("--seeds", type=int, default=1, show_default=True, help="Seeds pooled per model.")
@click.option("--r", "r0", type=float, default=0.0, show_default=True,
              help="Expected partial r (0 gives the widest CI).")
@click.option("--testsets", type=int, default=8, show_default=True, help="Testsets evaluated per checkpoint (ID included).")
@click.option("--runs", type=int, default=1, show_default=True, help="Runs (models x setups x seeds) in the study.")
@click.option("--examples-per-s", type=float, default=None,
              help="Evaluation throughput (default: the one measured in bench/results/eval_throughput.json, used only "
                   "for the model it was measured with).")
@click.option("--model", "models", multiple=True,
              help="Model the hours are for (repeatable; default: the models of params.yaml's runs).")
@click.option("--quantile", type=float, default=0.5, show_default=True,
              help="With --pilot: share of the pilot's series that must reach the target reliability.")
@click.option("--detect-r", "detect_r", type=float, default=None,
              help="Power mode: checkpoints x items to detect a noise-free partial |r| of this size against 0.")
@click.option("--power", "target_power", type=float, default=0.8, show_default=True,
              help="Power mode and --budget: target power.")
@click.option("--phi", type=float, default=None,
              help="Power mode: lag-1 autocorrelation of the residual trajectories' signal (default: the pilot's "
                   "median, else 0.8: fine-tuning trajectories are smooth).")
@click.option("--items", "item_counts", type=int, multiple=True,
              help="Power mode: testset sizes to plan for (default 64 128 256 350 500 1000 2000).")
@click.option("--reliability-product", type=float, default=None,
              help="Power mode: also plan for pairs with this rel_a * rel_b.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@budget_options
def plan_cmd(pilot, accuracy, residual_sd, pilot_reliability, pilot_items, half_width, target_rel, seeds, r0,
             testsets, runs, examples_per_s, models, quantile, detect_r, target_power, phi, item_counts,
             reliability_product, as_json, **budget):
    """Examples per testset and checkpoints per run (and seeds) needed for a target CI half-width on
    partial r and reliability of the residual trajectories, with the compute that implies; with --detect-r,
    the checkpoints per testset size that give the target power to detect that partial r; with --budget, the
    seeds x checkpoints x items a compute budget buys for the most power."""
    from oodcorr.planner.pilot import pilot_files
    from oodcorr.settings.config import find_project_root

    if budget["budget"] is not None:
        return run_budget(pilot, examples_per_s, models, target_power, as_json, **budget)

    if seeds < 1 or testsets < 1 or runs < 1:
        raise UserError("plan: --seeds, --testsets and --runs must be >= 1")
    pilot_phi = None
    if pilot:
        stats = pilot_stats(pilot_files(pilot), quantile)
        S, v = stats["signal_var"], stats["noise_var_item"]
        pilot_phi = stats["phi"]
        source = (f"pilot: {stats['n_runs']} runs, {len(stats['series'])} series, median reliability "
                  f"{stats['median_reliability']:.2f} at {stats['n_items_median']} items, signal lag-1 "
                  f"autocorrelation {pilot_phi:.2f}")
    else:
        if not 0 < accuracy < 1:
            raise UserError(f"plan: --accuracy must be in (0, 1), got {accuracy}")
        v = accuracy * (1 - accuracy)
        if pilot_reliability is not None:
            if not pilot_items or not 0 < pilot_reliability < 1:
                raise UserError("plan: --pilot-reliability needs --pilot-items and a value in (0, 1)")
            S = pilot_reliability / (1 - pilot_reliability) * v / pilot_items
            source = f"assumed: accuracy {accuracy}, reliability {pilot_reliability} at {pilot_items} items"
        else:
            if residual_sd <= 0:
                raise UserError(f"plan: --residual-sd must be > 0, got {residual_sd}")
            S = residual_sd**2
            source = f"assumed: accuracy {accuracy}, residual SD {residual_sd}"
    if detect_r is not None:
        phi = phi if phi is not None else pilot_phi if pilot_phi is not None else DEFAULT_PHI
        from oodcorr.stats.power import ITEM_COUNTS, MAX_CHECKPOINTS, power_table

        rows = power_table(S, v, detect_r, target_power, phi, seeds,
                           tuple(item_counts) or ITEM_COUNTS, reliability_product)
        if as_json:
            click.echo(json.dumps({"source": source, "detect_r": detect_r, "power": target_power, "phi": phi,
                                   "seeds": seeds, "rows": rows}, indent=2))
            return
        click.echo(f"plan, power mode ({source}; signal var {S:.3g}, per-item noise var {v:.3g})")
        click.echo(f"  checkpoints per run for power {target_power} to detect |partial r| = {abs(detect_r)} against 0, "
                   f"{seeds} seed(s) pooled, signal lag-1 autocorrelation {phi:.2f}:")
        for row in rows:
            what = f"{row['items']:>6} items" if row["items"] is not None else "stated product"
            rel = f"reliability {row['reliability']:.2f} each (rel_a*rel_b {row['reliability'] ** 2:.2f})"
            if row["checkpoints"] is None:
                click.echo(f"  {what}: {rel} -> not reachable with <= {MAX_CHECKPOINTS} checkpoints")
            else:
                click.echo(f"  {what}: {rel} -> {row['checkpoints']} checkpoints "
                           f"(effective {row['n_eff']:.1f}, power {row['power']:.2f})")
        return
    where = ""
    if examples_per_s is None:
        root = find_project_root()
        examples_per_s, where = measured_throughput(root, models or study_models(root))
    out = plan_design(S, v, half_width, target_rel, seeds, r0, AnalyzeSettings.alpha, testsets, runs, examples_per_s)
    out["source"] = source
    if examples_per_s is None:
        out["hours_total"], out["hours_note"] = None, where
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    click.echo(f"plan ({source}; signal var {S:.3g}, per-item noise var {v:.3g})")
    click.echo(f"  examples per testset : {out['items_per_testset']}  (reliability >= {target_rel})")
    click.echo(f"  checkpoints per run  : {out['checkpoints_per_run']}  with {seeds} seed(s) pooled "
               f"(expected noise-corrected CI half-width {out['expected_half_width']:.3f} <= {half_width} at r = {r0})")
    click.echo(f"  compute              : {out['items_per_testset']} x {out['checkpoints_per_run']} x {testsets} = "
               f"{out['examples_per_run']:,} examples per run; x {runs} runs = {out['examples_total']:,}")
    if examples_per_s:
        click.echo(f"  time                 : {out['hours_total']:.1f} h at {examples_per_s:.3g} examples/s"
                   + (f" (measured: {where})" if where else ""))
    else:
        click.echo(f"  time                 : {where}; pass --examples-per-s")
