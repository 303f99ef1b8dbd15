"""How a plan reads: its first lines say, in a user's words, what to run, how long it takes and what it can show
(the pairs it is expected to settle, the hours per settled pair, what the budget buys and what budget reaches the
target); the model behind it (length-scale, signal and item variances, the median testset) follows under
--details."""

from __future__ import annotations

import math

import click

from oodcorr.planner.budget import MAX_SEEDS, _hours
from oodcorr.planner.fragment import _describe


def _hw(rates) -> str:
    return "GPU-h" if "cuda" in str(rates.get("eval_source", "")) else "CPU-h"


def rates_line(ctx) -> str:
    r = ctx["rates"]
    return (
        f"scoring {r['examples_per_s']:.3g} examples/s ({r['eval_source']}); training {r['train_h']:.3g} h per "
        f"run ({r['train_source']})"
        + (f"; {ctx['trained_seeds']} seed(s) per family already trained" if ctx["trained_seeds"] else "")
    )


def print_budget(ctx, res, rel, best, details: bool) -> None:
    """The budget plan's printout: what it is planned from, the design and what it can show, the other designs,
    then (--details) the model behind it."""
    _print_source(ctx, res)
    if best is None:
        _print_no_design(ctx, res)
        return
    _print_design(ctx, res, best)
    _print_next(ctx, res, best)
    _print_other_designs(ctx, res)
    if not details:
        click.echo("  (--details: the model behind the plan)")
        return
    _print_details(ctx, res, rel, best)


def _print_source(ctx, res) -> None:
    """The first lines: the budget and what it is planned from, the rates, a small pilot's warning, the testsets
    left out."""
    s = ctx["settings"]
    plain_source = ctx["source"].split(";")[0]
    click.echo(
        f"plan --budget {ctx['budget']:g} h for {ctx['model_name']} (planned from {plain_source}; verdicts "
        f"as the study's analysis gives them: alpha {s.alpha:g}, reliability gate {s.reliability_min:g})"
    )
    click.echo(f"  rates: {rates_line(ctx)}")
    pm = ctx.get("pilot")
    if pm:
        few = min(t["items"] for t in pm["ood"].values())
        from oodcorr.planner.pilot import PILOT_FEW_ITEMS

        if few < PILOT_FEW_ITEMS:
            click.echo(
                f"  warning: the pilot scored as few as {few} items per testset (< {PILOT_FEW_ITEMS}): its "
                "item noise is a rough estimate; a larger pilot plans more reliably"
            )
    if res["dropped"]:
        click.echo(f"  left out (not scored): {dropped_text(res)}")


def _print_no_design(ctx, res) -> None:
    cheapest = min(res["rows"], key=lambda row: _hours(row, 1))
    click.echo(
        f"  no design fits: one seed of the cheapest ({cheapest['checkpoints']} checkpoints) takes "
        f"{_hours(cheapest, 1):.2f} h"
    )
    click.echo(f"  {ctx['need']}")


def _print_design(ctx, res, best) -> None:
    """The design, what it can show, the pairs it settles, and what limits it."""
    s, margin, r = ctx["settings"], ctx["margin"], res["target_r"]
    st = best["settled"]
    click.echo(f"  run: design: {_describe(best)}, {ctx['families']} run(s) per seed: {best['hours']:.1f} h")
    click.echo(
        f"  it can show: a partial correlation of |r| >= {r:g} between two testsets (beyond ID) with expected "
        f"power {best['power']:.2f} per pair in each family (target {res['target_power']:g}; "
        f"{priced_as(best, ctx.get('pilot'))}); a true 0 as a consistent null at +/-{margin:g} with "
        f"{best['null_power']:.2f}"
    )
    hps = (
        f"{st['hours_per_settled']:.2g} {_hw(ctx['rates'])} per settled pair"
        if st["if_r"] >= 0.05
        else "no pair expected to settle"
    )
    click.echo(
        f"  settles: {st['if_r']:.1f} of {st['pairs']} pairs expected if every pair's |r| is {r:g} "
        f"({hps}); {st['if_0']:.1f} if every pair's r is 0 (a pair settles when every family agrees)"
    )
    if best["power"] < res["target_power"] or best["null_power"] < res["target_power"]:
        click.echo(f"  this budget buys power {best['power']:.2f}; {ctx['need']}")
    if best["weakest"] < res["floor"]:
        click.echo(
            f"  the least reliable kept testset, {best['weakest_testset']}, reaches only reliability "
            f"{best['weakest']:.2f} at this design (gate {res['floor']:g}): no verdict on its pairs, so no power"
        )
    elif best.get("gate", 1) < 0.95:
        click.echo(
            f"  {1 - best['gate']:.0%} of families are expected to fall below the reliability gate "
            f"({s.reliability_min:g}) on a pair and give no verdict: counted in the power above"
        )
    if "simulated" in best:
        click.echo(f"  {simulated_text(best['simulated'], margin, r)}")
    elif best["caveat"]:
        click.echo(f"  {best['caveat']}")


def _print_next(ctx, res, best) -> None:
    """The `next:` line: the command to write this design (or the one that reaches the target) to plan.yaml."""
    if not ctx["write_params"] and (res.get("reach") or best["power"] >= res["target_power"]):
        enough = best["power"] >= res["target_power"]
        budget = ctx["budget"] if enough else math.ceil(res["reach"]["hours"] * 10) / 10
        click.echo(
            f"  next: `{retyped(budget)}`{'' if enough else ' (the budget that reaches the target)'}, merge "
            "plan.yaml into params.yaml, then `dvc repro`"
        )


def _print_other_designs(ctx, res) -> None:
    """The best design per checkpoint count within the budget, as a table."""
    margin, r = ctx["margin"], res["target_r"]
    click.echo(f"  other designs within {ctx['budget']:g} h ({ctx['families']} run(s) per seed, <= {MAX_SEEDS} seeds):")
    click.echo(
        f"    {'checkpoints':>11} {'seeds':>5} {'ID items':>8} {'OOD items':>9} {'hours':>7} "
        f"{'power |r|=' + format(r, 'g'):>14} {'null +/-' + format(margin, 'g'):>10}"
    )
    for d in res["by_checkpoints"]:
        click.echo(
            f"    {d['checkpoints']:>11} {d['seeds']:>5} {d['id_items']:>8} {d['ood_items']:>9} "
            f"{d['hours']:>7.1f} {d['power']:>14.2f} {d['null_power']:>10.2f}"
        )
    if res.get("below_floor"):
        click.echo(
            f"    {', '.join(map(str, res['below_floor']))} checkpoints: no item count within the budget "
            f"brings every kept testset's residual to reliability {res['floor']:g} in each family (no verdict)"
        )


def _print_details(ctx, res, rel, best) -> None:
    """--details: where the numbers come from, the testsets' reliabilities, the pair the power is priced on, and
    what each pair is expected to settle."""
    r = res["target_r"]
    click.echo(f"  details: {ctx['source']}; study settings from {ctx['study'] or 'defaults (no params.yaml)'}")
    click.echo(
        f"    residual reliability at full size, in each testset's weakest family: {rel} (kept >= {res['floor']:g}: "
        f"{len(res['kept'])})"
    )
    click.echo(
        f"    power priced on a pair of the median kept testset, {best['median_testset']}, in its weakest family"
        f"{' (' + best['median_family'] + ')' if best.get('median_family') else ''}: reliability "
        f"{best['reliability']:.2f}; the least reliable kept testset in any family: {best['weakest_testset']} "
        f"{best['weakest']:.2f}; "
        f"gate passed by {best['gate']:.2f} of families at |r| = {r:g}, {best['gate_null']:.2f} at 0"
    )
    for p in best["settled"]["per_pair"]:
        click.echo(f"    {p['a']} x {p['b']}: settles with {p['if_r']:.2f} at |r| = {r:g}, {p['if_0']:.2f} at 0")


def retyped(budget: float) -> str:
    """This `oodcorr plan` command as typed (the options given, in click's order), at `budget` hours and writing its
    design to plan.yaml: the `next:` line a user can paste."""
    import shlex

    ctx = click.get_current_context()
    parts = ["oodcorr", "plan"]
    for p in ctx.command.params:
        v = ctx.params.get(p.name)
        if p.name in ("budget", "write_params", "details", "as_json") or v is None or v == p.default or v == ():
            continue
        opt = max(p.opts, key=len)
        if getattr(p, "is_flag", False):
            parts.append(opt)
        else:
            parts += [f"{opt} {shlex.quote(str(x))}" for x in (v if p.multiple else [v])]
    return " ".join([*parts, f"--budget {budget:g}", "--write-params plan.yaml"])


def priced_as(best: dict, pilot) -> str:
    """What the power per pair is priced on, in a user's words."""
    if not pilot:
        return f"every stated testset alike, reliability {best['reliability']:.2f} at this design"
    family = f" in its weakest family, {best['median_family']}" if best.get("median_family") else ""
    return (
        f"priced on a pair of the median kept testset, {best['median_testset']}, at reliability "
        f"{best['reliability']:.2f}{family}"
    )


def dropped_text(res: dict) -> str:
    """The testsets left out, each with its reliability at full size (and the family it is lowest in): they cannot
    reach the gate, so no pair of theirs could settle; the other pairs are planned without them."""
    fam = res.get("weakest_family") or {}
    each = [f"{k} {res['reliability_full'][k]:.2f}" + (f" in {fam[k]}" if fam.get(k) else "") for k in res["dropped"]]
    return (
        f"{', '.join(each)} (residual reliability at full size, below the gate {res['floor']:g}: no pair of theirs "
        "could settle; the other pairs are planned without them)"
    )


def simulated_text(sim: dict, margin: float, r: float) -> str:
    return (
        f"simulated ({sim['reps']} studies of this design analysed with the interval and its gate): power "
        f"{sim['power']:.2f} +/- {sim['power_se']:.2f} at |r| = {r:g}, {sim['null_power']:.2f} for a "
        f"consistent null at +/-{margin:g}"
    )
