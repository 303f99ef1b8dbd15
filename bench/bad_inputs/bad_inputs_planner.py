"""Bad-input cases: `oodcorr plan`'s inputs (budgets, seeds, simulation counts, rates stated or read from the
project's rates file, pilots too small to plan from, a design below the power asked for). Each is one line naming
the option or file, a non-zero exit, nothing written. A new one is one Case in cases()."""

from __future__ import annotations

import json

from bad_inputs_runner import Case

RATED = ["--examples-per-s", "20", "--train-hours", "0.1"]
STATED = ["--ell", "0.2", "--signal-sd", "0.04", "--ood-testsets", "3", "--max-items", "512"]


def _rates(text: str):
    def mutate(root):
        (root / ".oodcorr").mkdir(exist_ok=True)
        (root / ".oodcorr" / "rates.json").write_text(text)

    return mutate


def _rate_row(value) -> str:
    from oodcorr.planner.rates import device_and_machine

    device, machine = device_and_machine()
    return json.dumps(
        {
            "scoring": [
                {
                    "model": "tiny-opt",
                    "dtype": "float32",
                    "device": device,
                    "machine": machine,
                    "examples_per_s": value,
                    "source": "by hand",
                }
            ]
        }
    )


def cases() -> list[Case]:
    plan = ["plan", "--budget", "2", *STATED]
    by_file = [*plan, "--model", "tiny-opt", "--dtype", "float32", "--train-hours", "0.1"]
    out = [
        Case(
            f"plan:budget-{b}",
            ["plan", "--budget", b, *RATED, *STATED],
            must=r"--budget",
            item="plan --budget inf accepted" if b == "inf" else "",
            fast=b == "inf",
        )
        for b in ("inf", "-inf", "nan", "0", "-1")
    ]
    return out + [
        Case(
            "plan:trained-seeds-above-cap",
            [*plan, *RATED, "--trained-seeds", "100"],
            must=r"--trained-seeds.*64",
            item="plan --trained-seeds 100 above the 64-seed cap accepted",
            fast=True,
        ),
        Case(
            "plan:simulate-huge",
            [*plan, *RATED, "--simulate", "1000000000"],
            must=r"--simulate",
            item="plan --simulate 1000000000 unbounded",
            fast=True,
        ),
        Case("plan:simulate-negative", [*plan, *RATED, "--simulate", "-1"], must=r"--simulate"),
        Case(
            "plan:examples-per-s-negative",
            [*plan, "--examples-per-s", "-5", "--train-hours", "0.1"],
            must=r"--examples-per-s",
            item="plan --examples-per-s -5 accepted",
            fast=True,
        ),
        Case(
            "plan:examples-per-s-zero",
            [*plan, "--examples-per-s", "0", "--train-hours", "0.1"],
            must=r"--examples-per-s",
            item="plan --examples-per-s 0 accepted",
        ),
        Case(
            "plan:train-hours-negative",
            [*plan, "--examples-per-s", "20", "--train-hours", "-1"],
            must=r"--train-hours",
            item="plan --train-hours -1 accepted",
        ),
        Case(
            "plan:rates-file-list",
            by_file,
            _rates("[1, 2]"),
            must=r"rates\.json",
            item="a rates file that is a JSON list: traceback",
            fast=True,
        ),
        Case(
            "plan:rates-file-nan",
            by_file,
            _rates(_rate_row(float("nan"))),
            must=r"rates\.json.*examples_per_s",
            item="a NaN rate: traceback",
        ),
        Case(
            "plan:rates-file-negative",
            by_file,
            _rates(_rate_row(-5)),
            must=r"rates\.json.*examples_per_s",
            item="a negative rate: negative hours",
        ),
        Case("plan:rates-file-not-json", by_file, _rates("{not json"), must=r"rates\.json"),
        Case(
            "plan:dtype-unknown",
            [*plan, "--model", "tiny-opt", "--dtype", "float8", "--train-hours", "0.1"],
            must=r"--dtype",
        ),
        Case(
            "plan:pilot-too-small",
            ["plan", "--budget", "2", "--pilot", "runs/a", *RATED],
            must=r"checkpoints",
            item="a 5-checkpoint pilot accepted without a word",
            fast=True,
        ),
        Case(
            "plan:write-params-below-power",
            [*plan, *RATED, "--budget", "0.3", "--write-params", "plan.yaml"],
            must=r"not written.*plan\.yaml",
            item="--write-params wrote a design of power 0.00",
            fast=True,
        ),
    ]
