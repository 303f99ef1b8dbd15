"""The pages a user reads: README.md and the statistics page stay short enough to read (at most 300 lines each),
and every relative link in README.md and docs/*.md leads to a file that exists and, where it names a section
(#anchor), to a heading of that file."""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (not - and _), spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {slug(m) for m in re.findall(r"^#{1,6} (.+)$", text, re.M)}


@pytest.mark.parametrize("page,limit", [("README.md", 300), ("docs/statistics.md", 300)])
def test_the_pages_a_user_reads_first_are_at_most_300_lines(page, limit):
    assert len((REPO / page).read_text().splitlines()) <= limit


def test_slug_is_githubs():
    assert (
        slug("Measured: the interval on a real study's own items") == "measured-the-interval-on-a-real-studys-own-items"
    )
    assert slug("`oodcorr plan`: how many examples and checkpoints") == "oodcorr-plan-how-many-examples-and-checkpoints"
    assert slug("Beside it: the even-weight estimate (`r_even`)") == "beside-it-the-even-weight-estimate-r_even"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_leads_to_a_file_and_a_heading(page):
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(target)
    assert not broken, broken
