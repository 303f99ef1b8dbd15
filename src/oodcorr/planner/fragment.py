"""What `oodcorr plan --budget` writes and says beside the search (budget.py): the design as a params.yaml fragment
(runs with seeds, item counts, evenly spaced checkpoints, each pilot family's own training settings) and the line
naming the budget that reaches the target power."""

from __future__ import annotations

import math

from oodcorr.planner.budget import MAX_SEEDS, TARGET_R


def even_every(steps: int, n: int) -> int:
    """train.checkpoints.every that gives about n evenly spaced checkpoints over `steps` (0 and the last included),
    as the planner's model has them (gp_design.design_terms: t evenly spread over [0, 1])."""
    return max(1, math.ceil(steps / max(n - 1, 1)))


def params_fragment(
    design: dict,
    families: list,
    id_name: str,
    ood_names: list | None,
    header: list[str],
    steps: int | None = None,
    recipes: dict | None = None,
) -> str:
    """A params.yaml fragment for the design (data item counts, checkpoints, runs with seeds), with comments.
    steps: training steps per run; known, the checkpoints are evenly spaced (every), as planned; else log-spaced.
    recipes: {family: {train key: value}} written into each of the family's runs (the pilot's own settings)."""
    import yaml

    from oodcorr.settings.names import check_run_key

    runs = {}
    for model, train_set, id_testset, shots in families:
        for seed in range(design["seeds"]):
            key = f"{model.replace('/', '--')}_{train_set.removesuffix('_train')}_{shots}_s{seed}"
            runs[check_run_key(key)] = {
                "model": model,
                "train_set": train_set,
                "id_testset": id_testset,
                "shots": int(shots),
                "data_seed": seed,
                "seed": seed,
                **(recipes or {}).get((model, train_set, id_testset, shots), {}),
            }
    tree = {
        "data": {"max_examples": design["ood_items"], "testsets": {id_name: {"max_examples": design["id_items"]}}},
        "train": {
            "checkpoints": {"every": even_every(steps, design["checkpoints"]), "log_spaced": None}
            if steps
            else {"every": None, "log_spaced": design["checkpoints"]}
        },
    }
    if ood_names:
        tree["evaluate"] = {"testsets": [id_name, *ood_names]}
    tree["runs"] = runs
    lines = [f"# {h}" for h in header]
    lines += [
        "# data.max_examples: items per OOD testset (a smaller testset keeps all its rows); the ID testset's",
        "# own max_examples under data.testsets. train.checkpoints: "
        + (
            f"every {even_every(steps, design['checkpoints'])} of the {steps} steps, evenly spaced as planned"
            if steps
            else "log-spaced (the plan assumed even spacing: with train.max_steps known, prefer every:"
            " max_steps / (checkpoints - 1))"
        )
        + "; `oodcorr train --run KEY --dry-run` lists them.",
    ]
    return "\n".join(lines) + "\n" + yaml.safe_dump(tree, sort_keys=False, default_flow_style=None, width=150)


def required_budget_text(res: dict) -> str:
    """One line saying which budget reaches the target power (or that none within MAX_SEEDS seeds does)."""
    r, target, at = res.get("reach"), res["target_power"], res.get("target_r", TARGET_R)
    if r is None:
        return (
            f"no design here reaches {target:.0%} power at |r| = {at:g} with <= {MAX_SEEDS} seeds "
            "per family: the testsets carry too little signal for their size"
        )
    text = (
        f"{target:.0%} power at |r| = {at:g} needs a budget of {math.ceil(r['hours'] * 10) / 10:g} h ({_describe(r)})"
    )
    b = res.get("reach_both")
    if b is not None and b["hours"] > r["hours"] * 1.0001:
        text += f"; with the consistent null at {target:.0%} too: {math.ceil(b['hours'] * 10) / 10:g} h"
    return text


def _describe(d: dict) -> str:
    return (
        f"{d['seeds']} seeds x {d['checkpoints']} checkpoints, {d['id_items']} ID items, "
        f"{d['ood_items']} items per OOD testset"
    )
