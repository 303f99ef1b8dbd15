"""Bad-input cases: command-line options and output paths (`study use`, the stages' options, --out and the
results folder). A new one is one Case in cases()."""

from __future__ import annotations

import re

import yaml
from bad_inputs_runner import Case, edit_params


def _run_keys_safe(root, res):
    p = yaml.safe_load((root / "params.yaml").read_text())
    bad = [k for k in p["runs"] if not re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]*", k)]
    return f"unsafe keys written: {bad}" if bad else None


def _user_files(root):
    (root / "paper" / "figures").mkdir(parents=True)
    (root / "paper" / "figures" / "my_diagram.png").write_bytes(b"\x89PNG mine")
    (root / "paper" / "summary.json").write_text("{}")


def _users_summary(root):
    (root / "paper").mkdir()
    (root / "paper" / "summary.json").write_text('{"n_runs": 3, "my": "numbers"}\n')  # shaped like the tool's


def cases() -> list[Case]:
    return [
        Case(
            "use:quickstart-seeds",
            ["study", "use", "quickstart", "--seeds", "1"],
            must=r"--seeds",
            item="study use quickstart --seeds ignored",
            fast=True,
        ),
        Case("use:quickstart-shots", ["study", "use", "quickstart", "--shots", "16"], must=r"--shots"),
        Case("use:quickstart-models", ["study", "use", "quickstart", "--models", "tiny-opt"], must=r"--models"),
        Case(
            "use:paper-shots-neg",
            ["study", "use", "paper", "--shots", "0,-4"],
            must=r"--shots",
            item="study use paper --shots 0,-4",
            fast=True,
        ),
        Case(
            "use:paper-seeds-letters",
            ["study", "use", "paper", "--seeds", "a,b"],
            must=r"--seeds",
            item="traceback: --seeds a,b",
            fast=True,
        ),
        Case("use:paper-seeds-empty-item", ["study", "use", "paper", "--seeds", "1,,2"], must=r"--seeds"),
        Case(
            "use:paper-models-shell",
            ["study", "use", "paper", "--models", "a/b;touch PWN3;"],
            must=r"model",
            item="study use writes unsafe keys",
            fast=True,
        ),
        Case("use:paper-models-dotdot", ["study", "use", "paper", "--models", "../../x"], must=r"model"),
        Case(
            "use:paper-models-hub",
            ["study", "use", "paper", "--models", "allenai/OLMo-2-1124-7B", "--seeds", "0"],
            expect="ok",
            check=_run_keys_safe,
            allowed=("params.yaml", "params.yaml.bak", "params.yaml.*.bak"),
            item="hub ids map to safe keys",
        ),
        Case("use:unknown-preset", ["study", "use", "papr"], must=r"papr"),
        Case("cli:train-run-dotdot", ["train", "--run", "../../evil"], must=r"--run"),
        Case("cli:train-run-unknown", ["train", "--run", "nope"], must=r"nope"),
        Case("cli:evaluate-run-shell", ["evaluate", "--run", "a;id"], must=r"--run"),
        Case("cli:evaluate-testsets-unknown", ["evaluate", "--run", "a", "--testsets", "nope"], must=r"nope"),
        Case("cli:analyze-bootstrap-neg", ["analyze", "--bootstrap", "-1"], must=r"bootstrap"),
        Case("cli:analyze-alpha-2", ["analyze", "--alpha", "2"], must=r"alpha"),
        Case("cli:analyze-metrics-missing", ["analyze", "--metrics", "nope.jsonl"], must=r"nope\.jsonl"),
        Case("cli:ui-port-0", ["ui", "--port", "0"], must=r"--port"),
        Case(  # tracking on: the base project has none, which sync refuses before it reads --run
            "cli:sync-run-unknown",
            ["sync", "--run", "nope"],
            edit_params(lambda p: p["study"].pop("tracking")),
            must=r"--run nope: no tracking records",
            allowed=("mlruns", "mlruns/**"),
        ),
        Case(
            "out:user-files",
            ["analyze", "--out", "paper", "--no-plots"],
            _user_files,
            must=r"--out paper: .*figures",
            item="user files deleted by --out",
            fast=True,
        ),
        Case(
            "out:changed-output",
            ["analyze", "--no-plots"],
            lambda r: (r / "results" / "consistency.csv").write_text("my edit\n"),
            must=r"consistency\.csv",
        ),
        Case(
            "out:extra-file",
            ["analyze", "--no-plots"],
            lambda r: (r / "results" / "notes.md").write_text("mine"),
            must=r"notes\.md",
        ),
        Case("out:is-a-file", ["analyze", "--out", "params.yaml", "--no-plots"], must=r"is a file"),
        Case(
            "out:users-summary-json",
            ["analyze", "--out", "paper", "--no-plots"],
            _users_summary,
            must=r"--out paper: .*summary\.json",
            item="a user's summary.json with an integer n_runs replaced",
            fast=True,
        ),
        Case(
            "out:proc",
            ["analyze", "--out", "/proc/x", "--no-plots"],
            must=r"--out /proc/x: not writable",
            item="traceback: --out /proc/x",
            fast=True,
        ),
        Case("out:name-too-long", ["analyze", "--out", "r" * 300, "--no-plots"], must=r"name too long"),
        Case("use:preset-dotdot", ["study", "use", "../../x"], must=r"study use: preset"),
        Case(
            "out:rerun-own-output",
            ["analyze", "--no-plots"],
            expect="ok",
            allowed=("results/**",),
            check=lambda r, res: None if (r / "results" / ".oodcorr-outputs.json").exists() else "no manifest",
        ),
        Case(
            "out:dvc-gitignore-kept",
            ["analyze", "--no-plots"],
            lambda r: (r / "results" / ".gitignore").write_text("/partial_correlations.csv\n/plots\n"),
            expect="ok",
            allowed=("results/**",),
            check=lambda r, res: None if (r / "results" / ".gitignore").exists() else ".gitignore removed",
            item="direct analyze removes DVC's .gitignore",
        ),
    ]
