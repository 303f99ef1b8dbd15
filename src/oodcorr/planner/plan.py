"""`oodcorr plan`: how big a study must be for partial correlations that are signal, not testset noise, planned
with the interval and the reliability gate that decide the verdicts (stats.gp_interval, planned by
stats.gp_design) and the analysis settings of the study it plans for (planner/study.py).

Modes: --budget HOURS (budget_cmd.py: the design a budget buys, what it settles, its params fragment);
--detect-r R (modes.power_rows: checkpoints per testset size for a target power); neither (modes.half_width_plan:
checkpoints and items for a target interval half-width and reliability). Inputs: a pilot's stored predictions
(pilot.pilot_model) or stated values. Hours: at this machine's measured rates for the model and dtype (rates.py),
or at rates the user states.
"""

from __future__ import annotations

import json
import math

import click

from oodcorr.core.errors import UserError
from oodcorr.planner.options import HELP_SECTIONS, plan_options

DEFAULT_ELL = 0.4  # without a pilot: smooth fine-tuning trajectories (budget_inputs.DEFAULTS["ell"])


def _pair_inputs(pilot, o: dict) -> tuple[dict, str]:
    """{signal_var, item_var, leak, ell} of one testset pair for the half-width and power modes, and where they
    come from: a pilot's testset at the `quantile` of signal-to-noise, else stated assumptions."""
    from oodcorr.planner.budget_inputs import DEFAULTS

    ell = o["ell"] or DEFAULTS["ell"]
    beta = DEFAULTS["id_slope"] if o["id_slope"] is None else o["id_slope"]
    if pilot:
        import numpy as np

        from oodcorr.planner.pilot import pilot_model
        from oodcorr.stats.metrics import DEFAULT_METRIC

        if not 0 < o["quantile"] < 1:
            raise UserError(f"plan: --quantile must be in (0, 1), got {o['quantile']}")
        pm = pilot_model(pilot, DEFAULT_METRIC)
        ts = sorted(pm["ood"].values(), key=lambda t: t["signal_var"] / t["item_var"])
        t = ts[int(np.clip(round((1 - o["quantile"]) * (len(ts) - 1)), 0, len(ts) - 1))]
        ell, beta = o["ell"] or pm["ell"], pm["beta"] if o["id_slope"] is None else o["id_slope"]
        leak = beta * beta * pm["id"]["item_var"] / pm["id"]["items"]
        return (
            {"signal_var": t["signal_var"], "item_var": t["item_var"], "leak": leak, "ell": ell},
            f"pilot: {pm['n_runs']} runs, {pm['n_pairs']} testset pairs, {min(x['items'] for x in ts)}+ items",
        )
    if not 0 < o["accuracy"] < 1:
        raise UserError(f"plan: --accuracy must be in (0, 1), got {o['accuracy']}")
    v = o["accuracy"] * (1 - o["accuracy"])
    if o["pilot_reliability"] is not None:
        if not o["pilot_items"] or not 0 < o["pilot_reliability"] < 1:
            raise UserError("plan: --pilot-reliability needs --pilot-items and a value in (0, 1)")
        S = o["pilot_reliability"] / (1 - o["pilot_reliability"]) * v / o["pilot_items"]
        source = f"assumed: accuracy {o['accuracy']}, reliability {o['pilot_reliability']} at {o['pilot_items']} items"
    else:
        if not (math.isfinite(o["residual_sd"]) and o["residual_sd"] > 0):
            raise UserError(f"plan: --residual-sd must be > 0, got {o['residual_sd']}")
        S = o["residual_sd"] ** 2
        source = f"assumed: accuracy {o['accuracy']}, residual SD {o['residual_sd']}"
    # the ID testset's noise leaks into both residuals only where it is stated (--id-item-sd, at --max-items)
    leak = beta * beta * o["id_item_sd"] ** 2 / o["max_items"] if o["id_item_sd"] else 0.0
    return {"signal_var": S, "item_var": v, "leak": leak, "ell": ell}, source


def _hours(study, o, examples: int) -> tuple[float | None, float | None, str]:
    """(hours, examples/s, where from) at the stated rate, else the measured one of every model the hours are for;
    (None, None, why) where one is unknown."""
    from oodcorr.planner.rates import scoring_rate

    if o["examples_per_s"] is not None:
        if not (math.isfinite(o["examples_per_s"]) and o["examples_per_s"] > 0):
            raise UserError(f"plan: --examples-per-s must be a finite rate > 0, got {o['examples_per_s']}")
        return examples / o["examples_per_s"] / 3600, o["examples_per_s"], ""
    models = list(o["models"]) or study.models or [None]
    got = [(m, *scoring_rate(study.root, m, o["dtype"] or study.dtype, measure=False)) for m in models]
    missing = [(m, why) for m, eps, why in got if eps is None]
    if missing:
        m, why = missing[0]
        return (
            None,
            None,
            (
                f"unknown for {m or 'an unnamed model (--model)'}: {why}; `oodcorr plan --budget H` "
                "measures it here (a few minutes per model), or pass --examples-per-s"
            ),
        )
    secs = sum(examples / len(got) / eps for _, eps, _ in got)
    eps = examples / secs
    return secs / 3600, eps, "; ".join(f"{m}: {where}" for m, _, where in got)


@click.command("plan", epilog=HELP_SECTIONS)
@plan_options
def plan_cmd(pilot, params_file, models, as_json, details, **o):
    """What to run for partial correlations that are signal, not testset noise: with --budget HOURS, the seeds x
    checkpoints x items that settle the most pairs within that compute, how long it takes and what it can show;
    with --detect-r R, the checkpoints per testset size that find |r| = R; else the checkpoints and items for a
    target interval width. Planned with the interval, reliability gate and settings the study's verdicts use."""
    from oodcorr.planner.study import load_study

    study = load_study(params_file)
    o["models"] = models
    if o["budget"] is not None:
        from oodcorr.planner.budget_cmd import run_budget

        return run_budget(pilot, study, as_json, details, **o)
    s = study.settings
    for key in ("seeds", "testsets", "runs"):
        if o[key] < 1:
            raise UserError(f"plan: --{key} must be >= 1, got {o[key]}")
    inputs, source = _pair_inputs(pilot, o)
    args = (inputs["signal_var"], inputs["item_var"], inputs["leak"], inputs["ell"])
    if o["detect_r"] is not None:
        return _power_mode(o, s, inputs, source, args, as_json, details)
    return _half_width_mode(study, o, s, source, args, as_json, details)


def _power_mode(o: dict, s, inputs: dict, source: str, args: tuple, as_json: bool, details: bool) -> None:
    """--detect-r R: the checkpoints per testset size that find |partial r| = R (modes.power_rows)."""
    from oodcorr.planner.modes import ITEM_COUNTS, power_rows

    rows = power_rows(
        *args,
        o["detect_r"],
        o["target_power"],
        o["seeds"],
        tuple(o["item_counts"]) or ITEM_COUNTS,
        o["reliability_product"],
        s.alpha,
        s.reliability_min,
    )
    if as_json:
        click.echo(
            json.dumps(
                {
                    "source": source,
                    "detect_r": o["detect_r"],
                    "power": o["target_power"],
                    "seeds": o["seeds"],
                    **inputs,
                    "reliability_min": s.reliability_min,
                    "rows": rows,
                },
                indent=2,
            )
        )
        return
    click.echo(
        f"plan: checkpoints per run to find |partial r| = {abs(o['detect_r'])} with power "
        f"{o['target_power']} ({o['seeds']} seed(s); {source}; reliability gate {s.reliability_min:g})"
    )
    for row in rows:
        click.echo(_power_row_text(row, o, s))
    if details:
        click.echo(
            f"  details: signal var {args[0]:.3g}, per-item noise var {args[1]:.3g}, ID leak {args[2]:.3g},"
            f" length-scale {args[3]:.2f}"
        )


def _power_row_text(row: dict, o: dict, s) -> str:
    """One testset size's line: the checkpoints that reach the power, or what would reach it."""
    from oodcorr.planner.modes import MAX_CHECKPOINTS, MAX_PLAN_SEEDS

    what = f"{row['items']:>6} items" if row["items"] is not None else "stated product"
    if row["checkpoints"] is not None:
        return (
            f"  {what}: {row['checkpoints']} checkpoints (power {row['power']:.2f}, reliability "
            f"{row['reliability']:.2f})"
        )
    at = row["seeds_at"]
    more = (
        f"{at['seeds']} seeds at {at['checkpoints']} checkpoints reach it"
        if at["seeds"]
        else f"not with <= {MAX_PLAN_SEEDS} seeds at {at['checkpoints']} checkpoints either"
    )
    return (
        f"  {what}: reliability {row['reliability']:.2f} (gate {s.reliability_min:g}); not "
        f"reachable with <= {MAX_CHECKPOINTS} checkpoints at {o['seeds']} seed(s); {more}"
    )


def _half_width_mode(study, o: dict, s, source: str, args: tuple, as_json: bool, details: bool) -> None:
    """Neither --budget nor --detect-r: the checkpoints and items for a target interval half-width and reliability
    (modes.half_width_plan), its compute and its hours."""
    from oodcorr.planner.modes import half_width_plan

    out = half_width_plan(*args, o["half_width"], o["target_rel"], o["seeds"], o["r0"], s.alpha, s.reliability_min)
    per_run = out["items_per_testset"] * out["checkpoints_per_run"] * o["testsets"]
    out.update(
        testsets=o["testsets"],
        runs=o["runs"],
        examples_per_run=per_run,
        examples_total=per_run * o["runs"],
        source=source,
        signal_var=args[0],
        noise_var_item=args[1],
        ell=args[3],
    )
    hours, eps, where = _hours(study, o, per_run * o["runs"])
    out.update(hours_total=hours, examples_per_s=eps)
    if hours is None:
        out["hours_note"] = where
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    _print_half_width(out, o, source, args, per_run, (hours, eps, where), details)


def _print_half_width(out: dict, o: dict, source: str, args: tuple, per_run: int, at: tuple, details: bool) -> None:
    hours, eps, where = at
    more = f" (more than the {o['seeds']} asked: checkpoints alone cannot)" if out["seeds"] > o["seeds"] else ""
    click.echo(
        f"plan: {out['seeds']} seed(s){more} x {out['checkpoints_per_run']} checkpoints per run, "
        f"{out['items_per_testset']} items per testset ({source})"
    )
    click.echo(
        f"  it can show: an interval on partial r of half-width {out['expected_half_width']:.3f} <= "
        f"{o['half_width']} at r = {o['r0']}, every residual at reliability >= {o['target_rel']}"
    )
    click.echo(
        f"  compute              : {out['items_per_testset']} x {out['checkpoints_per_run']} x "
        f"{o['testsets']} = {per_run:,} examples per run; x {o['runs']} runs = {per_run * o['runs']:,}"
    )
    if hours is not None:
        click.echo(
            f"  time                 : {hours:.1f} h at {eps:.3g} examples/s"
            + (f" (measured: {where})" if where else "")
        )
    else:
        click.echo(f"  time                 : {where}")
    if details:
        click.echo(
            f"  details: signal var {args[0]:.3g}, per-item noise var {args[1]:.3g}, ID leak {args[2]:.3g}, "
            f"length-scale {args[3]:.2f}; power {out['power']:.2f} at |r| = {o['r0']}"
        )
