"""docs/architecture.md names real modules: every path it gives in backticks exists, and for each kind of
addition its "Where things go" table names the one module to change."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs/architecture.md"
_PATH = re.compile(r"`((?:services|tests)/[\w/.-]*)`")


def _where_things_go() -> dict[str, str]:
    section = PAGE.read_text().split("\n## Where things go")[1].split("\n## ")[0]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| a ")]
    return {cells[0].removeprefix("| "): cells[1] for cells in rows}


def test_every_module_path_the_page_names_exists():
    """A path in backticks (`services/...py`, `services/.../`, `tests/...py`) is a file or folder of the tree."""
    named = set(_PATH.findall(PAGE.read_text()))
    assert len(named) > 30
    assert sorted(p for p in named if not (ROOT / p).exists()) == []


def test_each_addition_names_one_module_to_change():
    """A workload, a report format, a target kind, a driver and a bus message each have a row whose
    "change" cell names exactly one module path (and the bus message's is codec.py)."""
    rows = _where_things_go()
    assert set(rows) == {"a workload", "a report format", "a target kind", "a driver", "a bus message"}
    named = {kind: _PATH.findall(cell) for kind, cell in rows.items()}
    assert all(len(paths) == 1 and paths[0].endswith(".py") for paths in named.values()), named
    assert named["a bus message"] == ["services/common/messages/codec.py"]
