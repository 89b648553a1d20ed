"""Random-stream parity: at one connection the native driver sends, statement for statement and
value for value, what sysbench 1.0.20 sends for the same --rand-seed.

Both drivers run the same fixed number of transactions against a throwaway mariadbd whose
general log goes to a table; the statements of the one connection that ran the workload are
compared in order, keys, digit strings and all. sysbench runs without --report-interval: its
report thread would seed its stream first most of the time and leave the worker the second
(docs/drivers.md, "Random streams").
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from bench.scratch_server import ScratchServer
from services.common.spec.workloads import DataShape, WorkloadSpec
from services.worker import prepare
from services.worker.driver.contract import ConnectParams, LoadRequest
from services.worker.driver.native.parent import run_load
from services.worker.driver.sysbench import driver as sysbench_driver

pytestmark = pytest.mark.integration

SHAPE = DataShape(tables=3, table_size=5000)
EVENTS = 25
SEED = 20101
#: What a workload sends: the statements on the sbtest tables and the transaction's bounds.
WORKLOAD_SQL = re.compile(r"(?i)^(begin|commit)$|\bsbtest\d")

CASES = [
    ("oltp_point_select", {}),
    ("oltp_read_only", {}),
    ("oltp_read_write", {}),
    ("oltp_write_only", {}),
    ("oltp_update_index", {}),
    ("oltp_update_non_index", {}),
    ("oltp_delete", {}),
    ("oltp_insert", {}),
    ("oltp_read_only", {"rand_type": "uniform"}),
    ("oltp_read_only", {"rand_type": "gaussian"}),
    ("oltp_read_only", {"rand_type": "pareto"}),
    ("oltp_read_write", {"rand_type": "special", "rand_spec_pct": 5, "rand_spec_res": 50, "rand_spec_iter": 7}),
    ("oltp_read_only", {"db_ps_mode": "disable"}),
    # A count of 0 still draws its table in sysbench (execute_* draw it before their loop).
    ("oltp_read_write", {"point_selects": 0, "non_index_updates": 0, "delete_inserts": 2, "skip_trx": True}),
    ("oltp_read_only", {"range_selects": False, "point_selects": 3, "range_size": 7}),
]


@pytest.fixture(scope="module")
def server(mariadb_params):
    if shutil.which("sysbench") is None:
        pytest.fail("sysbench is not installed (deploy/ensure-services sysbench)", pytrace=False)
    with ScratchServer(options=["--log-output=TABLE", "--general-log=0"]) as srv:
        params = ConnectParams(**srv.params, database="sbtest")
        prepare.ensure_tables(params, SHAPE)
        srv.db = params  # type: ignore[attr-defined]
        yield srv


def _statements(srv: ScratchServer, run) -> list[tuple[str, str]]:
    """The workload statements (command, text) the one connection that ran them sent during ``run``."""
    srv.query("TRUNCATE TABLE mysql.general_log")
    srv.query("SET GLOBAL general_log = 1")
    try:
        run()
    finally:
        srv.query("SET GLOBAL general_log = 0")
    rows = srv.query("SELECT thread_id, command_type, argument FROM mysql.general_log")
    by_thread: dict[int, list[tuple[str, str]]] = {}
    for thread, command, argument in rows:
        text = argument.decode() if isinstance(argument, (bytes, bytearray)) else str(argument)
        if command in ("Execute", "Query") and WORKLOAD_SQL.search(text.strip()):
            by_thread.setdefault(int(thread), []).append((str(command), text.strip()))
    assert by_thread, "the general log holds no workload statement"
    # The run's connection is the one that sent the most (other connections only look at tables).
    return max(by_thread.values(), key=len)


def _sysbench(request: LoadRequest) -> None:
    argv = sysbench_driver.command(request.workload, request.data, threads=1, seed=request.seed,
                                   events=request.events, report_interval=0,
                                   params=request.params)
    env = sysbench_driver.sysbench_env(request.params, None)
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


@pytest.mark.parametrize("name, options", CASES, ids=[f"{n}{'-' + '-'.join(o) if o else ''}" for n, o in CASES])
def test_native_sends_what_sysbench_sends_at_one_connection(server, name, options):
    """The same seed gives the same statements with the same keys and strings, in the same order."""
    w = WorkloadSpec(name=name, options=options)
    prepare.ensure_workload_tables(server.db, SHAPE, w)
    request = LoadRequest(server.db, w, SHAPE, 1, 0.0, None, SEED, events=EVENTS)
    ref = _statements(server, lambda: _sysbench(request))
    native = _statements(server, lambda: run_load(request))
    assert len(ref) >= EVENTS
    first_difference = next((i for i, (a, b) in enumerate(zip(ref, native)) if a != b), None)
    assert first_difference is None, (f"statement {first_difference}: sysbench {ref[first_difference]} "
                                      f"native {native[first_difference]}")
    assert len(native) == len(ref)


def test_another_seed_draws_other_keys(server):
    """The comparison can fail: a different seed gives different statements."""
    w = WorkloadSpec(name="oltp_point_select")
    a = _statements(server, lambda: run_load(LoadRequest(server.db, w, SHAPE, 1, 0.0, None, SEED, events=EVENTS)))
    b = _statements(server, lambda: run_load(LoadRequest(server.db, w, SHAPE, 1, 0.0, None, SEED + 1,
                                                         events=EVENTS)))
    assert len(a) == len(b) == EVENTS and a != b
