"""Rebuilt tables against committed ones (`oodcorr study reanalyze --check`): equal up to what another CPU's
numerical libraries can move, or changed.

OpenBLAS and numpy choose their kernels by CPU (AVX-512, AVX2, SSE), so sums are taken in another order and the
last bits of a float differ. Random parts cannot differ: every resample and split is drawn from the study's
seed and the number of draws never depends on a computed value. So a number may move by its computation's
rounding error, which each column's tolerance below bounds (docs/studies.md has the table and the reasons); every
tolerance is far below the column's own statistical or Monte-Carlo error, so nothing within it can change a
reading. Text is compared word for word, its numbers to the precision they are written with; identifiers,
flags, verdicts and counts exactly.
"""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

# the committed tables: every file the analysis writes except figures, the report and its manifest
NOT_TABLES = ("figures/", "report.html", ".oodcorr-outputs.json", "versions.json")  # versions: checked first

ARITHMETIC = 1e-9  # closed-form double-precision statistics: rounding (1e-16) times a condition number <= 1e7
FITTED = 1e-6  # fitted or resampled numbers: the optimiser's own accuracy, GCV's solves, seeded resamples
SHOWN = 1e-4  # results/metrics.json: rounded to 4 decimals, so one unit of the last digit shown
# column -> tolerance for the numbers that are not ARITHMETIC (a column <name>_accuracy: as <name>)
TOLERANCE = {
    c: FITTED
    for c in (
        # the noise-corrected interval: Fisher scoring stops once a step is below 1e-3 in log-parameters and converges
        # quadratically, so its optimum is known to about (1e-3)^2; the profile's ends follow it
        "rel_a",
        "rel_b",
        "r_disattenuated",
        "ci2_low",
        "ci2_high",
        "ci2_se",
        "attenuation",
        "n_eff",
        "ci2_ell",
        "r_even",
        "ci2even_low",
        "ci2even_high",
        # seeded resamples, identical on every CPU; an end is an order statistic of resampled fits (Monte-Carlo error
        # about 0.2 sd of the statistic, ~0.03 at 200 resamples)
        "boot_ci_low",
        "boot_ci_high",
        "ci2boot_low",
        "ci2boot_high",
        # split-half reliability: a mean over the study's seeded random splits (Monte-Carlo error sd / sqrt(splits),
        # ~0.005 at 200); ranks tie values within stats.partial.RANK_TIE, so a tie is never broken by the last bits
        "reliability",
        "median_reliability",
        "mean_abs_r_disattenuated",
    )
}
# a GAM row: GCV chooses the smoothing weight from a grid down to 1e-6, where (Z'Z + 2 a P) has a condition number
# near 1e10, so every number of the row carries up to 1e-6 (1.8e-9 measured between two CPUs)
ROW_TOLERANCE = {("method", "gam"): FITTED}
KEYS = ("run", "model", "metric", "method", "testset", "testset_a", "testset_b", "shots")
NUMBER = re.compile(r"[-+−]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def is_table(rel: str) -> bool:
    return not any(rel == n or rel.startswith(n) for n in NOT_TABLES)


def tables(folder: Path) -> dict[str, Path]:
    return {
        p.relative_to(folder).as_posix(): p
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != ".gitignore" and is_table(p.relative_to(folder).as_posix())
    }


def tolerance(column: str, row: dict | None = None) -> float:
    """The tolerance of one cell: its column's, or its row's where that is looser (a GAM row)."""
    base = column[: -len("_accuracy")] if column.endswith("_accuracy") else column
    tol = TOLERANCE.get(base, ARITHMETIC)
    for (col, value), t in ROW_TOLERANCE.items():
        if row is not None and row.get(col) == value:
            tol = max(tol, t)
    return tol


def _float(v) -> float | None:
    try:
        return float(str(v).replace("−", "-"))
    except (TypeError, ValueError):
        return None


def close(u, v, tol: float) -> bool:
    """Two numbers within tol (absolute below 1, relative above), NaN equal to NaN."""
    x, y = _float(u), _float(v)
    if x is None or y is None:
        return False
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return x == y or abs(x - y) <= tol * max(1.0, abs(x), abs(y))


def text_equal(u: str, v: str) -> bool:
    """Words equal; numbers written with decimals equal to one unit of their last digit, integers exactly."""
    if u == v:
        return True
    nu, nv = NUMBER.findall(u), NUMBER.findall(v)
    if NUMBER.split(u) != NUMBER.split(v) or len(nu) != len(nv):
        return False
    for a, b in zip(nu, nv):
        digits = len(a.split(".")[1].split("e")[0].split("E")[0]) if "." in a else None
        if digits is None or "." not in b:
            if a != b:
                return False
        elif not close(a, b, 1.000001 * 10.0**-digits):
            return False
    return True


def cell_equal(u: str, v: str, tol: float) -> bool:
    if u == v:
        return True
    if _float(u) is not None and _float(v) is not None:
        whole = [s for s in (u, v) if re.fullmatch(r"[-+]?\d+", s)]
        return len(whole) < 2 and close(u, v, tol)  # two integers: counts, compared exactly
    return text_equal(u, v)


def csv_changes(a: Path, b: Path) -> tuple[dict[str, int], str] | None:
    """({column: cells beyond their tolerance}, the first such cell in words) between two CSV tables of the same
    shape and header (None when the shapes or headers differ)."""
    ra, rb = (list(csv.reader(p.read_text().splitlines())) for p in (a, b))
    if len(ra) != len(rb) or not ra or ra[0] != rb[0] or any(len(x) != len(y) for x, y in zip(ra, rb)):
        return None
    out: dict[str, int] = {}
    first = ""
    for i, (x, y) in enumerate(zip(ra[1:], rb[1:]), start=2):
        row = dict(zip(ra[0], y))
        for col, u, v in zip(ra[0], x, y):
            tol = tolerance(col, row)
            if not cell_equal(u, v, tol):
                out[col] = out.get(col, 0) + 1
                if not first:
                    key = " ".join(str(row[k]) for k in KEYS if row.get(k))
                    bound = f"tolerance {tol:g}" if _float(u) is not None and _float(v) is not None else "words"
                    first = f"line {i}{f' ({key})' if key else ''} {col}: {u} here, {v} committed ({bound})"
    return out, first


def _leaves(d, path=""):
    if isinstance(d, dict):
        for k, v in d.items():
            yield from _leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            yield from _leaves(v, f"{path}[{i}]")
    else:
        yield path, d


def json_changes(a: Path, b: Path) -> str | None:
    """The first key of two JSON files beyond its tolerance, None when none is: a float within FITTED (the summary's
    numbers are means and medians of the columns, FITTED the loosest of theirs), in metrics.json within SHOWN;
    text as text_equal, everything else exactly."""
    try:
        la, lb = (dict(_leaves(json.loads(p.read_text()))) for p in (a, b))
    except ValueError:
        return "not JSON"
    for key in sorted(set(la) | set(lb)):
        u, v = la.get(key, "missing"), lb.get(key, "missing")
        if u == v or (
            isinstance(u, float) and isinstance(v, float) and close(u, v, SHOWN if a.name == "metrics.json" else FITTED)
        ):
            continue
        if isinstance(u, str) and isinstance(v, str) and text_equal(u, v):
            continue
        return f"{key}: {u} here, {v} committed"
    return None


def compare(new: Path, committed: Path) -> tuple[list[str], list[str], list[str], list[str]]:
    """(identical, equal within the tolerances, differing, missing on one side) table names; a differing CSV is
    named with the columns whose cells moved beyond their tolerance and its first such cell, e.g.
    `pooled_seeds.csv (r: 1 cell(s); line 3 (gemma linear a b) r: 0.51 here, 0.50 committed (tolerance 1e-09))`."""
    a, b = tables(new), tables(committed)
    same, within, differ = [], [], []
    for n in (n for n in a if n in b):
        if a[n].read_bytes() == b[n].read_bytes():
            same.append(n)
            continue
        if n.endswith(".csv"):
            changes = csv_changes(a[n], b[n])
            if changes is None:
                differ.append(f"{n} (its rows or columns differ)")
            elif changes[0]:
                cols = ", ".join(f"{c}: {k} cell(s)" for c, k in sorted(changes[0].items()))
                differ.append(f"{n} ({cols}; {changes[1]})")
            else:
                within.append(n)
        elif n.endswith(".json"):
            why = json_changes(a[n], b[n])
            (differ.append(f"{n} ({why})") if why else within.append(n))
        else:
            differ.append(n)
    return same, within, differ, sorted(set(a) ^ set(b))
