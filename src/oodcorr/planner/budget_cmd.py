"""`oodcorr plan --budget HOURS`: the command's inputs (a pilot or stated values, measured rates), its printout
and its params.yaml fragment; the model and the search are in plan_budget.py."""

from __future__ import annotations

import json
from pathlib import Path

import click

from oodcorr.errors import UserError
from oodcorr.planner.budget import (
    CHECKPOINTS,
    MAX_SEEDS,
    RELIABILITY_FLOOR,
    TARGET_R,
    _describe,
    _hours,
    one_thread,
    params_fragment,
    prediction_caveat,
    required_budget_text,
    search,
)

DEFAULTS = {"ell": 0.4, "signal_sd": 0.02, "item_sd": 0.5, "id_slope": 0.5, "model": "smollm2-135m"}
def budget_options(f):
    """The options of `oodcorr plan --budget` (beside plan's own --pilot, --examples-per-s and --json)."""
    opts = [
        click.option("--budget", type=float, default=None,
                     help="Budget mode: hours of compute; chooses seeds x checkpoints x items for power at "
                          "|r| = --target-r."),
        click.option("--families", type=int, default=None,
                     help="Budget: runs per seed (model families x setups); default: the pilot's, else 1."),
        click.option("--dtype", default=None, help="Budget: the scoring dtype of the measured throughput."),
        click.option("--train-hours", type=float, default=None,
                     help="Budget: training hours per run (default: measured step time x --train-steps)."),
        click.option("--train-steps", type=int, default=None,
                     help="Budget: training steps per run (default: the measured run's)."),
        click.option("--ell", type=float, default=None,
                     help="Budget: length-scale of the residual trajectories over training progress in [0, 1], in the "
                          "interval's kernel (Matern 3/2; default: the pilot's, else 0.4: smooth)."),
        click.option("--signal-sd", type=float, default=None,
                     help="Budget: SD of each OOD residual trajectory's noise-free signal (default: the pilot's, "
                          "else 0.02)."),
        click.option("--item-sd", type=float, default=None,
                     help="Budget: per-item SD of an OOD testset's score (default: the pilot's, else 0.5)."),
        click.option("--id-item-sd", type=float, default=None, help="Budget: per-item SD of the ID testset's score."),
        click.option("--id-slope", type=float, default=None,
                     help="Budget: slope of the OOD series on ID (carries ID item noise; default: pilot's, else 0.5)."),
        click.option("--ood-testsets", type=int, default=7, show_default=True,
                     help="Budget without a pilot: number of OOD testsets."),
        click.option("--max-items", type=int, default=4096, show_default=True,
                     help="Budget: a testset's size (items available) unless --size names it."),
        click.option("--size", "sizes", multiple=True, help="Budget: NAME=ITEMS, a testset's size."),
        click.option("--margin", type=float, default=0.3, show_default=True,
                     help="Budget: margin of a consistent null (both interval ends inside +/- margin)."),
        click.option("--id-testset", default="mnli_real", show_default=True,
                     help="Budget without a pilot: the ID testset named in the params fragment."),
        click.option("--train-set", default="mnli_real_train", show_default=True,
                     help="Budget without a pilot: the training set named in the params fragment."),
        click.option("--shots", type=int, default=1024, show_default=True,
                     help="Budget without a pilot: shots named in the params fragment."),
        click.option("--write-params", type=click.Path(dir_okay=False), default=None,
                     help="Budget: write the design as a params.yaml fragment to this file."),
        click.option("--checkpoints", "checkpoint_counts", type=click.IntRange(3), multiple=True,
                     help="Budget: checkpoint counts per run to choose from (repeatable; default: "
                          + ", ".join(map(str, CHECKPOINTS)) + ")."),
        click.option("--target-r", type=click.FloatRange(0.05, 0.95), default=TARGET_R, show_default=True,
                     help="Budget: the |r| the design is powered for (the noise-free partial correlation)."),
        click.option("--trained-seeds", type=click.IntRange(0), default=0, show_default=True,
                     help="Budget: seeds per family whose runs are already trained (extending a study; give "
                          "--checkpoints as they were trained): they cost their scoring only."),
        click.option("--simulate", type=click.IntRange(0), default=0, show_default=True,
                     help="Budget: measure the chosen design's power on this many simulated studies analysed with "
                          "the interval (minutes: 100 is about 0.05 precise); 0: the prediction only."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _sizes(sizes) -> dict:
    out = {}
    for text in sizes:
        name, _, n = text.partition("=")
        if not name or not n.isdigit() or int(n) < 1:
            raise UserError(f"plan: --size {text!r}: expected NAME=ITEMS with ITEMS >= 1")
        out[name] = int(n)
    return out


def _available(name: str, default: int) -> int:
    """Rows of a testset's local file (the items a study can score), else `default`."""
    from oodcorr.settings.config import find_project_root, load_params
    from oodcorr.settings.registry import resolve

    try:
        root = find_project_root()
        spec = resolve(load_params(root / "params.yaml") if (root / "params.yaml").exists() else {}, name)
        path = root / spec["path"] if spec.get("kind") == "local" else None
        return sum(1 for line in path.open() if line.strip()) if path and path.is_file() else default
    except (UserError, OSError, KeyError, TypeError):
        return default


def _inputs(o: dict, pilot) -> tuple[dict, list, str, str]:
    """(model for search, families for the fragment, model name, a line saying where the numbers come from)."""
    from oodcorr.metrics import DEFAULT_METRIC
    from oodcorr.planner.pilot import pilot_model

    sizes = _sizes(o["sizes"])
    sq = lambda v: None if v is None else v * v  # noqa: E731
    if pilot:
        pm = pilot_model(pilot, DEFAULT_METRIC)
        ood = {name: {"signal_var": sq(o["signal_sd"]) or t["signal_var"],
                      "item_var": sq(o["item_sd"]) or t["item_var"],
                      "size": sizes.get(name) or max(_available(name, o["max_items"]), t["items"]),
                      # each family's own variances, for the reliability floor, unless stated values override them
                      "families": t["families"] if o["signal_sd"] is None and o["item_sd"] is None else None}
               for name, t in pm["ood"].items()}
        id_name = pm["id"]["name"]
        idt = {"item_var": sq(o["id_item_sd"]) or pm["id"]["item_var"],
               "size": sizes.get(id_name) or max(_available(id_name, o["max_items"]), pm["id"]["items"])}
        ell, beta, families = o["ell"] or pm["ell"], pm["beta"] if o["id_slope"] is None else o["id_slope"], \
            pm["families"]
        where = (f"pilot: {pm['n_runs']} runs, {pm['n_pairs']} testset pairs; length-scale {ell:.2f}, slope on ID "
                 f"{beta:.2f}")
    else:
        for key in ("ell", "signal_sd", "item_sd", "id_slope"):
            o[key] = DEFAULTS[key] if o[key] is None else o[key]
        if o["ell"] <= 0 or o["signal_sd"] <= 0 or o["item_sd"] <= 0 or o["ood_testsets"] < 2:
            raise UserError("plan: --ell, --signal-sd and --item-sd must be > 0 and --ood-testsets >= 2")
        ood = {f"ood{j + 1}": {"signal_var": o["signal_sd"] ** 2, "item_var": o["item_sd"] ** 2,
                               "size": sizes.get(f"ood{j + 1}", o["max_items"])} for j in range(o["ood_testsets"])}
        id_name = o["id_testset"]
        idt = {"item_var": (o["id_item_sd"] or o["item_sd"]) ** 2, "size": sizes.get(id_name, o["max_items"])}
        ell, beta = o["ell"], o["id_slope"]
        families = [(o["model_name"] or DEFAULTS["model"], o["train_set"], id_name, o["shots"])]
        where = (f"stated: length-scale {ell:g}, signal SD {o['signal_sd']:g}, item SD {o['item_sd']:g}, slope on "
                 f"ID {beta:g}")
    model = {"ood": ood, "id": {"name": id_name, **idt}, "ell": ell, "beta": beta,
             "recipes": pm.get("recipes", {}) if pilot else {}}
    return model, families, o["model_name"] or families[0][0], where


def run_budget(pilot, examples_per_s, models, target_power, as_json, **o) -> None:
    """`oodcorr plan --budget`: inputs, search, printout, fragment (module notes). `models`: plan's --model (one
    model prices every run: its measured rates, or --examples-per-s and --train-hours)."""
    from oodcorr.planner.pilot import EVAL_RATES, TRAIN_RATES, measured_rates
    from oodcorr.settings.config import find_project_root

    budget = o["budget"]
    if len(models) > 1:
        raise UserError("plan --budget: one --model prices the runs (its measured rates); give one")
    o["model_name"] = models[0] if models else None
    if not budget > 0 or not 0 < o["margin"] < 1 or (o["families"] is not None and o["families"] < 1):
        raise UserError("plan: --budget must be > 0 hours, --margin in (0, 1) and --families >= 1")
    with one_thread():
        model, families, model_name, where = _inputs(o, pilot)
    rates = measured_rates(find_project_root(), model_name, o["dtype"])
    eps = examples_per_s or rates["examples_per_s"]
    at = f" at {o['dtype']}" if o["dtype"] else ""
    if not eps:
        raise UserError(f"plan --budget: no measured scoring throughput for {model_name}{at} on this machine "
                        f"({EVAL_RATES}); pass --examples-per-s (score a few checkpoints and divide)")
    if o["train_hours"] is None and not rates["step_s"]:
        raise UserError(f"plan --budget: no measured training step time for {model_name}{at} ({TRAIN_RATES}); pass "
                        "--train-hours (per run)")
    train_h = o["train_hours"] if o["train_hours"] is not None else \
        rates["step_s"] * (o["train_steps"] or rates["steps"]) / 3600
    n_fam = o["families"] or len(families)
    cost = {"families": n_fam, "train_h": train_h, "examples_per_s": eps, "trained_seeds": o["trained_seeds"]}
    if not 0 < target_power < 1:
        raise UserError(f"plan: --power must be in (0, 1), got {target_power}")
    res = search(model, budget, cost, o["margin"], target=target_power, r=o["target_r"],
                 checkpoints=tuple(sorted(set(o["checkpoint_counts"]))) or CHECKPOINTS)
    rel = ", ".join(f"{k} {v:.2f}" for k, v in sorted(res["reliability_full"].items()))
    if len(res["kept"]) < 2:
        raise UserError(f"plan --budget: fewer than two OOD testsets reach reliability {RELIABILITY_FLOOR} at their "
                        f"full size ({rel}), so no pair can be settled; more items or testsets with more signal")
    best = res["best"]
    if best and o["simulate"]:
        best["simulated"] = _simulated(model, best, o["margin"], o["simulate"], o["target_r"])
    elif best:
        best["caveat"] = prediction_caveat(best, model["ell"])
    need = required_budget_text(res)
    rates_line = (f"scoring {eps:.3g} examples/s ({'stated' if examples_per_s else rates['eval_source']}); training "
                  f"{train_h:.3g} h per run ({'stated' if o['train_hours'] is not None else rates['train_source']})"
                  + (f"; {o['trained_seeds']} seed(s) per family already trained" if o["trained_seeds"] else ""))
    if as_json:
        click.echo(json.dumps({"budget_h": budget, "source": where, "rates": rates_line, "families": n_fam,
                               "reliability_full_size": res["reliability_full"], "kept": res["kept"],
                               "dropped": res["dropped"], "design": best, "by_checkpoints": res["by_checkpoints"],
                               "reach": res["reach"], "reach_both": res["reach_both"], "margin": o["margin"],
                               "target_power": res["target_power"], "target_r": res["target_r"]},
                              indent=2))
    else:
        _print(budget, where, rates_line, n_fam, res, rel, best, need, o["margin"])
    if o["write_params"] and best:
        ood_names = res["kept"] if pilot else None
        header = [f"oodcorr plan --budget {budget:g}: {_describe(best)}, {n_fam} run(s) per seed: "
                  f"{best['hours']:.1f} h",
                  f"expected power {best['power']:.2f} at |r| = {res['target_r']:g} (median reliable pair), "
                  f"{best['null_power']:.2f} for a consistent null at +/-{o['margin']:g}"]
        if "simulated" in best:
            header.append(_simulated_text(best["simulated"], o["margin"], res["target_r"]))
        elif best["caveat"]:
            header.append(best["caveat"])
        if n_fam > len(families):
            header.append(f"the runs below cover {len(families)} of the {n_fam} runs per seed: add the others alike")
        text = params_fragment(best, families[:n_fam], model["id"]["name"], ood_names, header,  # the runs priced
                               o["train_steps"] or rates["steps"], model["recipes"])
        Path(o["write_params"]).write_text(text)
        if not as_json:
            click.echo(f"  params fragment     : {o['write_params']}")


def _print(budget, where, rates_line, n_fam, res, rel, best, need, margin) -> None:
    click.echo(f"plan --budget {budget:g} h ({where}; {rates_line})")
    dropped = f"; left out: {', '.join(res['dropped'])}" if res["dropped"] else ""
    click.echo(f"  reliability at full size: {rel} (kept >= {RELIABILITY_FLOOR}: {len(res['kept'])}{dropped})")
    if best is None:
        cheapest = min(res["rows"], key=lambda r: _hours(r, 1))
        click.echo(f"  no design fits: one seed of the cheapest ({cheapest['checkpoints']} checkpoints) takes "
                   f"{_hours(cheapest, 1):.2f} h")
        click.echo(f"  {need}")
        return
    click.echo(f"  best per checkpoint count within {budget:g} h ({n_fam} run(s) per seed, <= {MAX_SEEDS} seeds):")
    click.echo(f"    {'checkpoints':>11} {'seeds':>5} {'ID items':>8} {'OOD items':>9} {'hours':>7} "
               f"{'power |r|=' + format(res['target_r'], 'g'):>14} {'null +/-' + format(margin, 'g'):>10}")
    for d in res["by_checkpoints"]:
        click.echo(f"    {d['checkpoints']:>11} {d['seeds']:>5} {d['id_items']:>8} {d['ood_items']:>9} "
                   f"{d['hours']:>7.1f} {d['power']:>14.2f} {d['null_power']:>10.2f}")
    if res.get("below_floor"):
        click.echo(f"    {', '.join(map(str, res['below_floor']))} checkpoints: no item count within the budget "
                   f"brings every kept testset's residual to reliability {RELIABILITY_FLOOR:g} in each family (no "
                   "verdict)")
    click.echo(f"  design: {_describe(best)}, {n_fam} run(s) per seed: {best['hours']:.1f} h")
    click.echo(f"  expected power {best['power']:.2f} at |r| = {res['target_r']:g} (median reliable pair: "
               f"{best['median_testset']} on both sides, reliability {best['reliability']:.2f}; the least "
               f"reliable kept testset in any family: {best['weakest_testset']} {best['weakest']:.2f}); "
               f"{best['null_power']:.2f} for a consistent null at "
               f"+/-{margin:g}")
    if "simulated" in best:
        click.echo(f"  {_simulated_text(best['simulated'], margin, res['target_r'])}")
    elif best["caveat"]:
        click.echo(f"  {best['caveat']}")
    if best["power"] < res["target_power"] or best["null_power"] < res["target_power"]:
        click.echo(f"  {need}")


def _simulated(model: dict, best: dict, margin: float, reps: int, r: float = TARGET_R) -> dict:
    """The design's power and consistent-null rate measured on `reps` simulated studies each (plan_simulate)."""
    from oodcorr.planner.simulate import simulate_design

    t = model["ood"][best["median_testset"]]
    args = (best["checkpoints"], best["seeds"], t["item_var"] / min(best["ood_items"], t["size"]),
            model["id"]["item_var"] / best["id_items"], t["signal_var"], model["ell"], model["beta"])
    power, null = (simulate_design(*args, rho, margin, reps, seed=i) for i, rho in enumerate((r, 0.0)))
    return {"power": power["excludes_0"], "power_se": power["se"], "null_power": null["consistent_null"],
            "false_exclusion": null["excludes_0"], "reps": reps}


def _simulated_text(sim: dict, margin: float, r: float = TARGET_R) -> str:
    return (f"simulated ({sim['reps']} studies of this design analysed with the interval): power "
            f"{sim['power']:.2f} +/- {sim['power_se']:.2f} at |r| = {r:g}, {sim['null_power']:.2f} for a "
            f"consistent null at +/-{margin:g}")
