"""The data stage entry: `oodcorr data prepare` (dvc.yaml `prepare`) and `oodcorr testsets`
(imported lazily by oodcorr.cli)."""

from __future__ import annotations

import click

from oodcorr.core.errors import UserError


def _params(path: str | None) -> dict:
    """params.yaml (explicit path must exist); without one, an empty project rooted at the cwd,
    so the built-in and synthetic testsets work before any params file is written."""
    from oodcorr.settings.config import PARAMS_FILE, find_project_root, load_params

    if path:
        return load_params(path)
    root = find_project_root()
    if (root / PARAMS_FILE).exists():
        return load_params(root / PARAMS_FILE)
    return {"_root": str(root), "_path": None}


@click.group("data")
def data():
    """Testset data: prepare the testsets a study uses (see `oodcorr testsets`)."""


@data.command("prepare")
@click.option(
    "--params",
    "params_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="params file (default: params.yaml of the project)",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="output folder (default: params data.out, else data/prepared)",
)
@click.option(
    "--only",
    "only",
    multiple=True,
    metavar="NAME",
    help="prepare only this testset (repeatable); default: every testset runs and evaluate.testsets use "
    "(+ data.prepare)",
)
def prepare_cmd(params_file, out_dir, only):
    """Write one JSONL per testset plus manifest.json. Nothing is written if any testset is bad."""
    from oodcorr.data.prepare import prepare, referenced_names
    from oodcorr.records.prepared import prepared_dir

    params = _params(params_file)
    only = [n.strip() for item in only for n in item.split(",") if n.strip()]
    try:
        manifest = prepare(params, out_dir, only or None)  # None: the whole study (stale testsets removed)
    except UserError as e:  # under `dvc repro`: the .dvc files DVC rewrote for the rejected data put back
        from oodcorr.data.dvc_sources import note

        raise UserError(f"{e}{note(params['_root'])}") from None
    names = only or referenced_names(params)
    out = prepared_dir(params, out_dir)
    for name in dict.fromkeys(names):
        e = manifest["testsets"][name]
        lc = e["label_counts"]
        chosen = "  [items chosen from a pilot: data/items.json]" if "chosen from a pilot" in e["description"] else ""
        click.echo(
            f"{name:<16} {e['rows']:>7} rows  (entailment {lc['entailment']}, "
            f"non_entailment {lc['non_entailment']})  {e['source']}{chosen}"
        )
    click.echo(f"wrote {out / 'manifest.json'}")


@click.command("testsets")
@click.option(
    "--params",
    "params_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="params file (default: params.yaml of the project)",
)
def testsets(params_file):
    """List known testsets: built-ins, synthetic suite and those declared in params."""
    from oodcorr.records.prepared import prepared_dir, read_manifest
    from oodcorr.settings.registry import describe_source, known_names, label_scheme, resolve

    params = _params(params_file)
    try:
        prepared = read_manifest(prepared_dir(params))["testsets"]
    except UserError:
        prepared = {}
    rows = [("name", "source", "split", "labels", "prepared")]
    for name in known_names(params):
        try:
            spec = resolve(params, name)
            src, scheme = describe_source(spec), label_scheme(spec)
            split = (spec.get("split") or "-") if spec["kind"] == "hub" else "-"
        except UserError:  # e.g. `sick` before a path is given: still list it
            src, scheme, split = "(local only: set data.testsets.NAME.path)", "-", "-"
        n = prepared.get(name, {}).get("rows")
        rows.append((name, src, split, scheme, "-" if n is None else str(n)))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4])
