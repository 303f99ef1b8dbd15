"""What a user came for, in one table: per OOD pair, is the relation settled across model families (the same sign
in every family, or a sign that flips), a null (no relation beyond ±equivalence in any family), or unsettled, with
each family's seed-pooled estimate and the interval that decided, the one around the other (with the noise
analysis the noise-free r and ci2, else the partial r and its CI). The report opens with it (under the curves);
`oodcorr analyze` ends with its counts.

The verdicts are stats.consistency's; `raw` (OOD testsets correlated without removing ID progress) is a
reference for the partial correlations, not an answer to the question, so it never appears here."""

from __future__ import annotations

import math

from oodcorr.analysis.templating import render
from oodcorr.stats.gate import gate_words
from oodcorr.stats.methods import METHODS, primary
from oodcorr.stats.metrics import BASELINE_METRIC

# verdict (stats.consistency.VERDICTS) -> (outcome, in words); the outcomes in the order the table lists them
OUTCOMES = {
    "consistent_positive": ("settled", "positive in every family"),
    "consistent_negative": ("settled", "negative in every family"),
    "model_dependent": ("settled", "the sign differs between families"),
    "consistent_null": ("null", "no relation beyond ±{delta} in any family"),
    "insufficient_evidence": ("unsettled", "insufficient evidence"),
    "unreliable": ("unsettled", "a testset's residual trajectory is mostly noise"),
}
ORDER = ("settled", "null", "unsettled")


def primary_method(summary: dict) -> str | None:
    """The method the verdicts are read from: the first requested one that is not `raw`."""
    return primary(summary.get("methods_requested") or summary.get("methods") or [])


def method_label(method: str) -> str:
    return f"{method} (ID not regressed out: a reference, not a verdict)" if not METHODS[method].controls else method


def outcome(verdict) -> tuple[str, str]:
    return OUTCOMES.get(str(verdict), ("unsettled", str(verdict).replace("_", " ")))


def counts(consistency, method: str, column: str = "verdict") -> dict:
    """{outcome: {verdict: n}} for one method's pairs (every outcome present, possibly empty)."""
    out = {o: {} for o in ORDER}
    if consistency is None or not len(consistency) or column not in consistency:
        return out
    for verdict in consistency.loc[consistency["method"] == method, column]:
        o, _ = outcome(verdict)
        out[o][str(verdict)] = out[o].get(str(verdict), 0) + 1
    return out


def counts_line(c: dict) -> str:
    """'settled 0, null 0, unsettled 6 (unreliable 6)'."""

    def part(o):
        n = sum(c[o].values())
        detail = ", ".join(f"{v.replace('_', ' ')} {k}" for v, k in sorted(c[o].items()) if k)
        return f"{o} {n}" + (f" ({detail})" if detail and o != "null" else "")

    return ", ".join(part(o) for o in ORDER)


def _num(v) -> float:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return math.nan
    return v


def _unreadable(row, rmin: float | None) -> str | None:
    """Why a family's estimate cannot be read: its testsets whose fitted reliability (rel_a / rel_b, the one the
    gate reads) is below the gate, e.g. "fitted reliability below 0.5: hans_real 0.00"; None where both clear it."""
    if rmin is None:
        return None
    low = []
    for name, rel in ((row.get("testset_a"), _num(row.get("rel_a"))), (row.get("testset_b"), _num(row.get("rel_b")))):
        if not rel >= rmin:
            low.append(f"{name} {rel:.2f}" if math.isfinite(rel) else f"{name} –")
    return f"fitted reliability below {rmin:g}: {', '.join(low)}" if low else None


def _family_cell(row, suffix: str, noise: bool, alpha: float, rmin: float | None = None) -> dict:
    """'+0.92 [+0.75, +1.00] d': one estimate and its own interval, the pair the verdict reads: with the noise
    analysis the seed-pooled noise-free r (r_disattenuated) and its noise-corrected interval (ci2), else the
    seed-pooled r and its CI. Where the noise-free r is undefined, the observed r is shown, labelled as such; where
    a testset's fitted reliability is below the gate (rmin) or the interval spans -1 to +1, the cell says it is
    unreadable and why, not a number.
    Values: {"r", "ci", "mark", "observed", "unreadable"} (r None: undefined or unreadable; the whole cell None:
    no such family row)."""
    if row is None:
        return None
    why = _unreadable(row, rmin) if noise else None
    if why is not None and any(math.isfinite(_num(row.get(f"{c}{suffix}"))) for c in ("r", "r_disattenuated")):
        return {"r": None, "unreadable": why}
    point, low, high = ("r_disattenuated", "ci2_low", "ci2_high") if noise else ("r", "ci_low", "ci_high")
    r, lo, hi = (_num(row.get(f"{c}{suffix}")) for c in (point, low, high))
    if not math.isfinite(r):
        observed = _num(row.get(f"r{suffix}"))
        observed = f"{observed:+.2f}" if noise and math.isfinite(observed) else None
        return {"r": None, "observed": observed, "unreadable": None}
    mark = ""
    if math.isfinite(lo) and math.isfinite(hi):
        ci = f"[{lo:+.2f}, {hi:+.2f}]"
        if ci == "[-1.00, +1.00]":  # an interval over every possible r says nothing about this one
            return {"r": None, "unreadable": "its interval spans -1 to +1"}
        if noise and (lo > 0 or hi < 0):
            mark = "d"
    else:
        ci = "[–, –]"
    if not noise and _num(row.get(f"p_bh{suffix}")) < alpha:
        mark = "*"
    return {"r": f"{r:+.2f}", "ci": ci, "mark": mark, "unreadable": None}


def _why(keyed: dict, row, models, rmin: float | None = None) -> str:
    """Each family's words for a wide interval (pooled_seeds.csv ci2_why), as a small line under the outcome, and
    for a family the reliability gate (rmin, where testset noise is assessed) silenced, how far below it fell and
    what would lift it (stats.gate)."""
    parts = []
    for m in models:
        p = keyed.get((row.get("train_set"), row.get("shots"), m, row["testset_a"], row["testset_b"]))
        why = p.get("ci2_why") if p is not None else None
        words = [why] if isinstance(why, str) and why else []
        if p is not None and rmin is not None and math.isfinite(_num(p.get("r"))):
            gate = gate_words({row["testset_a"]: _num(p.get("rel_a")), row["testset_b"]: _num(p.get("rel_b"))}, rmin)
            words += [gate] if gate else []
        if words:
            parts.append((m, "; ".join(words)))
    return render("_why.html", parts=parts) if parts else ""


def _keyed(pooled, method: str) -> dict:
    """The method's seed-pooled rows by (train_set, shots, model, testset_a, testset_b)."""
    keyed = {}
    if pooled is not None and len(pooled):
        for _, p in pooled[pooled["method"] == method].iterrows():
            keyed[(p.get("train_set"), p.get("shots"), p["model"], p["testset_a"], p["testset_b"])] = p
    return keyed


def _verdict_rows(rows, keyed: dict, models, metrics, setups: bool, noise: dict) -> list[dict]:
    """One row per pair: its setup, pair, the family cells (per model and metric) and the outcomes."""
    out = []
    for _, row in rows.iterrows():
        cells = []
        for m in models:
            p = keyed.get((row.get("train_set"), row.get("shots"), m, row["testset_a"], row["testset_b"]))
            cells += [
                _family_cell(p, suffix, noise["on"], noise["alpha"], None if suffix else noise["rmin"])
                for _, suffix, _ in metrics
            ]
        outcomes = []
        for _, suffix, column in metrics:
            o, words = outcome(row.get(column))
            why = "" if o != "unsettled" or suffix else _why(keyed, row, models, noise["rmin"])
            outcomes.append(
                {"cls": str(row.get(column)), "outcome": o, "words": words.format(delta=noise["delta"]), "why": why}
            )
        setup = (str(row["train_set"]), str(row["shots"])) if setups else None
        pair = f"{row['testset_a']} ~ {row['testset_b']}"
        out.append({"setup": setup, "pair": pair, "cells": cells, "outcomes": outcomes})
    return out


def verdict_table(summary: dict, consistency, pooled) -> list[str]:
    """The report's first table: per pair and setup, each family's seed-pooled r (analysed metric, and accuracy
    beside it) and the outcome; settled pairs first, then nulls, then the unsettled."""
    method = primary_method(summary)
    if method is None or consistency is None or not len(consistency):
        return [render("verdicts.html", method=None)]
    metric = str(summary.get("metric") or BASELINE_METRIC)
    on = bool((summary.get("noise") or {}).get("enabled"))
    rmin = _num((summary.get("noise") or {}).get("reliability_min")) if on else math.nan
    noise = {
        "on": on,
        "alpha": float(summary.get("alpha") or 0.05),
        "delta": summary.get("equivalence", 0.3),
        "rmin": rmin if math.isfinite(rmin) else None,
    }
    metrics = [(metric, "", "verdict")]
    if metric != BASELINE_METRIC and "verdict_accuracy" in consistency:
        metrics.append((BASELINE_METRIC, "_accuracy", "verdict_accuracy"))
    rows = consistency[consistency["method"] == method]
    models = (
        sorted(pooled.loc[pooled["method"] == method, "model"].unique()) if pooled is not None and len(pooled) else []
    )
    setups = len(rows[["train_set", "shots"]].drop_duplicates()) > 1 if {"train_set", "shots"} <= set(rows) else False
    rank = {o: i for i, o in enumerate(ORDER)}
    rows = rows.assign(_o=rows["verdict"].map(lambda v: rank[outcome(v)[0]])).sort_values(
        ["_o", "verdict", "testset_a", "testset_b"]
    )
    return [
        render(
            "verdicts.html",
            method=method,
            setups=setups,
            models=models,
            metrics=[name for name, _, _ in metrics],
            rows=_verdict_rows(rows, _keyed(pooled, method), models, metrics, setups, noise),
            noise=noise,
        )
    ]


def terminal_summary(summary: dict, consistency, report, partials=None) -> list[str]:
    """The few lines `oodcorr analyze` ends with: the verdicts' counts (analysed metric, accuracy beside it),
    how much is distinguishable from noise, and where the report is."""
    method = primary_method(summary)
    if method is None:
        return [f"report: {report}"]
    metric = str(summary.get("metric") or BASELINE_METRIC)
    n = int((consistency["method"] == method).sum()) if consistency is not None and len(consistency) else 0
    lines = [f"verdicts across models ({method}, {n} pairs): {metric}: {counts_line(counts(consistency, method))}"]
    if ((summary.get("methods") or {}).get(method) or {}).get("mean_abs_r") is None:
        lines.append(f"  no pair has a partial r: {why_no_r(partials, method, metric)}")
    if metric != BASELINE_METRIC and consistency is not None and "verdict_accuracy" in consistency:
        lines.append(f"  {BASELINE_METRIC} beside it: {counts_line(counts(consistency, method, 'verdict_accuracy'))}")
    noise = ((summary.get("noise") or {}).get("methods") or {}).get(method) or {}
    share = noise.get("share_distinguishable")
    if share is not None:
        from oodcorr.analysis.figure_parts import reliability_label

        lines.append(
            f"  distinguishable from testset noise: {100 * share:.0f} % of pairs per run; median split-half "
            f"reliability {reliability_label(noise.get('median_reliability'))}"
        )
    lines.append(f"report: {report}")
    return lines


def why_no_r(partials, method: str, metric: str) -> str:
    """The most common first flag of `method`'s rows, in words (the report's flags say the rest)."""
    from oodcorr.stats.flags import describe

    if partials is not None and not len(partials):
        return "no run has two OOD testsets with a score, so there is no pair to correlate"
    if partials is None or "flag" not in partials:
        return "the report's flags say why"
    firsts = [
        str(f).split(";")[0] for f in partials.loc[partials["method"] == method, "flag"] if isinstance(f, str) and f
    ]
    if not firsts:
        return "the report's flags say why"
    return describe(max(sorted(set(firsts)), key=firsts.count), metric)
