"""The doors between rooms stay one-way: the import contracts in pyproject.toml hold."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


#: Where `make venv` installs import-linter, off the services' path (Makefile, LINT).
LINT = Path(sys.prefix) / "lint"


def test_import_contracts_are_kept():
    """lint-imports finds no broken contract (layers, independent drivers, pika and mysql.connector kept in their rooms)."""
    assert (LINT / "importlinter").is_dir(), f"import-linter is not installed in {LINT} (make venv)"
    out = subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
                          "sys.argv = ['lint-imports', '--no-cache']; sys.exit(lint_imports_command())"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": f"{LINT}{os.pathsep}{ROOT}"})
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


def test_the_services_run_without_the_linters_packages():
    """A service process of the test venv imports what a user's install has: no rich (which import-linter
    brings and structlog would load at every start of a CLI, worker or collector)."""
    out = subprocess.run([sys.executable, "-c", "import sys, services.collector.consumer, services.scheduler.cli; "
                          "print('rich' in sys.modules)"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stdout + out.stderr
