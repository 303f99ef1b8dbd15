"""The analysis' flags (a row's `flag` column: `code` or `code:detail`, several joined by ';') in words, for the
report, the figures and the terminal: one table, so every place says the same thing about the same flag."""

from __future__ import annotations

from oodcorr.stats.residualise import COLLINEAR

# code -> words; {x} is the flag's detail (a testset, a count, n=2<4), {metric} the analysed metric
WORDS = {
    "too_few_checkpoints": "too few checkpoints ({x}) for this method",
    "constant": "{x} never changed: r is undefined",
    "one_change": "{x} changed at one checkpoint only: r would be that one point",
    "collinear_with_id": f"{{x}} moves in step with ID (|corr| > {COLLINEAR}): after removing ID only noise is left",
    "residual_constant": "nothing of {x} is left once ID is removed (an exact function of ID)",
    "missing_checkpoints": "{x} checkpoints lack a score; the pair used the others",
    "one_class": "{x} has one gold class: {metric} is undefined on it",
    "no_metric": "{x}'s rows in the metrics file lack {metric} (written without it): rescore with "
    "`oodcorr evaluate`, or set analyze.metric: accuracy",
    "no_score": "{x} has no score at any checkpoint (accuracy NaN: nothing was scored)",
    "no_valid_seed": "no seed has an r",
    "unreliable": "{x}'s residual trajectory is mostly testset noise",
    "ci2_undefined": "no noise-corrected interval ({x})",
}
SPECIAL = {"constant:id": "the ID series never changed: there is no ID progress to regress out"}


def describe(flag: str, metric: str = "the metric") -> str:
    """One flag in words (an unknown flag as it is)."""
    flag = str(flag or "").strip()
    if flag in SPECIAL:
        return SPECIAL[flag]
    code, _, detail = flag.partition(":")
    words = WORDS.get(code)
    if words is None:
        return flag
    detail = detail.replace("<=k+2", " ≤ k + 2").replace("<", " < ") if code == "too_few_checkpoints" else detail
    return words.format(x=detail or "a testset", metric=metric)


def first(flags, metric: str = "the metric") -> str:
    """The first entry of a `flag` cell (';'-joined) in words; '' when there is none."""
    text = "" if flags is None or flags != flags else str(flags)
    entry = next((f for f in text.split(";") if f and f != "nan"), "")
    return describe(entry, metric) if entry else ""
