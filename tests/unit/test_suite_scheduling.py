"""The parallel pass's scheduling (tests/conftest.py): files that build hosts of their own run one
after another, in one unit, and every other file is a unit of its own."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tests.conftest import HOSTS_UNIT, builds_hosts, pytest_xdist_make_scheduler

ROOT = Path(__file__).resolve().parents[2]
INTEGRATION = ROOT / "tests/integration"


def test_the_files_that_build_hosts_are_found_by_their_import():
    found = {p.name for p in INTEGRATION.glob("test_*.py") if builds_hosts(p)}
    assert {"test_several_hosts.py", "test_two_pools.py", "test_load_hosts.py"} <= found
    # A fault test that starts a broker of its own on this machine builds no hosts.
    assert "test_faults.py" not in found and "test_campaign.py" not in found


def test_the_multi_host_files_are_one_unit_of_the_parallel_pass():
    config = SimpleNamespace(rootpath=ROOT, getoption=lambda name: "loadfile",
                             getvalue=lambda name: ["4*popen"] if name == "tx" else None,
                             option=SimpleNamespace(numprocesses=4, tx=[]))
    scheduler = pytest_xdist_make_scheduler(config, None)
    scope = scheduler._split_scope
    assert scope("tests/integration/test_two_pools.py::test_a") == scope(
        "tests/integration/test_several_hosts.py::test_b") == HOSTS_UNIT
    assert scope("tests/integration/test_faults.py::test_c") == "tests/integration/test_faults.py"
    assert scope("tests/integration/test_faults.py::test_c") != scope("tests/integration/test_campaign.py::test_d")


def test_other_distributions_keep_xdist_s_own_scheduler():
    assert pytest_xdist_make_scheduler(SimpleNamespace(getoption=lambda name: "load"), None) is None
