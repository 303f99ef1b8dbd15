"""`oodcorr plan`'s options: a few a user needs (shown by --help) and the inputs an expert states (hidden from the
option list, named in the help text's sections), so the help reads in groups."""

from __future__ import annotations

import click

from oodcorr.planner.budget import CHECKPOINTS, MAX_SEEDS, TARGET_R

MAX_SIMULATE = 2000  # simulated studies per --simulate (each takes about a second): more is refused

HELP_SECTIONS = f"""
\b
Stated inputs (without a pilot; hidden from the list above):
  --ell L            length-scale of the residual trajectories over training progress in [0, 1] (0.4: smooth)
  --signal-sd S      SD of each OOD residual trajectory's noise-free signal (0.02)
  --item-sd S        per-item SD of an OOD testset's score (0.5); --id-item-sd S: the ID testset's
  --id-slope B       slope of the OOD series on ID (0.5)
  --ood-testsets K   OOD testsets (the study's, else 7); --max-items N: a testset's size; --size NAME=N: one testset's
  --accuracy P, --residual-sd S, --pilot-reliability R --pilot-items N: the half-width mode's assumptions
\b
Design space and pricing:
  --checkpoints N    checkpoint counts to choose from (repeatable; {', '.join(map(str, CHECKPOINTS))})
  --families K       runs per seed (model families x setups; default: the pilot's, else 1)
  --trained-seeds K  seeds per family already trained (at most {MAX_SEEDS}): they cost their scoring only
  --train-steps N    training steps per run (default: params.yaml's train.max_steps)
  --margin M         consistent-null margin (default: the study's analyze.equivalence)
  --id-testset, --train-set, --shots: names written into the params fragment without a pilot
\b
Half-width mode (no --budget, no --detect-r):
  --half-width H --reliability R --seeds K --r R0 --testsets K --runs K --quantile Q
Power mode (--detect-r R):
  --items N (repeatable) --reliability-product P --seeds K
"""


def _hidden(*args, **kw):
    return click.option(*args, hidden=True, **kw)


def plan_options(f):
    """Every option of `oodcorr plan`, the visible ones first (click's order: the help's and `next:` line's)."""
    for opt in reversed([*_shown_inputs(), *_shown_outputs(), *_hidden_inputs(), *_design_and_modes()]):
        f = opt(f)
    return f


def _shown_inputs() -> list:
    """Shown by --help: the budget, what to plan from and how the hours are priced."""
    return [
        click.option(
            "--budget",
            type=float,
            default=None,
            help="Hours of compute: the design (seeds x checkpoints x items) that settles the most.",
        ),
        click.option(
            "--pilot",
            "pilot",
            multiple=True,
            type=click.Path(),
            help="Pilot runs (metrics.jsonl, run folders or projects; >= 10 checkpoints each) to plan from.",
        ),
        click.option(
            "--params",
            "params_file",
            type=click.Path(dir_okay=False),
            default=None,
            help="The study's params.yaml (default: the project's): its analyze settings, models, dtype.",
        ),
        click.option(
            "--model", "models", multiple=True, help="Model the hours are for (default: the study's runs' models)."
        ),
        click.option("--dtype", default=None, help="Scoring dtype the hours are for (default: the study's; auto)."),
        click.option(
            "--examples-per-s",
            type=float,
            default=None,
            help="Scoring throughput to price with (default: measured on this machine, kept in .oodcorr/rates.json).",
        ),
        click.option(
            "--train-hours",
            type=float,
            default=None,
            help="Training hours per run (default: this machine's measured step time x steps).",
        ),
    ]


def _shown_outputs() -> list:
    """Shown by --help: what the plan aims at, the power mode, and what it prints or writes."""
    return [
        click.option(
            "--power",
            "target_power",
            type=float,
            default=0.8,
            show_default=True,
            help="Target power: a plan below it is never written.",
        ),
        click.option(
            "--target-r",
            type=click.FloatRange(0.05, 0.95),
            default=TARGET_R,
            show_default=True,
            help="The smallest |partial r| worth finding (noise-free).",
        ),
        click.option(
            "--write-params",
            type=click.Path(dir_okay=False),
            default=None,
            help="Write the design as a params.yaml fragment to this file.",
        ),
        click.option(
            "--simulate",
            type=int,
            default=0,
            show_default=True,
            help=f"Measure the design's power on this many simulated studies (<= {MAX_SIMULATE}).",
        ),
        click.option(
            "--detect-r",
            "detect_r",
            type=float,
            default=None,
            help="Power mode: checkpoints per testset size to detect this |partial r|.",
        ),
        click.option("--details", is_flag=True, help="Also print the model behind the plan and every option weighed."),
        click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON."),
    ]


def _hidden_inputs() -> list:
    """Hidden: the inputs stated without a pilot (the help text's first section)."""
    return [
        _hidden("--ell", type=float, default=None),
        _hidden("--signal-sd", type=float, default=None),
        _hidden("--item-sd", type=float, default=None),
        _hidden("--id-item-sd", type=float, default=None),
        _hidden("--id-slope", type=float, default=None),
        _hidden("--ood-testsets", type=int, default=None),
        _hidden("--max-items", type=int, default=4096),
        _hidden("--size", "sizes", multiple=True),
        _hidden("--accuracy", type=float, default=0.6),
        _hidden("--residual-sd", type=float, default=0.02),
        _hidden("--pilot-reliability", type=float, default=None),
        _hidden("--pilot-items", type=int, default=None),
    ]


def _design_and_modes() -> list:
    """Hidden: the design space and pricing, and the half-width and power modes' inputs."""
    return [
        _hidden("--checkpoints", "checkpoint_counts", type=click.IntRange(3), multiple=True),
        _hidden("--families", type=int, default=None),
        _hidden("--trained-seeds", type=int, default=0),
        _hidden("--train-steps", type=int, default=None),
        _hidden("--margin", type=float, default=None),
        _hidden("--id-testset", default="mnli_real"),
        _hidden("--train-set", default="mnli_real_train"),
        _hidden("--shots", type=int, default=1024),
        # hidden: half-width and power modes
        _hidden("--half-width", type=float, default=0.2),
        _hidden("--reliability", "target_rel", type=float, default=0.8),
        _hidden("--seeds", type=int, default=1),
        _hidden("--r", "r0", type=float, default=0.0),
        _hidden("--testsets", type=int, default=8),
        _hidden("--runs", type=int, default=1),
        _hidden("--quantile", type=float, default=0.5),
        _hidden("--items", "item_counts", type=int, multiple=True),
        _hidden("--reliability-product", type=float, default=None),
    ]
