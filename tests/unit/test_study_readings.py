"""A study's reading may cite only numbers its page's reports (or its specs) hold: a number typed
from memory, like the "index about 7 MB" no table showed, fails this test."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "studies"
STUDIES = ROOT / "examples" / "studies"
NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?")


def study_specs(name: str) -> list[str]:
    """The spec files of study ``name``, as the study runner lists them."""
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.SourceFileLoader("study_runner", str(STUDIES / "run"))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("study_runner", loader))
    loader.exec_module(module)
    return [f for f, _ in module.STUDIES[name][2]]


def numbers(text: str) -> set[str]:
    return {m.group().replace(",", "").lstrip("-") for m in NUMBER.finditer(text)}


@pytest.mark.parametrize("reading", sorted(DOCS.glob("*.reading.md")), ids=lambda p: p.name)
def test_every_number_of_a_reading_comes_from_its_page_or_its_specs(reading):
    name = reading.name.removesuffix(".reading.md")
    page = DOCS / f"{name}.md"
    sources = page.read_text().split("\n## Reading\n")[0] if page.exists() else ""
    sources += "".join((STUDIES / f).read_text() for f in study_specs(name))
    unknown = sorted(numbers(reading.read_text()) - numbers(sources))
    assert not unknown, f"{reading.name} cites numbers no report or spec of the study holds: {unknown}"


def test_the_check_catches_a_typed_number():
    """A number typed from memory is caught: the thread pool reading's "about 172,000 q/s" (the
    seed's figure was 172083, and the page holds that one)."""
    assert numbers("index about 7 MB, -14.72 and 1,000,000 rows") == {"7", "14.72", "1000000"}
    page = (DOCS / "thread-pool.md").read_text().split("\n## Reading\n")[0]
    sources = numbers(page + "".join((STUDIES / f).read_text() for f in study_specs("thread-pool")))
    assert "172083" in sources and "172000" not in sources
