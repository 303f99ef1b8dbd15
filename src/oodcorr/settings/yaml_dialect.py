"""The YAML dialect params.yaml and DVC's files are read in: YAML 1.2 floats and booleans, a repeated key refused."""

from __future__ import annotations

import re

import yaml


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads `1e-4` as a float, as YAML 1.2 (and DVC, which reads the same file) does, and
    refuses a key given twice in one mapping (PyYAML would keep the last silently; DVC refuses the file)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node.start_mark.line + 1)
                except TypeError:  # an unhashable key: PyYAML reports it below
                    continue
                if first != key_node.start_mark.line + 1:
                    raise DuplicateKeyError(key, key_node.start_mark, first)
        return super().construct_mapping(node, deep=deep)


class DuplicateKeyError(yaml.YAMLError):
    def __init__(self, key, mark, first_line: int):
        self.problem_mark, self.problem = mark, f"duplicate key {key!r} (first given on line {first_line})"
        super().__init__(self.problem)


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |\.[0-9_]+(?:[eE][-+][0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)
# Booleans as YAML 1.2 (and DVC) read them: only true/false. PyYAML's YAML 1.1 would read a label_map key `yes`
# or `no` as True / False, and DVC rewrites params.yaml (`dvc exp run -S`) without the quotes that kept them
# strings.
_Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:bool"]
    for k, v in _Loader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


class ConflictMarkerError(yaml.YAMLError):
    """A line a git merge left (`<<<<<<< `, `=======`, `>>>>>>> `): named before YAML reads the file, which
    would otherwise report a confusing syntax error on the line after it, or read one side of the conflict."""

    def __init__(self, line: int):
        self.problem_mark = yaml.Mark("", 0, line - 1, 0, None, None)
        self.problem = "git merge conflict markers left in the file; resolve the conflict (keep one side) first"
        super().__init__(self.problem)


_CONFLICT = re.compile(r"^(?:(?:<{7}|\|{7}|>{7})(?: |\r?$)|={7}\r?$)", re.M)


def read_yaml(text: str):
    """Parse YAML the way params.yaml is parsed (scientific-notation floats included); a file with git merge
    conflict markers is refused naming the first marker's line (ConflictMarkerError)."""
    marker = _CONFLICT.search(text)
    if marker:
        raise ConflictMarkerError(text.count("\n", 0, marker.start()) + 1)
    return yaml.load(text, Loader=_Loader)


def check_yaml_text(path, text: str) -> None:
    """UserError `path:LINE: invalid YAML: ...` where `text` (the file at `path`) does not parse (conflict markers
    included): for a command that reads a params file with another parser (`study use`: round-trip YAML)."""
    from oodcorr.core.errors import UserError

    try:
        read_yaml(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        loc = f"{path}:{mark.line + 1}" if mark else str(path)
        raise UserError(f"{loc}: invalid YAML: {getattr(e, 'problem', e)}") from None
