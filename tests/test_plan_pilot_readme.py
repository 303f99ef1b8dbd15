"""`oodcorr plan` on this repository's own pilot (studies/pilot, its runs pulled from the studies remote in a temp
project's studies subrepo, as a fresh clone does), and README's `oodcorr plan` lines and the planner's `next:` line
typed as written: each exits 0. A testset that cannot be read in some family is left out by name with its
reliability and costs only its own pairs; the power per pair, the pairs it settles and the gate line agree."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from study_helpers import REPO, quickstart_text, sh

PILOT = REPO / "studies" / "pilot"
pytestmark = pytest.mark.skipif(
    not (REPO / "data" / "raw" / "real").is_dir() or not (REPO / ".dvc" / "studies-remote").is_dir(),
    reason="needs data/raw (make setup) and the studies remote",
)


def readme_plan_lines() -> list[str]:
    """The `dvc pull` and `oodcorr plan` lines of README's fenced bash blocks, comments cut."""
    text = (REPO / "README.md").read_text()
    lines = [ln.split("  #")[0].strip() for b in re.findall(r"```bash\n(.*?)```", text, re.S) for ln in b.splitlines()]
    return [ln for ln in lines if ln.startswith(("oodcorr plan", "dvc --cd studies pull -R -r studies pilot"))]


@pytest.fixture
def project(tmp_path) -> Path:
    """A project as a fresh clone has it: the quickstart's params.yaml, data/raw, the studies remote, and
    studies/pilot's params and .dvc files, its runs not pulled."""
    root = tmp_path / "clone"
    root.mkdir()
    (root / "params.yaml").write_text(quickstart_text())
    (root / "data").mkdir()
    (root / "data" / "raw").symlink_to(REPO / "data" / "raw")
    pilot = root / "studies" / "pilot"
    (pilot / "runs").mkdir(parents=True)
    shutil.copy(PILOT / "params.yaml", pilot / "params.yaml")
    for f in PILOT.glob("runs/*.dvc"):
        shutil.copy(f, pilot / "runs" / f.name)
    sh(["git", "init", "-q"], root)
    sh(["dvc", "init", "-q"], root)
    sh(["dvc", "init", "-q", "--subdir"], root / "studies")  # studies/: a DVC subrepo, as in this repository
    sh(["dvc", "remote", "add", "studies", str(REPO / ".dvc" / "studies-remote")], root / "studies")
    return root


PLAN = ["--examples-per-s", "3.7", "--train-hours", "0.4", "--train-steps", "64"]


@pytest.mark.slow
def test_the_pilot_unpulled_says_to_pull_then_plans_each_pair_with_its_own_testsets(project):
    res = sh(["oodcorr", "plan", "--pilot", "studies/pilot", "--budget", "20", *PLAN], project, check=False)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "not a metrics.jsonl" not in res.stderr
    assert "`dvc --cd studies pull -R -r studies pilot/runs`" in res.stderr, res.stderr
    runs = sorted(str(p.relative_to(project / "studies")) for p in project.glob("studies/pilot/runs/*.dvc"))
    sh(["dvc", "pull", "-q", "-r", "studies", *runs], project / "studies")
    out = sh(["oodcorr", "plan", "--pilot", "studies/pilot", "--budget", "20", *PLAN, "--details"], project).stdout
    # the pilot: SciTail and SNLI readable in both families; HANS reads in SmolLM2 but not in Gemma
    left = re.search(r"left out \(not scored\): (.*)", out).group(1)
    dropped = dict(re.findall(r"(\w+_real) ([0-9.]+) in", left))
    assert "hans_real" in dropped and "scitail_real" not in dropped and "snli_real" not in dropped, left
    assert all(float(v) < 0.5 for v in dropped.values())
    assert re.search(r"hans_real [0-9.]+ in gemma3-270m", left), left
    power = float(re.search(r"expected power ([0-9.]+) per pair in each family", out).group(1))
    settled = re.search(r"settles: ([0-9.]+) of (\d+) pairs", out)
    assert settled.group(2) == "1"  # SciTail ~ SNLI, the pair HANS does not touch
    assert power > 0.3 and 0 < float(settled.group(1)) <= power + 0.05  # every family must agree: at most its power
    assert "stay below the reliability gate" not in out and "no power" not in out
    assert "of families are expected" not in out or float(re.search(r"(\d+)% of families", out).group(1)) < 50
    median = re.search(r"priced on a pair of the median kept testset, (\w+), at reliability ([0-9.]+)", out)
    assert median.group(1) in ("scitail_real", "snli_real") and float(median.group(2)) >= 0.5
    assert "each seed carries about" not in out or "effectively independent checkpoints" in out.split("here")[1]


@pytest.mark.slow
def test_readme_plan_lines_and_the_next_line_run_as_typed(project):
    lines = readme_plan_lines()
    assert any("--pilot studies/pilot" in ln for ln in lines) and any("--write-params" in ln for ln in lines)
    assert not any("runs/smollm2" in ln for ln in lines)  # the quickstart's 5 checkpoints are no pilot
    nexts = []
    for line in lines:
        res = sh(["bash", "-c", line], project, check=False)
        assert res.returncode == 0, (line, res.stderr[-2000:])
        nexts += re.findall(r"^  next: `(oodcorr plan [^`]*)`", res.stdout, re.M)
    assert (project / "plan.yaml").is_file()
    assert nexts, "a plan without --write-params prints its next: line"
    for line in nexts:
        assert "..." not in line
        (project / "plan.yaml").unlink(missing_ok=True)
        res = sh(["bash", "-c", line], project, check=False)
        assert res.returncode == 0 and (project / "plan.yaml").is_file(), (line, res.stderr[-2000:])
