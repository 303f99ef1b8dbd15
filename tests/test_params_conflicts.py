"""A params.yaml that git merged with its conflict markers left in: every command that reads params names
params.yaml:LINE (the first marker) and "git merge conflict markers", exit 2, nothing written."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from oodcorr.cli import cli
from test_train_helpers import make_project


def conflicted(text: str, eol: str = "\n") -> tuple[str, int]:
    """`text` with the line after `train:` in conflict (both sides kept, markers between); the marker's line."""
    lines = text.splitlines(keepends=True)
    i = next(j for j, line in enumerate(lines) if line.startswith("train:")) + 1
    theirs = lines[i].replace("0", "1")
    lines[i : i + 1] = [f"<<<<<<< HEAD{eol}", lines[i], f"======={eol}", theirs, f">>>>>>> feature{eol}"]
    return "".join(lines), i + 1


@pytest.mark.parametrize(
    "args",
    [
        ["study", "check"],
        ["study", "runs"],
        ["data", "prepare"],
        ["train", "--run", "a"],
        ["evaluate", "--run", "a"],
        ["analyze"],
        ["sync"],
        ["study", "use", "quickstart"],
    ],
    ids=lambda a: " ".join(a),
)
def test_every_command_names_the_marker_line(tmp_path, monkeypatch, args):
    p = make_project(tmp_path, {"a": {}})
    text, line = conflicted(p.read_text())
    p.write_text(text)
    before = sorted(str(f) for f in tmp_path.rglob("*"))
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2, (res.output, res.exception)
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1, res.output
    assert lines[0].startswith(f"error: {p.name}:{line}: ") or f"/{p.name}:{line}: " in lines[0], lines[0]
    assert "git merge conflict markers" in lines[0]
    assert sorted(str(f) for f in tmp_path.rglob("*")) == before and p.read_text() == text


def test_windows_line_ends_and_a_diff3_base_marker_are_found(tmp_path):
    from oodcorr.core.errors import UserError
    from oodcorr.settings.config import load_params

    p = make_project(tmp_path, {"a": {}})
    text, line = conflicted(p.read_text().replace("\n", "\r\n"), eol="\r\n")
    p.write_text(text, newline="")
    with pytest.raises(UserError, match=rf"params.yaml:{line}: invalid YAML: git merge conflict markers"):
        load_params(p)
    p.write_text("study: {name: x}\n||||||| merged common ancestors\n")
    with pytest.raises(UserError, match=r"params.yaml:2: invalid YAML: git merge conflict markers"):
        load_params(p)


def test_a_line_of_equals_signs_inside_a_value_is_not_a_marker(tmp_path):
    from oodcorr.settings.yaml_dialect import read_yaml

    assert read_yaml("a: |\n  =======\n  text\nb: '>>>>>>> x'\n") == {"a": "=======\ntext\n", "b": ">>>>>>> x"}
