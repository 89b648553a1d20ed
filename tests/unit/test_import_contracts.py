"""The doors between rooms stay one-way: the import contracts in pyproject.toml hold."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_are_kept():
    """lint-imports finds no broken contract (layers, independent drivers, pika and mysql.connector kept in their rooms)."""
    lint = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "BROKEN" not in out.stdout


def test_no_module_imports_in_a_cycle():
    """No two modules of services/ import each other, directly or through others, type-only imports included."""
    import grimp

    graph = grimp.build_graph("services", exclude_type_checking_imports=False)
    cycles = []
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            if imported.startswith("services.") and graph.chain_exists(imported, module):
                cycles.append(f"{module} <-> {imported}")
    assert cycles == []
