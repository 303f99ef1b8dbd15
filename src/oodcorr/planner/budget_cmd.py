"""`oodcorr plan --budget HOURS`: the command's checks, its rates (this machine's or stated), the search at the
study's settings, and the params.yaml fragment (never below the power asked for); the model's inputs (a pilot or
stated values) are budget_inputs.py's, the printout report.py's, the model and the search budget.py's."""

from __future__ import annotations

import json
import math
from pathlib import Path

import click

from oodcorr.core.errors import UserError
from oodcorr.planner.budget import CHECKPOINTS, MAX_SEEDS, one_thread, prediction_caveat, search
from oodcorr.planner.budget_inputs import budget_inputs
from oodcorr.planner.fragment import _describe, params_fragment, required_budget_text


def check_inputs(o: dict) -> None:
    """Every number the budget mode takes, checked before any work: one line naming the option."""
    from oodcorr.planner.options import MAX_SIMULATE

    b = o["budget"]
    if not (isinstance(b, float) and math.isfinite(b) and b > 0):
        raise UserError(f"plan: --budget must be a finite number of hours > 0, got {b}")
    if not 0 <= o["trained_seeds"] <= MAX_SEEDS:
        raise UserError(
            f"plan: --trained-seeds {o['trained_seeds']}: must be in 0..{MAX_SEEDS} (the planner's cap "
            f"of {MAX_SEEDS} seeds per family)"
        )
    if not 0 <= o["simulate"] <= MAX_SIMULATE:
        raise UserError(
            f"plan: --simulate {o['simulate']}: must be in 0..{MAX_SIMULATE} simulated studies (each "
            "takes about a second; 100 measures the power to about 0.05)"
        )
    if o["train_hours"] is not None and not (math.isfinite(o["train_hours"]) and o["train_hours"] >= 0):
        raise UserError(f"plan: --train-hours must be a finite number of hours >= 0, got {o['train_hours']}")
    if o["examples_per_s"] is not None and not (math.isfinite(o["examples_per_s"]) and o["examples_per_s"] > 0):
        raise UserError(f"plan: --examples-per-s must be a finite rate > 0, got {o['examples_per_s']}")
    if o["train_steps"] is not None and o["train_steps"] < 1:
        raise UserError(f"plan: --train-steps must be >= 1, got {o['train_steps']}")
    if o["margin"] is not None and not 0 < o["margin"] < 1:
        raise UserError(f"plan: --margin must be in (0, 1), got {o['margin']}")
    if o["families"] is not None and o["families"] < 1:
        raise UserError(f"plan: --families must be >= 1, got {o['families']}")
    if not 0 < o["target_power"] < 1:
        raise UserError(f"plan: --power must be in (0, 1), got {o['target_power']}")
    if o["max_items"] < 1:
        raise UserError(f"plan: --max-items must be >= 1, got {o['max_items']}")
    for key in ("ell", "signal_sd", "item_sd", "id_item_sd", "id_slope"):
        v = o[key]
        if v is not None and not (math.isfinite(v) and (v >= 0 if key == "id_slope" else v > 0)):
            raise UserError(f"plan: --{key.replace('_', '-')} must be a finite number > 0, got {v}")


def run_budget(pilot, study, as_json: bool, details: bool, **o) -> None:
    """`oodcorr plan --budget`: inputs, search, printout, fragment (module notes). One model prices every run: its
    rates on this machine, or --examples-per-s and --train-hours."""
    from oodcorr.planner.report import print_budget

    check_inputs(o)
    models = list(dict.fromkeys(o["models"] or study.models))
    o["model_names"] = models
    o["model_name"] = models[0] if models else None
    s = study.settings
    margin = o["margin"] if o["margin"] is not None else s.equivalence
    with one_thread():
        model, families, model_name, where, pm = budget_inputs(o, pilot, study)
    priced = list(dict.fromkeys(o["models"])) or (sorted({f[0] for f in families}) if pm else models) or [model_name]
    rates = _rates(study, o, priced)
    n_fam = o["families"] or len(families)
    res, rel = _search(model, o, rates, n_fam, margin, s)
    best = res["best"]
    _assess(best, model, res, o, n_fam, margin, s)
    ctx = {
        "budget": o["budget"],
        "source": where,
        "rates": rates,
        "families": n_fam,
        "margin": margin,
        "model_name": ", ".join(priced),
        "trained_seeds": o["trained_seeds"],
        "settings": s,
        "study": study.path,
        "pilot": pm,
        "write_params": o["write_params"],
        "need": required_budget_text(res),
    }
    _refuse_unwritable(o, best, ctx)
    if as_json:
        click.echo(_json_text(o, where, rates, n_fam, res, best, margin, s, study))
    else:
        print_budget(ctx, res, rel, best, details)
    if o["write_params"]:
        _write_fragment(o, best, res, model, families, n_fam, margin, pilot, study)
        if not as_json:
            click.echo(f"  params fragment written: {o['write_params']}")


def _rates(study, o: dict, priced: list) -> dict:
    """The rates every run is priced at: the one priced model's, else a family's run at each model's rates (their
    mean time per run)."""
    from oodcorr.planner.rates import rates_for

    each = [
        rates_for(
            study.root,
            m,
            o["dtype"] or study.dtype,
            o["examples_per_s"],
            o["train_hours"],
            o["train_steps"] or study.train_steps,
            say=(lambda m: click.echo(m, err=True)),
        )
        for m in priced
    ]
    if len(each) == 1:
        return each[0]
    return {
        "dtype": each[0]["dtype"],
        "examples_per_s": len(each) / sum(1 / r["examples_per_s"] for r in each),
        "train_h": sum(r["train_h"] for r in each) / len(each),
        "eval_source": "mean over "
        + ", ".join(f"{m} {r['examples_per_s']:.3g}/s" for m, r in zip(priced, each))
        + f"; {_where(each, 'eval_source')}",
        "train_source": "mean over "
        + ", ".join(f"{m} {r['train_h']:.3g} h" for m, r in zip(priced, each))
        + f"; {_where(each, 'train_source')}",
    }


def _search(model: dict, o: dict, rates: dict, n_fam: int, margin: float, s) -> tuple[dict, str]:
    """budget.search at these rates and the study's settings, and the full-size reliabilities as a line; refused
    (one line) where fewer than two OOD testsets could settle a pair."""
    cost = {
        "families": n_fam,
        "train_h": rates["train_h"],
        "examples_per_s": rates["examples_per_s"],
        "trained_seeds": o["trained_seeds"],
    }
    res = search(
        model,
        o["budget"],
        cost,
        margin,
        s.alpha,
        target=o["target_power"],
        r=o["target_r"],
        checkpoints=tuple(sorted(set(o["checkpoint_counts"]))) or CHECKPOINTS,
        floor=s.reliability_min,
    )
    rel = ", ".join(f"{k} {v:.2f}" for k, v in sorted(res["reliability_full"].items()))
    if len(res["kept"]) < 2:
        raise UserError(
            f"plan --budget: fewer than two OOD testsets reach reliability {s.reliability_min:g} (the "
            f"study's analyze.reliability_min) at their full size ({rel}), so no pair can be settled; "
            "more items or testsets with more signal"
        )
    return res, rel


def _assess(best, model: dict, res: dict, o: dict, n_fam: int, margin: float, s) -> None:
    """The best design's expected settled pairs, and its simulated power (--simulate) or else its caveat."""
    from oodcorr.planner.settle import expected_settled

    if best:
        best["settled"] = expected_settled(
            model, best, res["kept"], n_fam, margin, s.alpha, o["target_r"], s.reliability_min
        )
    if best and o["simulate"]:
        best["simulated"] = _simulated(model, best, margin, o["simulate"], o["target_r"], s.alpha, s.reliability_min)
    elif best:
        best["caveat"] = prediction_caveat(best, model["ell"])


def _refuse_unwritable(o: dict, best, ctx: dict) -> None:
    """--write-params with no design, or one below --power: refused before any printout, nothing written."""
    if o["write_params"] and not best:
        raise UserError(
            f"plan: not written to {o['write_params']}: no design fits within {o['budget']:g} h; {ctx['need']}"
        )
    if o["write_params"] and best["power"] < o["target_power"]:
        raise UserError(
            f"plan: not written to {o['write_params']}: this budget buys power {best['power']:.2f} "
            f"< --power {o['target_power']:g}; {ctx['need']}"
        )


def _json_text(o: dict, where: str, rates: dict, n_fam: int, res: dict, best, margin: float, s, study) -> str:
    return json.dumps(
        {
            "budget_h": o["budget"],
            "source": where,
            "rates": rates,
            "families": n_fam,
            "reliability_full_size": res["reliability_full"],
            "kept": res["kept"],
            "dropped": res["dropped"],
            "design": best,
            "by_checkpoints": res["by_checkpoints"],
            "reach": res["reach"],
            "reach_both": res["reach_both"],
            "margin": margin,
            "alpha": s.alpha,
            "reliability_min": s.reliability_min,
            "study": study.path,
            "target_power": res["target_power"],
            "target_r": res["target_r"],
        },
        indent=2,
        default=float,
    )


def _write_fragment(o: dict, best: dict, res: dict, model: dict, families: list, n_fam, margin, pilot, study) -> None:
    """The design as a params.yaml fragment at --write-params, under a header saying what it buys."""
    from oodcorr.core.io import write_text
    from oodcorr.planner.report import simulated_text

    header = [
        f"oodcorr plan --budget {o['budget']:g}: {_describe(best)}, {n_fam} run(s) per seed: {best['hours']:.1f} h",
        f"expected power {best['power']:.2f} at |r| = {res['target_r']:g} (median reliable pair), "
        f"{best['null_power']:.2f} for a consistent null at +/-{margin:g}",
    ]
    if "simulated" in best:
        header.append(simulated_text(best["simulated"], margin, res["target_r"]))
    elif best["caveat"]:
        header.append(best["caveat"])
    if n_fam > len(families):
        header.append(f"the runs below cover {len(families)} of the {n_fam} runs per seed: add the others alike")
    text = params_fragment(
        best,
        families[:n_fam],
        model["id"]["name"],
        res["kept"] if pilot else None,
        header,
        o["train_steps"] or study.train_steps,
        model["recipes"],
    )
    write_text(Path(o["write_params"]), text)


def _where(each: list[dict], key: str) -> str:
    """Where several models' rates come from, said once where they share it (the file before the first colon)."""
    return "; ".join(dict.fromkeys(r[key].split(": ")[0] for r in each))


def _simulated(model: dict, best: dict, margin: float, reps: int, r: float, alpha: float, floor: float) -> dict:
    """The design's power and consistent-null rate measured on `reps` simulated studies each (simulate.py)."""
    from oodcorr.planner.simulate import simulate_design

    t = model["ood"][best["median_testset"]]
    f = next((f for f in t.get("families") or [] if f.get("name") == best.get("median_family")), t)  # the weakest
    args = (
        best["checkpoints"],
        best["seeds"],
        f["item_var"] / min(best["ood_items"], t["size"]),
        model["id"]["item_var"] / best["id_items"],
        f["signal_var"],
        model["ell"],
        model["beta"],
    )
    power, null = (
        simulate_design(*args, rho, margin, reps, seed=i, alpha=alpha, floor=floor, progress=True)
        for i, rho in enumerate((r, 0.0))
    )
    return {
        "power": power["excludes_0"],
        "power_se": power["se"],
        "null_power": null["consistent_null"],
        "false_exclusion": null["excludes_0"],
        "gated": (power["gated"] + null["gated"]) / (2 * reps),
        "reps": reps,
    }
