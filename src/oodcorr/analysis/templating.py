"""The report's Jinja2 environment: templates under analysis/templates/, autoescaped, with the few filters the
page needs. Python builds plain values (strings, numbers, lists of dicts); the templates hold every tag."""

from __future__ import annotations

import re
from functools import cache

from markupsafe import Markup, escape


def wbr(text) -> Markup:
    """Escaped text that a narrow column may wrap after '_' (a name such as insufficient_evidence), never mid-word."""
    return Markup(str(escape(str(text))).replace("_", "_<wbr>"))


def code(text) -> Markup:
    """Escaped text with its `quoted` commands and names set as code (no raw backticks in the page)."""
    return Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", str(escape(str(text)))))


def nowrap(label) -> Markup:
    """A header label (a name that may wrap after '_') that breaks only between its words, never at a word's
    hyphen ("gemma3-/270m:")."""
    words = str(escape(label)).split(" ")
    return Markup(" ".join(f"<span style='white-space:nowrap'>{w}</span>" if "-" in w else w for w in words))


@cache
def environment():
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(
        loader=PackageLoader("oodcorr.analysis", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )
    env.filters.update(wbr=wbr, code=code, nowrap=nowrap)
    return env


def joined(parts) -> Markup:
    """A section's rendered parts (Markup each) as one block, a line apart."""
    return Markup("\n".join(str(Markup(p)) for p in parts))


def render(template: str, **values) -> Markup:
    """One template rendered with `values` (Markup: safe to place into another template as is)."""
    return Markup(environment().get_template(template).render(**values))
