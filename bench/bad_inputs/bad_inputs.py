"""Bad-input bench: bad params, bad command-line options, damaged files and hostile environments, each run as
the real `oodcorr` command (a subprocess, as a user runs it) in a copy of a small finished project (a tiny
model trained, evaluated and analysed). Every case is classified:

  clean_error       non-zero exit, exactly one `error: ...` line (warning lines aside), no traceback
  correct           expected to work (e.g. a UTF-8 BOM, a corrupt cache file rescored) and it did
  traceback         a Python traceback reached the user
  wrongly_accepted  exit 0 where an error was due
  unclear_error     non-zero exit without exactly one error line, or an error line not naming what is wrong
  wrong_behaviour   expected to work, and it did not (or did the wrong thing)
  secret_leaked     a planted credential (bad_inputs_runner.SECRET) was printed or written to a file
  data_changed      (counted separately) a file outside the case's own allowed changes differs afterwards

    PYTHONPATH=src python bench/bad_inputs/bad_inputs.py [--only SUBSTRING] [--jobs 2]

writes bench/bad_inputs/results/bad_inputs.json. `tests/test_bad_inputs_bench.py` runs the same cases (one per item
fast, the rest marked slow).

The cases live one module per concern, each with `cases() -> list[Case]`: bad_inputs_params.py (params.yaml
values, keys and files: a PARAMS row), bad_inputs_cli.py (command-line options, --out and the results folder),
bad_inputs_data.py (prepared and local data files), bad_inputs_runs.py (runs, checkpoints, the evaluation
cache, a second process), bad_inputs_env.py (OODCORR_* variables, disk full / read-only),
bad_inputs_analysis.py (what the analysis correlates: degenerate series, damaged metrics rows),
bad_inputs_tracking.py (the MLflow store), bad_inputs_saved.py (saved studies: save, reanalyze, verify; the
prediction files the analysis reads), bad_inputs_planner.py (`oodcorr plan`'s inputs),
bad_inputs/bad_inputs_team.py (what a team meets: merge conflict markers, files of a newer version, restored
backups, a holder left behind, other package versions). A new case is one Case (or PARAMS row) in its
concern's module; bad_inputs_runner.py is the shared runner (base project, Case, params mutations,
classification, the results file).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the concern modules, also when loaded by a test
sys.path.insert(1, str(Path(__file__).resolve().parent / "bad_inputs"))  # the concern modules' new folder

import bad_inputs_analysis  # noqa: E402
import bad_inputs_cli  # noqa: E402
import bad_inputs_data  # noqa: E402
import bad_inputs_env  # noqa: E402
import bad_inputs_params  # noqa: E402
import bad_inputs_planner  # noqa: E402
import bad_inputs_runs  # noqa: E402
import bad_inputs_saved  # noqa: E402
import bad_inputs_team  # noqa: E402
import bad_inputs_tracking  # noqa: E402
from bad_inputs_runner import Case, build_base, run_case  # noqa: E402,F401  (what tests use)
from bad_inputs_runner import main as run_cases  # noqa: E402

# one module per concern, each with cases() -> list[Case]; a new case goes into its concern's module, a new
# concern is one module here
CONCERNS = (
    bad_inputs_params,
    bad_inputs_cli,
    bad_inputs_data,
    bad_inputs_runs,
    bad_inputs_env,
    bad_inputs_analysis,
    bad_inputs_tracking,
    bad_inputs_saved,
    bad_inputs_planner,
    bad_inputs_team,
)
CASES = [case for concern in CONCERNS for case in concern.cases()]


def main(argv=None) -> dict:
    return run_cases(CASES, argv, description=__doc__.split("\n\n")[0])


if __name__ == "__main__":
    main()
