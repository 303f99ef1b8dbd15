"""Bad-input cases: what the analysis is given to correlate. Degenerate data (too few checkpoints, a series that
never moves or moves in step with ID, a testset with no score, one OOD testset only) must give rows with a reason
in words and exit 0; damaged metrics rows (a step as text, an accuracy above 1, a testset named by a number, an
empty file beside others) one line naming file:line. Each case edits run a's metrics.jsonl, as a hand-written or
damaged file would be. A new one is one Case in cases()."""

from __future__ import annotations

import json
import math

from bad_inputs_runner import A, Case, edit_params

METRICS = "runs/a/eval/metrics.jsonl"
SCORES = (
    "accuracy",
    "f1_non_entailment",
    "macro_f1",
    "balanced_accuracy",
    "balanced_margin",
    "auc",
    "mean_margin",
    "mean_logp_gold",
    "yes_rate",
)
RESULTS = ("results", "results/**", ".oodcorr", ".oodcorr/**")


def _rows(root) -> list[dict]:
    return [json.loads(x) for x in (root / METRICS).read_text().splitlines() if x.strip()]


def _write(root, rows) -> None:
    (root / METRICS).write_text("".join(json.dumps(r) + "\n" for r in rows))


def _steps(keep: int, bootstrap: int = 50):
    """Only the first `keep` checkpoints scored (bootstrap on: its columns were added on some paths only)."""

    def mutate(root):
        rows = _rows(root)
        steps = sorted({r["step"] for r in rows})[:keep]
        _write(root, [r for r in rows if r["step"] in steps])
        edit_params(lambda p: p["analyze"].update(bootstrap=bootstrap, methods=["linear", "rank", "gam"]))(root)

    return mutate


def _duplicated(root):
    rows = _rows(root)
    _write(root, rows + [dict(r, accuracy=r["accuracy"] * 0.9) for r in rows[-4:]])


def _ood(rows) -> str:
    ids = {r["id_testset"] for r in rows}
    return sorted({r["testset"] for r in rows} - ids)[0]


def _linear_testset(every_field: bool):
    """A new OOD testset whose scores are 0.5 * ID + 0.2 at every checkpoint: written with accuracy alone (as
    a hand-written file would be) or with every score."""

    def mutate(root):
        rows = _rows(root)
        ids = [r for r in rows if r["testset"] == r["id_testset"] and r.get("slice") is None]
        extra = []
        for r in ids:
            keep = {k: r[k] for k in ("run", "model", "train_set", "id_testset", "shots", "seed", "step", "n")}
            scores = {
                k: 0.5 * r[k] + 0.2
                for k in (SCORES if every_field else ("accuracy",))
                if isinstance(r.get(k), (int, float)) and math.isfinite(r[k])
            }
            extra.append({**keep, "testset": "synth_lin", "slice": None, **scores})
        _write(root, rows + extra)

    return mutate


def _set_testset(which: str, value):
    """Every score of one testset (the ID one, or the first OOD one) set to `value` at every checkpoint."""

    def mutate(root):
        rows = _rows(root)
        name = rows[0]["id_testset"] if which == "id" else _ood(rows)
        _write(root, [dict(r, **{k: value for k in SCORES if k in r}) if r["testset"] == name else r for r in rows])

    return mutate


def _only_one_ood(root):
    rows = _rows(root)
    keep = {rows[0]["id_testset"], _ood(rows)}
    _write(root, [r for r in rows if r["testset"] in keep])


def _first_row(**fields):
    def mutate(root):
        rows = _rows(root)
        rows[1].update(fields)
        _write(root, rows)

    return mutate


def _has(*needles, where="stdout", absent=()):
    """An ok case's check: each needle in the command's output (stdout) or in results/<file>."""

    def check(root, res):
        text = res.stdout + res.stderr if where == "stdout" else (root / "results" / where).read_text()
        for n in needles:
            if n not in text:
                return f"{n!r} not in {where}"
        for n in absent:
            if n in text:
                return f"{n!r} in {where}"
        return None

    return check


def _empty_beside(root):
    (root / "runs" / "b" / "eval").mkdir(parents=True)
    (root / "runs" / "b" / "eval" / "metrics.jsonl").write_text("")


def cases() -> list[Case]:
    two_runs = ["analyze", "--no-plots", "--metrics", METRICS, "--metrics", "runs/b/eval/metrics.jsonl"]
    return [
        Case(
            "analysis:checkpoints-1",
            A,
            _steps(1),
            expect="ok",
            allowed=RESULTS,
            check=_has("too few checkpoints (n=1 < 4)"),
            item="any number of checkpoints: rows with a reason",
        ),
        Case(
            "analysis:checkpoints-2",
            A,
            _steps(2),
            expect="ok",
            allowed=RESULTS,
            fast=True,
            check=_has("too few checkpoints (n=2 < 4)"),
            item="2 checkpoints: KeyError ['boot_ci_low', 'boot_ci_high'] (columns added on some paths only)",
        ),
        Case(
            "analysis:checkpoints-3",
            A,
            _steps(3),
            expect="ok",
            allowed=RESULTS,
            check=_has("too few checkpoints (n=3 < 4)"),
        ),
        Case(
            "analysis:checkpoints-4-gam",
            A,
            _steps(4),
            expect="ok",
            allowed=RESULTS,
            check=_has("too_few_checkpoints:n=4<8", where="partial_correlations.csv"),
        ),
        Case("analysis:checkpoints-0", A, lambda r: (r / METRICS).write_text(""), must=r"metrics\.jsonl"),
        Case(
            "analysis:ood-linear-in-id-accuracy-only",
            A,
            _linear_testset(False),
            expect="ok",
            allowed=RESULTS,
            fast=True,
            check=_has(
                "no_metric:synth_lin",
                "collinear_with_id:synth_lin",
                where="partial_correlations.csv",
                absent=("one_class",),
            ),
            item="an OOD series linear in ID flagged one_class, not collinear with ID",
        ),
        Case(
            "analysis:ood-linear-in-id-report",
            A,
            _linear_testset(False),
            expect="ok",
            allowed=RESULTS,
            check=_has("synth_lin moves in step with ID", "lack balanced_margin", where="report.html"),
        ),
        Case(
            "analysis:ood-linear-in-id-every-score",
            A,
            _linear_testset(True),
            expect="ok",
            allowed=RESULTS,
            check=_has("collinear_with_id:synth_lin", where="partial_correlations.csv", absent=("one_class",)),
        ),
        Case(
            "analysis:ood-constant",
            A,
            _set_testset("ood", 0.5),
            expect="ok",
            allowed=RESULTS,
            check=_has("never changed", where="report.html"),
        ),
        Case(
            "analysis:ood-all-nan",
            A,
            _set_testset("ood", math.nan),
            expect="ok",
            allowed=RESULTS,
            check=_has("no_score:", where="partial_correlations.csv", absent=("one_class",)),
        ),
        Case(
            "analysis:id-constant",
            A,
            _set_testset("id", 0.5),
            expect="ok",
            allowed=RESULTS,
            check=_has("the ID series never changed"),
        ),
        Case("analysis:id-all-nan", A, _set_testset("id", math.nan), must=r"metrics\.jsonl: synth_id has no score"),
        Case(
            "analysis:one-ood-testset",
            A,
            _only_one_ood,
            expect="ok",
            allowed=RESULTS,
            check=_has("no pair to correlate"),
        ),
        Case("analysis:duplicate-lines", A, _duplicated, expect="ok", allowed=RESULTS),  # a rescore appends: last wins
        Case("analysis:step-as-text", A, _first_row(step="2"), must=r"metrics\.jsonl:2: step must be an integer"),
        Case("analysis:step-fraction", A, _first_row(step=0.5), must=r"metrics\.jsonl:2: step must be an integer"),
        Case("analysis:accuracy-above-1", A, _first_row(accuracy=7.5), must=r"metrics\.jsonl:2: accuracy"),
        Case("analysis:accuracy-infinite", A, _first_row(accuracy=math.inf), must=r"metrics\.jsonl:2: accuracy"),
        Case("analysis:testset-a-number", A, _first_row(testset=5), must=r"metrics\.jsonl:2: testset"),
        Case("analysis:shots-a-list", A, _first_row(shots=[16]), must=r"metrics\.jsonl:2: shots"),
        Case("analysis:run-a-number", A, _first_row(run=7), must=r"metrics\.jsonl:2: run"),
        Case(
            "analysis:score-as-text", A, _first_row(balanced_margin="high"), must=r"metrics\.jsonl:2: balanced_margin"
        ),
        Case("analysis:empty-metrics-beside-another", two_runs, _empty_beside, must=r"runs/b/eval/metrics\.jsonl"),
    ]
