"""docs/workloads.md and the registry agree: one row per workload, naming the script its source names."""

from __future__ import annotations

import re
from pathlib import Path

from services.workload.registry import CATALOGUE, WORKLOADS

ROOT = Path(__file__).resolve().parents[2]


def _rows() -> dict[str, list[str]]:
    rows = {}
    for line in (ROOT / CATALOGUE).read_text().splitlines():
        m = re.match(r"^\| `([a-z_]+)` \|", line)
        if m:
            rows[m.group(1)] = [cell.strip() for cell in line.strip("|").split("|")]
    return rows


def test_every_workload_has_one_catalogue_row_and_every_row_is_a_workload():
    """Each registered name has its row in docs/workloads.md, and the table names nothing else."""
    assert set(_rows()) == set(WORKLOADS)


def test_each_row_cites_the_script_and_commit_the_registry_names():
    """The row's source cell holds the script path and the commit (tag or hash) of the registry's source,
    and the registry's source points at the catalogue."""
    rows = _rows()
    for name, w in WORKLOADS.items():
        assert w.source.endswith(f"({CATALOGUE})")
        script = re.search(r"(src/lua/\w+\.lua|sysbench/tests/db/\w+\.lua)", w.source).group(1)
        commit = re.search(r"akopytov/sysbench (\S+)", w.source).group(1)
        source_cell = rows[name][1]
        assert script.split("/")[-1] in source_cell and script.rsplit("/", 1)[0] in source_cell, (name, source_cell)
        assert commit in source_cell, (name, commit, source_cell)
