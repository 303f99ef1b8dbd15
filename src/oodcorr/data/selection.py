"""The items a study scores, chosen from a pilot: data/items.json (written by `oodcorr select-items`, a dependency
of the prepare stage in dvc.yaml). For every testset it names, prepare keeps exactly the listed items (instead of
a seeded sample of data.max_examples), so a study scores only them; testsets it does not name are prepared as
before. `{"testsets": {}}` (the file committed with the project) chooses nothing."""

from __future__ import annotations

import json

from oodcorr.core.errors import UserError
from oodcorr.select import ITEMS_FILE
from oodcorr.settings.project import Project

__all__ = ["ITEMS_FILE", "keep_chosen", "read_selection"]


def read_selection(project: Project) -> dict[str, list[str]]:
    """{testset: [item id, ...]} from the project's data/items.json; {} when the file is absent. A file that does
    not read is one line naming it and what is wrong."""
    path = project.path(ITEMS_FILE)
    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{ITEMS_FILE}: cannot read it ({e}); write it again with `oodcorr select-items`") from None
    except json.JSONDecodeError as e:
        raise UserError(
            f"{ITEMS_FILE}:{e.lineno}: not JSON ({e.msg}); write it again with `oodcorr select-items`"
        ) from None
    testsets = doc.get("testsets") if isinstance(doc, dict) else None
    if not isinstance(testsets, dict):
        raise UserError(f"{ITEMS_FILE}: testsets: expected a mapping testset -> {{ids: [...]}}, as select-items writes")
    out = {}
    for name, entry in testsets.items():
        ids = entry.get("ids") if isinstance(entry, dict) else None
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i for i in ids):
            raise UserError(f"{ITEMS_FILE}: testsets.{name}.ids: expected a non-empty list of item ids (texts)")
        if len(set(ids)) != len(ids):
            raise UserError(f"{ITEMS_FILE}: testsets.{name}.ids: an id is listed twice")
        out[str(name)] = ids
    return out


def keep_chosen(rows: list[dict], name: str, ids: list[str]) -> list[dict]:
    """The rows of testset `name` whose id is chosen, in the file's row order; a chosen id the testset lacks is one
    line (the selection was made on another version of the testset)."""
    chosen = set(ids)
    kept = [r for r in rows if r["id"] in chosen]
    if len(kept) != len(chosen):
        missing = sorted(chosen - {r["id"] for r in kept})
        raise UserError(
            f"{ITEMS_FILE}: testsets.{name}: {len(missing)} chosen item(s) are not in the testset (e.g. "
            f"{missing[0]!r}): the pilot scored another version of {name}; choose again with `oodcorr select-items`"
        )
    return kept
