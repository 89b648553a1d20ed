"""The README and the docs pages link only to files that exist and to headings those files have, so moving
a section between pages cannot leave a reader on a dead link."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from services.common.spec.loading import parse_spec

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _outside_code(text: str) -> list[str]:
    lines, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    found = set()
    for line in _outside_code(page.read_text()):
        if m := re.match(r"#{1,6} (.+)", line):
            found.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return found


def test_anchors_follow_githubs_rule():
    """A heading with punctuation gets the anchor the pages link to."""
    ops = ROOT / "docs/operations.md"
    assert {"several-machines-and-what-happens-on-each-fault", "exit-codes", "settings"} <= anchors(ops)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_heading(page):
    """Each relative link of the page names a file that exists and, after `#`, one of its headings."""
    dead = []
    for line in _outside_code(page.read_text()):
        for target in _LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists() or (anchor and dest.suffix == ".md" and anchor not in anchors(dest)):
                dead.append(target)
    assert dead == []


@pytest.mark.parametrize("page", ["README.md", "docs/specs.md"])
def test_the_pages_first_spec_validates(page):
    """The first spec a page shows is one `scheduler validate` accepts, so a reader may start from it."""
    text = (ROOT / page).read_text().split("```yaml\n")[1].split("```")[0]
    assert parse_spec(text, page).targets


def test_every_repository_path_a_page_names_exists():
    """A path in backticks (`services/...`, `tests/...`, `deploy/...`, `examples/...`, `bench/...`) is in the tree."""
    named = {p for page in PAGES if "studies" not in page.parts
             for p in re.findall(r"`((?:services|tests|deploy|examples|bench)/[\w/.-]*)`", page.read_text())}
    assert len(named) > 50
    assert sorted(p for p in named if not (ROOT / p).exists()) == []
