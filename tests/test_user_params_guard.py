"""The suite never depends on the user's params.yaml: conftest.py fails any test that opens this repository's
top-level params.yaml, and the tests that need the quickstart build it from the preset."""

from __future__ import annotations

import yaml

import conftest
from oodcorr.study import load_preset
from study_helpers import REPO, quickstart_text


def test_opening_the_repositorys_params_yaml_is_caught(monkeypatch, tmp_path):
    """The audit hook sees every way a test could read it: by absolute path and by the default relative path."""
    before = len(conftest.USER_FILES_OPENED)
    for path in (REPO / "params.yaml", "params.yaml"):
        if path == "params.yaml":
            monkeypatch.chdir(REPO)
        try:
            open(path, "rb").close()
        except FileNotFoundError:
            pass
    seen = conftest.USER_FILES_OPENED[before:]
    del conftest.USER_FILES_OPENED[before:]  # expected here: do not fail this test
    assert seen == [str(REPO / "params.yaml")] * 2
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text("study: {name: mine}\n")  # a project's own params.yaml is fine
    (tmp_path / "params.yaml").read_text()
    assert len(conftest.USER_FILES_OPENED) == before


def test_quickstart_text_is_the_quickstart_preset():
    assert yaml.safe_load(quickstart_text()) == load_preset("quickstart")
