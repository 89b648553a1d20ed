"""Fidelity: the native driver sends the server what sysbench 1.0.20 sends, statement kind by kind.

Both drivers run the same fixed number of transactions (sysbench --events=N --time=0, the
native driver's events=N) against a throwaway mariadbd, whose global Com_* counters nobody
else touches; the deltas must be equal, kind by kind.
"""

from __future__ import annotations

import shutil

import pytest

from bench.scratch_server import ScratchServer
from services.common.spec.workloads import DataShape, WorkloadSpec
from services.worker import prepare
from services.worker.driver.sysbench import driver as sysbench_driver
from services.worker.driver.contract import ConnectParams, LoadRequest
from services.worker.driver.native.parent import run_load

# Serial (run alone after the parallel pass): it counts statements over fixed runs of both drivers and times them against each other.
pytestmark = [pytest.mark.integration, pytest.mark.serial]

SHAPE = DataShape(tables=2, table_size=2000)
#: select_random_* run on one table (sysbench refuses more), with k = id as prepare builds it for them.
ONE_TABLE = DataShape(tables=1, table_size=2000)
EVENTS = 200
#: The statement kinds a transaction may send. Com_stmt_prepare is left out on purpose: it counts
#: per connection, not per transaction (and equals too, see the last test).
KINDS = ("Com_select", "Com_insert", "Com_update", "Com_delete", "Com_begin", "Com_commit", "Com_rollback",
         "Com_stmt_execute")

CASES = [
    ("oltp_point_select", {}),
    ("oltp_read_only", {}),
    ("oltp_read_write", {}),
    ("oltp_write_only", {}),
    ("oltp_update_index", {}),
    ("oltp_update_non_index", {}),
    ("oltp_insert", {}),
    ("oltp_delete", {}),
    ("select_random_points", {}),
    ("select_random_ranges", {}),
    ("oltp_read_only", {"range_selects": False, "point_selects": 3}),
    ("oltp_read_write", {"skip_trx": True, "delete_inserts": 2, "index_updates": 3}),
    ("oltp_insert", {"auto_inc": False}),
]


@pytest.fixture(scope="module")
def server(mariadb_params):
    if shutil.which("sysbench") is None:
        pytest.fail("sysbench is not installed (deploy/ensure-services sysbench)", pytrace=False)
    with ScratchServer() as srv:
        params = ConnectParams(**srv.params, database="sbtest")
        prepare.ensure_tables(params, SHAPE)
        srv.db = params  # type: ignore[attr-defined]
        yield srv


def _delta(srv: ScratchServer, run) -> dict[str, int]:
    before = srv.status()
    run()
    after = srv.status()
    return {k: after.get(k, 0) - before.get(k, 0) for k in KINDS}


@pytest.mark.parametrize("name, options", CASES, ids=[f"{n}{'-' + '-'.join(o) if o else ''}" for n, o in CASES])
def test_native_sends_the_same_statements_as_sysbench(server, name, options):
    """For a fixed number of transactions, the server sees the same count of each statement kind from both drivers."""
    w = WorkloadSpec(name=name, options=options)
    shape = ONE_TABLE if name.startswith("select_random") else SHAPE
    # The tables the workload runs on (auto_inc off: id not AUTO_INCREMENT; select_random_*: k = id).
    prepare.ensure_workload_tables(server.db, shape, w)
    request = LoadRequest(server.db, w, shape, 1, 0.0, None, 5, events=EVENTS)
    ref = _delta(server, lambda: sysbench_driver.run_sysbench(request))
    native = _delta(server, lambda: run_load(request))
    assert sum(ref.values()) >= EVENTS, f"sysbench sent less than one statement per event: {ref}"
    assert native == ref


def test_each_connection_prepares_what_sysbench_prepares(server):
    """Per connection, the native driver prepares the same number of statements as sysbench's thread_init."""
    w = WorkloadSpec(name="oltp_read_write")

    def prepared(run) -> int:
        before = server.status()["Com_stmt_prepare"]
        run()
        return server.status()["Com_stmt_prepare"] - before

    request = LoadRequest(server.db, w, SHAPE, 2, 0.0, None, 5, events=10)
    ref = prepared(lambda: sysbench_driver.run_sysbench(request))
    native = prepared(lambda: run_load(request))
    assert native == ref
