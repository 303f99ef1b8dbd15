"""The package versions a saved study was analysed with (results/versions.json, oodcorr.records.versions), and
the check `study reanalyze` makes against them: another major version of numpy, scipy, pandas or pyarrow is
refused with one line naming the file, the package, both versions and the range to install; a minor version apart
is a one-line note; a study saved before versions were recorded is not checked."""

from __future__ import annotations

import json
from importlib.metadata import version

import pytest

from oodcorr.core.errors import UserError
from oodcorr.records import versions


def _record(tmp_path, **analysed):
    doc = json.loads(versions.document())
    doc["analysed_with"].update(analysed)
    path = tmp_path / versions.FILE
    path.write_text(json.dumps(doc))
    return path


def _shift(v: str, major: int = 0, minor: int = 0) -> str:
    a, b = (int(x) for x in v.split(".")[:2])
    return f"{a + major}.{max(b + minor, 0)}.0"


def test_the_record_names_what_the_analysis_ran_with_and_what_a_reanalysis_needs(tmp_path):
    doc = json.loads(versions.document())
    for pkg in versions.PACKAGES:
        assert doc["analysed_with"][pkg] == version(pkg)
        major = int(version(pkg).split(".")[0])
        assert doc["needs"][pkg] == f">={major},<{major + 1}"
    assert versions.check(_record(tmp_path)) is None  # this machine: nothing to say


def test_another_major_version_is_refused_naming_the_file_and_the_range(tmp_path):
    then = _shift(version("numpy"), major=-1)
    path = _record(tmp_path, numpy=then)
    with pytest.raises(UserError) as e:
        versions.check(path)
    msg = str(e.value)
    major = int(then.split(".")[0])
    now = version("numpy")
    assert msg.startswith(f"{path}: the study was analysed with numpy {then}, this machine has numpy {now}")
    assert f"numpy>={major},<{major + 1}" in msg and "\n" not in msg


def test_a_minor_version_apart_is_one_note(tmp_path):
    v = version("pandas")
    then = _shift(v, minor=1)
    note = versions.check(_record(tmp_path, pandas=then))
    assert note.startswith("note: ") and f"pandas {v} (analysed with {then})" in note
    assert "minor version apart" in note and "\n" not in note
    assert versions.check(_record(tmp_path, pyarrow=version("pyarrow") + ".post1")) is None  # a patch: silent


def test_a_study_saved_before_versions_were_recorded_is_not_checked_and_a_damaged_record_is_named(tmp_path):
    assert versions.check(tmp_path / versions.FILE) is None
    (tmp_path / versions.FILE).write_text("[1, 2]")
    with pytest.raises(UserError, match=r"versions\.json: not a versions record"):
        versions.check(tmp_path / versions.FILE)
