"""The budget mode's model inputs: a pilot's testsets (pilot.pilot_model), each value a user states overriding the
pilot's, or stated values alone (DEFAULTS where none is stated), as the search (budget.search) takes them."""

from __future__ import annotations

from oodcorr.core.errors import UserError

DEFAULTS = {"ell": 0.4, "signal_sd": 0.02, "item_sd": 0.5, "id_slope": 0.5, "model": "smollm2-135m", "ood_testsets": 7}
STATED_KEYS = ("ell", "signal_sd", "item_sd", "id_slope")


def _sizes(sizes) -> dict:
    out = {}
    for text in sizes:
        name, _, n = text.partition("=")
        if not name or not n.isdigit() or int(n) < 1:
            raise UserError(f"plan: --size {text!r}: expected NAME=ITEMS with ITEMS >= 1")
        out[name] = int(n)
    return out


def _sq(v):
    return None if v is None else v * v


def _pilot_inputs(o: dict, pm: dict, study, sizes: dict) -> tuple[dict, str, dict, float, float, list, str]:
    """(OOD testsets, ID name, ID testset, length-scale, slope on ID, families, where from) from a pilot's model,
    each value stated on the command line replacing the pilot's."""
    ood = {
        name: {
            "signal_var": _sq(o["signal_sd"]) or t["signal_var"],
            "item_var": _sq(o["item_sd"]) or t["item_var"],
            "size": sizes.get(name) or max(study.available(name, o["max_items"]), t["items"]),
            # each family's own variances, for the reliability floor, unless stated values override them
            "families": t["families"] if o["signal_sd"] is None and o["item_sd"] is None else None,
        }
        for name, t in pm["ood"].items()
    }
    id_name = pm["id"]["name"]
    idt = {
        "item_var": _sq(o["id_item_sd"]) or pm["id"]["item_var"],
        "size": sizes.get(id_name) or max(study.available(id_name, o["max_items"]), pm["id"]["items"]),
    }
    ell, beta, families = (
        o["ell"] or pm["ell"],
        pm["beta"] if o["id_slope"] is None else o["id_slope"],
        pm["families"],
    )
    where = f"pilot: {pm['n_runs']} runs, {pm['n_pairs']} testset pairs; length-scale {ell:.2f}, slope on ID {beta:.2f}"
    return ood, id_name, idt, ell, beta, families, where


def _stated_inputs(o: dict, study, sizes: dict) -> tuple[dict, str, dict, float, float, list, str]:
    """The same from stated values (o's missing ones set to DEFAULTS, --ood-testsets to the study's)."""
    stated = [key for key in STATED_KEYS if o[key] is not None]
    for key in STATED_KEYS:
        o[key] = DEFAULTS[key] if o[key] is None else o[key]
    if o["ood_testsets"] is None:
        o["ood_testsets"] = study.ood_testsets or DEFAULTS["ood_testsets"]
    if o["ood_testsets"] < 2:
        raise UserError(f"plan: --ood-testsets must be >= 2, got {o['ood_testsets']}")
    ood = {
        f"ood{j + 1}": {
            "signal_var": o["signal_sd"] ** 2,
            "item_var": o["item_sd"] ** 2,
            "size": sizes.get(f"ood{j + 1}", o["max_items"]),
        }
        for j in range(o["ood_testsets"])
    }
    id_name = o["id_testset"]
    idt = {"item_var": (o["id_item_sd"] or o["item_sd"]) ** 2, "size": sizes.get(id_name, o["max_items"])}
    ell, beta = o["ell"], o["id_slope"]
    families = [(m, o["train_set"], id_name, o["shots"]) for m in o["model_names"] or [DEFAULTS["model"]]]
    said = "stated values" if stated else "assumed values (none stated: --signal-sd, --item-sd, --ell, --id-slope)"
    where = (
        f"{said}; {o['ood_testsets']} OOD testsets, length-scale {ell:g}, signal SD {o['signal_sd']:g}, item SD "
        f"{o['item_sd']:g}, slope on ID {beta:g}"
    )
    return ood, id_name, idt, ell, beta, families, where


def budget_inputs(o: dict, pilot, study) -> tuple[dict, list, str, str, dict | None]:
    """(model for search, families for the fragment, model name, a line saying where the numbers come from, the
    pilot's model or None)."""
    from oodcorr.planner.pilot import pilot_model
    from oodcorr.stats.metrics import DEFAULT_METRIC

    sizes = _sizes(o["sizes"])
    pm = None
    if pilot:
        pm = pilot_model(pilot, DEFAULT_METRIC)
        ood, id_name, idt, ell, beta, families, where = _pilot_inputs(o, pm, study, sizes)
    else:
        ood, id_name, idt, ell, beta, families, where = _stated_inputs(o, study, sizes)
    model = {
        "ood": ood,
        "id": {"name": id_name, **idt},
        "ell": ell,
        "beta": beta,
        "recipes": pm.get("recipes", {}) if pilot else {},
    }
    return model, families, o["model_name"] or families[0][0], where, pm
