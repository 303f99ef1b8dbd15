"""Bad-input cases: a hostile environment. Every OODCORR_* variable a stage reads, set to a value the stage
refuses, must be refused as well by `oodcorr study check` (which runs first under `dvc repro`) and by the stages
themselves, in one line naming the variable; a full disk and read-only folders end in one line naming the path.
A new one is one Case in cases()."""

from __future__ import annotations

import shutil

from bad_inputs_runner import CHECK, A, Case, E, T, edit_params

# variable -> bad values (each tried with `study check` and with the stage that reads it)
BAD_VARIABLES = {
    "OODCORR_STORE_BUSY_TIMEOUT_S": (("abc", A), ("-1", A), ("inf", A), ("nan", T)),
    "OODCORR_THREADS": (("lots", T), ("0", E), ("2.5", T), ("2000", E)),
    "OODCORR_CACHE": (("params.yaml", T),),  # a file, where the converted models' folder goes
    "OODCORR_TEST_KILL_AT_STEP": (("four", T),),
    "WORLD_SIZE": (("abc", T),),  # the launcher's (accelerate launch / torchrun), read by train and evaluate
    "LOCAL_RANK": (("-1", E),),
}
FAST = {("OODCORR_STORE_BUSY_TIMEOUT_S", "abc")}


def _variable_cases() -> list[Case]:
    out = []
    for name, values in BAD_VARIABLES.items():
        for value, stage in values:
            for args in (CHECK, stage):
                where = "check" if args is CHECK else args[0]
                out.append(
                    Case(
                        f"env:{name.lower()}={value}:{where}",
                        list(args),
                        must=rf"^error: {name}: ",
                        wrap=f"env:{name}={value}",
                        fast=(name, value) in FAST and args is CHECK,
                        item="study check passed a variable the stage then refused" if args is CHECK else "",
                    )
                )
    return out


def cases() -> list[Case]:
    return _variable_cases() + [
        Case(
            "env:disk-full-analyze",
            A,
            lambda r: shutil.rmtree(r / "results"),
            must=r"no space left",
            wrap="fsize:3000",
            item="traceback: disk full",
        ),
        Case(
            "env:disk-full-evaluate",
            E,
            lambda r: shutil.rmtree(r / "runs/a/eval/cache"),
            must=r"no space left",
            wrap="fsize:3000",
            allowed=("runs/a/eval/cache",),
        ),  # the (empty) cache folder is made again
        Case(
            "env:disk-full-train",
            ["train", "--run", "b"],
            edit_params(lambda p: p["runs"].update(b=dict(p["runs"]["a"], seed=1))),
            must=r"no space left",
            wrap="fsize:6000",
            allowed=("runs/b/**",),
        ),
        Case(
            "env:readonly-runs",
            ["train", "--run", "b"],
            edit_params(lambda p: p["runs"].update(b=dict(p["runs"]["a"], seed=1))),
            must=r"runs.*cannot write|cannot write.*runs",
            wrap="readonly:runs",
            item="traceback: read-only runs/",
        ),
        Case(
            "env:readonly-eval",
            E,
            lambda r: shutil.rmtree(r / "runs/a/eval/cache"),
            must=r"cannot write",
            wrap="readonly:runs/a/eval",
        ),
    ]
