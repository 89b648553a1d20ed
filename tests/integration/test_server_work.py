"""What the server did, per query, on a real managed mariadbd: the worker's runs record its
context switches, disk bytes and hit ratios, and the figures are plausible for the workload. And
per transaction, the server does the same work for the native driver as for sysbench."""

from __future__ import annotations

import shutil
import time

import pytest

from bench.scratch_server import ScratchServer
from services.common.messages.runs import Cell, RunSpec
from services.common.messages.results import RunResult
from services.common.spec.targets import ManagedTarget
from services.common.spec.workloads import DataShape, WorkloadSpec
from services.worker import prepare, runner
from services.worker.driver.contract import ConnectParams, LoadRequest
from services.worker.driver.native.parent import run_load
from services.worker.driver.sysbench import driver as sysbench_driver
from services.worker.target import managed


# Serial (run alone after the parallel pass): it judges context switches and disk bytes per query, which other processes' load inflates.
pytestmark = [pytest.mark.integration, pytest.mark.serial]

SHAPE = DataShape(tables=1, table_size=5000, engine="InnoDB")
TARGET = ManagedTarget(kind="managed", name="work", options={"innodb_buffer_pool_size": "64M"})

#: The server's own account of its work, compared per transaction between the drivers: statements
#: and protocol commands (a statement re-prepared, reset or closed per use, a cursor's fetches, BEGIN
#: as text, an extra round trip), rows and index reads (range sizes, the keys' spread over pages),
#: temporary tables and sorts, bytes each way (results fetched differently).
SERVER_WORK = ("Questions", "Com_select", "Com_begin", "Com_commit", "Com_stmt_execute", "Com_stmt_prepare",
               "Com_stmt_close", "Com_stmt_reset", "Com_stmt_fetch", "Com_set_option", "Handler_commit",
               "Handler_read_key", "Handler_read_next", "Handler_read_rnd", "Handler_read_rnd_next",
               "Handler_tmp_write", "Innodb_rows_read", "Innodb_buffer_pool_read_requests", "Created_tmp_tables",
               "Select_range", "Select_scan", "Sort_rows", "Sort_range", "Sort_scan", "Bytes_sent",
               "Bytes_received")
WORK_SHAPE = DataShape(tables=4, table_size=10000)
WORK_EVENTS = 1600




def _run(servers: managed.ServerManager, workload: str, seq: int, driver: str = "native") -> RunResult:
    run = RunSpec(run_id=f"work.{TARGET.name}.{workload}.t2.r1", campaign_id="work", campaign_name="work", seq=seq, total_runs=3,
                  cell=Cell(target=TARGET.name, workload=workload, threads=2), repetition=1, target=TARGET,
                  workload=WorkloadSpec(name=workload), data=SHAPE, driver=driver, duration=3.0, warmup=1.0,
                  seed=seq, published_at=time.time())
    result = runner.execute(run, runner.WorkerIdentity("w-work"), servers=servers)
    assert result.status == "ok", result.error
    return result


def test_write_workload_writes_to_disk_and_a_warm_read_only_one_hits_the_buffer_pool(servers):
    """oltp_write_only writes more than 0 KB per transaction; oltp_read_only right after, on the same
    warm server, finds nearly every page in the buffer pool and reads next to nothing from disk."""
    write = _run(servers, "oltp_write_only", 1).server
    assert write.kind == "managed"
    assert write.disk_write_bytes is not None and write.disk_write_bytes > 0, write
    assert 0 < write.disk_write_kb_per_transaction < 1000
    assert write.disk_read_kb_per_transaction is not None and write.disk_read_kb_per_transaction >= 0
    # Each statement wakes a server thread at least once; the load processes sleep between replies.
    assert 0.1 < write.server_ctxt_switches_per_query < 50, write
    assert 0 < write.client_ctxt_switches_per_query < 50, write
    assert write.server_cpu_us_per_query and write.server_cpu_us_per_query > 0

    read = _run(servers, "oltp_read_only", 2).server
    assert read.buffer_pool_hit_ratio is not None and read.buffer_pool_hit_ratio > 0.99, read.status_deltas
    assert read.disk_read_kb_per_transaction is not None and read.disk_read_kb_per_transaction < 1.0
    # InnoDB tables never touch the MyISAM key cache: no requests, no ratio (not a ratio of 0 or 1).
    assert read.key_cache_hit_ratio is None
    assert 0.1 < read.server_ctxt_switches_per_query < 50


def test_sysbench_driver_records_its_context_switches(servers):
    """The sysbench driver's run counts the sysbench process's context switches as the client's."""
    if shutil.which("sysbench") is None:
        pytest.fail("sysbench is not installed (deploy/ensure-services sysbench)", pytrace=False)
    server = _run(servers, "oltp_point_select", 3, driver="sysbench").server
    assert server.client_ctxt_switches is not None and 0 < server.client_ctxt_switches_per_query < 50, server
    assert server.server_ctxt_switches_per_query is not None and server.server_ctxt_switches_per_query > 0.1


def _work_per_transaction(srv: ScratchServer, run) -> dict[str, float]:
    before = srv.status("%")
    run()
    after = srv.status("%")
    return {k: (after.get(k, 0) - before.get(k, 0)) / WORK_EVENTS for k in SERVER_WORK}


@pytest.mark.parametrize("threads", [4, 16])
def test_the_server_does_the_same_work_per_transaction_for_both_drivers(mariadb_params, threads):
    """oltp_read_only at 4 connections (a load process each, blocking calls) and 16 (one epoll
    loop, non-blocking calls): every counter of the server's work per transaction is within 1% of
    sysbench's, so a difference in server CPU per statement is not a difference in what it was asked."""
    if shutil.which("sysbench") is None:
        pytest.fail("sysbench is not installed (deploy/ensure-services sysbench)", pytrace=False)
    with ScratchServer() as srv:
        params = ConnectParams(**srv.params, database="sbtest")
        prepare.ensure_tables(params, WORK_SHAPE)
        request = LoadRequest(params, WorkloadSpec(name="oltp_read_only"), WORK_SHAPE, threads, 0.0, None, 5,
                              events=WORK_EVENTS)
        run_load(request)  # both drivers then find the same warm buffer pool
        ref = _work_per_transaction(srv, lambda: sysbench_driver.run_sysbench(request))
        native = _work_per_transaction(srv, lambda: run_load(request))
    assert ref["Com_stmt_execute"] == 16 and ref["Handler_read_next"] == 400, ref
    differ = {k: (ref[k], native[k]) for k in SERVER_WORK if abs(native[k] - ref[k]) > max(0.01 * abs(ref[k]), 0.01)}
    assert not differ, f"per transaction, sysbench vs native: {differ}"
