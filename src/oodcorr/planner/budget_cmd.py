"""`oodcorr plan --budget HOURS`: the command's inputs (a pilot or stated values, the study's settings, this
machine's rates), the search, and the params.yaml fragment (never below the power asked for); the printout is
report.py's. The model and the search are budget.py's."""

from __future__ import annotations

import json
import math
from pathlib import Path

import click

from oodcorr.core.errors import UserError
from oodcorr.planner.budget import CHECKPOINTS, MAX_SEEDS, one_thread, prediction_caveat, search
from oodcorr.planner.fragment import _describe, params_fragment, required_budget_text

DEFAULTS = {"ell": 0.4, "signal_sd": 0.02, "item_sd": 0.5, "id_slope": 0.5, "model": "smollm2-135m", "ood_testsets": 7}


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


def _sizes(sizes) -> dict:
    out = {}
    for text in sizes:
        name, _, n = text.partition("=")
        if not name or not n.isdigit() or int(n) < 1:
            raise UserError(f"plan: --size {text!r}: expected NAME=ITEMS with ITEMS >= 1")
        out[name] = int(n)
    return out


def _inputs(o: dict, pilot, study) -> tuple[dict, list, str, str, dict | None]:
    """(model for search, families for the fragment, model name, a line saying where the numbers come from, the
    pilot's model or None)."""
    from oodcorr.planner.pilot import pilot_model
    from oodcorr.stats.metrics import DEFAULT_METRIC

    sizes = _sizes(o["sizes"])
    sq = lambda v: None if v is None else v * v  # noqa: E731
    pm = None
    if pilot:
        pm = pilot_model(pilot, DEFAULT_METRIC)
        ood = {
            name: {
                "signal_var": sq(o["signal_sd"]) or t["signal_var"],
                "item_var": sq(o["item_sd"]) or t["item_var"],
                "size": sizes.get(name) or max(study.available(name, o["max_items"]), t["items"]),
                # each family's own variances, for the reliability floor, unless stated values override them
                "families": t["families"] if o["signal_sd"] is None and o["item_sd"] is None else None,
            }
            for name, t in pm["ood"].items()
        }
        id_name = pm["id"]["name"]
        idt = {
            "item_var": sq(o["id_item_sd"]) or pm["id"]["item_var"],
            "size": sizes.get(id_name) or max(study.available(id_name, o["max_items"]), pm["id"]["items"]),
        }
        ell, beta, families = (
            o["ell"] or pm["ell"],
            pm["beta"] if o["id_slope"] is None else o["id_slope"],
            pm["families"],
        )
        where = (
            f"pilot: {pm['n_runs']} runs, {pm['n_pairs']} testset pairs; length-scale {ell:.2f}, slope on ID {beta:.2f}"
        )
    else:
        stated = [key for key in ("ell", "signal_sd", "item_sd", "id_slope") if o[key] is not None]
        for key in ("ell", "signal_sd", "item_sd", "id_slope"):
            o[key] = DEFAULTS[key] if o[key] is None else o[key]
        if o["ood_testsets"] is None:
            o["ood_testsets"] = study.ood_testsets or DEFAULTS["ood_testsets"]
        if o["ood_testsets"] < 2:
            raise UserError(f"plan: --ood-testsets must be >= 2, got {o['ood_testsets']}")
        ood = {
            f"ood{j + 1}": {
                "signal_var": o["signal_sd"] ** 2,
                "item_var": o["item_sd"] ** 2,
                "size": sizes.get(f"ood{j + 1}", o["max_items"]),
            }
            for j in range(o["ood_testsets"])
        }
        id_name = o["id_testset"]
        idt = {"item_var": (o["id_item_sd"] or o["item_sd"]) ** 2, "size": sizes.get(id_name, o["max_items"])}
        ell, beta = o["ell"], o["id_slope"]
        families = [(m, o["train_set"], id_name, o["shots"]) for m in o["model_names"] or [DEFAULTS["model"]]]
        said = "stated values" if stated else "assumed values (none stated: --signal-sd, --item-sd, --ell, --id-slope)"
        where = (
            f"{said}; {o['ood_testsets']} OOD testsets, length-scale {ell:g}, signal SD {o['signal_sd']:g}, item SD "
            f"{o['item_sd']:g}, slope on ID {beta:g}"
        )
    model = {
        "ood": ood,
        "id": {"name": id_name, **idt},
        "ell": ell,
        "beta": beta,
        "recipes": pm.get("recipes", {}) if pilot else {},
    }
    return model, families, o["model_name"] or families[0][0], where, pm


def run_budget(pilot, study, as_json: bool, details: bool, **o) -> None:
    """`oodcorr plan --budget`: inputs, search, printout, fragment (module notes). One model prices every run: its
    rates on this machine, or --examples-per-s and --train-hours."""
    from oodcorr.planner.rates import rates_for
    from oodcorr.planner.report import print_budget, simulated_text
    from oodcorr.planner.settle import expected_settled

    check_inputs(o)
    models = list(dict.fromkeys(o["models"] or study.models))
    o["model_names"] = models
    o["model_name"] = models[0] if models else None
    s = study.settings
    margin = o["margin"] if o["margin"] is not None else s.equivalence
    with one_thread():
        model, families, model_name, where, pm = _inputs(o, pilot, study)
    priced = list(dict.fromkeys(o["models"])) or (sorted({f[0] for f in families}) if pm else models) or [model_name]
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
    rates = (
        each[0]
        if len(each) == 1
        else {  # a family's run at each model's rates: their mean time per run
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
    )
    n_fam = o["families"] or len(families)
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
    best = res["best"]
    if best:
        best["settled"] = expected_settled(
            model, best, res["kept"], n_fam, margin, s.alpha, o["target_r"], s.reliability_min
        )
    if best and o["simulate"]:
        best["simulated"] = _simulated(model, best, margin, o["simulate"], o["target_r"], s.alpha, s.reliability_min)
    elif best:
        best["caveat"] = prediction_caveat(best, model["ell"])
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
    if o["write_params"] and not best:  # refused before any printout: one line, nothing written
        raise UserError(
            f"plan: not written to {o['write_params']}: no design fits within {o['budget']:g} h; {ctx['need']}"
        )
    if o["write_params"] and best["power"] < o["target_power"]:
        raise UserError(
            f"plan: not written to {o['write_params']}: this budget buys power {best['power']:.2f} "
            f"< --power {o['target_power']:g}; {ctx['need']}"
        )
    if as_json:
        click.echo(
            json.dumps(
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
        )
    else:
        print_budget(ctx, res, rel, best, details)
    if o["write_params"]:
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
        from oodcorr.core.io import write_text

        write_text(Path(o["write_params"]), text)
        if not as_json:
            click.echo(f"  params fragment written: {o['write_params']}")


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
