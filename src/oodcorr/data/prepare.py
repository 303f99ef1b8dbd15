"""The prepare stage: testsets -> data/prepared/<name>.jsonl + manifest.json.

Everything is loaded and validated in memory first; files are written (atomically) only when every
requested testset is fine, so a bad entry never leaves a half-updated folder behind. The manifest is
merged: preparing a subset (`--only`) keeps the entries of testsets prepared earlier.
"""

from __future__ import annotations

from pathlib import Path

from oodcorr.core import io
from oodcorr.core.errors import UserError
from oodcorr.data.loaders import label_counts, load_testset, subsample
from oodcorr.data.selection import ITEMS_FILE, keep_chosen, read_selection
from oodcorr.data.settings import PrepareSettings
from oodcorr.records.prepared import MANIFEST, prepared_dir, read_manifest_file, scored_testsets, testset_file
from oodcorr.settings.project import Project
from oodcorr.settings.registry import describe_source, resolve


def referenced_names(params: dict, settings: PrepareSettings | None = None) -> list[str]:
    """Every testset the study uses: the runs' train_set / id_testset and evaluate.testsets, plus any
    extra names in the optional `data.prepare` (prepared though nothing evaluates them). A testset is thus
    declared in one place (data.testsets, or a built-in) and prepared because something uses it."""
    names: list[str] = []
    for run in (params.get("runs") or {}).values():
        for key in ("train_set", "id_testset"):
            if (run or {}).get(key):
                names.append(run[key])
    names += scored_testsets(params)
    names += list((settings or PrepareSettings.from_params(params)).prepare)
    return list(dict.fromkeys(names))


def build(
    params: dict,
    name: str,
    data: PrepareSettings | None = None,
    project: Project | None = None,
    chosen: dict | None = None,
) -> tuple[list[dict], dict]:
    """Rows of one testset (mapped + subsampled, or the items data/items.json chooses) and its manifest entry
    without the sha256. `params` is read for the registry only; `data`, `project` and `chosen` are resolved from
    it when the caller has not (prepare has)."""
    data = data or PrepareSettings.from_params(params)
    project = project or Project.from_params(params)
    chosen = read_selection(project) if chosen is None else chosen
    spec = resolve(params, name)
    rows = load_testset(spec, project, data)
    description = spec.get("description", "")
    if name in chosen:  # the items a pilot chose, instead of a sample
        n_all = len(rows)
        rows = keep_chosen(rows, name, chosen[name])
        description = f"{description}; {len(rows)} of {n_all} items chosen from a pilot ({ITEMS_FILE})"
    else:  # data.testsets.<name>.max_examples, else the built-in's (the training pools keep all rows), else data's
        n = spec["max_examples"] if "max_examples" in spec else data.max_examples
        rows = subsample(rows, n, data.seed, name)
    return rows, {
        "rows": len(rows),
        "label_counts": label_counts(rows),
        "source": describe_source(spec),
        "split": spec.get("split"),
        "description": description,
    }


def remove_own(path: Path, entry) -> None:
    """Remove a testset file prepare wrote earlier: only when the manifest recorded it and its content is still
    what was recorded (a file changed or put there by someone else is left alone, and leaves the manifest)."""
    recorded = entry.get("sha256") if isinstance(entry, dict) else None
    if path.is_file() and not path.is_symlink() and recorded and io.sha256_file(path) == recorded:
        path.unlink()


def prepare(params: dict, out_dir: str | Path | None = None, names: list[str] | None = None) -> dict:
    """Prepare `names` (default: `referenced_names(params)`) into `out_dir`; return the manifest."""
    full = not names
    data, project = PrepareSettings.from_params(params), Project.from_params(params)  # resolved once
    names = list(dict.fromkeys(names or referenced_names(params, data)))
    if not names:
        raise UserError(
            "nothing to prepare: no run (train_set, id_testset) or evaluate.testsets names a testset; "
            "add them to params.yaml, or pass --only NAME"
        )
    chosen = read_selection(project)
    built = {name: build(params, name, data, project, chosen) for name in names}  # raises before anything is written
    out = prepared_dir(project, out_dir)
    io.clean_stale_temps(out, legacy_age=io.LEGACY_TMP_AGE_S)  # left by a killed earlier prepare
    manifest = read_manifest_file(out) or {"testsets": {}}
    for name, (rows, entry) in built.items():
        path = testset_file(out, name)
        io.write_jsonl(path, rows)
        entry["sha256"] = io.sha256_file(path)
        manifest["testsets"][name] = {
            k: entry[k] for k in ("rows", "label_counts", "sha256", "source", "split", "description")
        }
    if full:  # the whole study: data/prepared holds exactly what params.yaml uses (DVC keeps it: persist)
        for stale in sorted(set(manifest["testsets"]) - set(names)):
            remove_own(testset_file(out, stale), manifest["testsets"].pop(stale))
    manifest["testsets"] = {k: v for k, v in manifest["testsets"].items() if testset_file(out, k).exists()}
    io.write_json(out / MANIFEST, manifest)
    return manifest
