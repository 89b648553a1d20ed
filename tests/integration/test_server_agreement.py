"""Agreement with the server on a real managed mariadbd: the client's count of a measured window's
transactions and the server's own (Com_commit + Com_rollback, or Com_select), read by a monitor
opened before the load (through extra_port past a thread pool), agree within 2 %."""

from __future__ import annotations

import shutil
import time

import pytest

from services.common.messages.results import RunResult
from services.common.messages.runs import Cell, RunSpec
from services.common.results import agreement
from services.common.results.rows import ResultRow
from services.common.spec.targets import ManagedTarget
from services.common.spec.workloads import DataShape, WorkloadSpec
from services.reporting.analysis import CampaignData
from services.reporting.options import ReportOptions
from services.reporting.report import analyse, render_lines
from services.worker import runner
from services.worker.target import managed

# Serial (run alone after the parallel pass): it compares the client's count with the server's over a timed window, at up to 1024 connections.
pytestmark = [pytest.mark.integration, pytest.mark.serial]

SHAPE = DataShape(tables=4, table_size=20000, engine="InnoDB")
# No quiesce: the counts compared are statement counters read around the measured window, which
# background flushing and purge do not move; waiting for them to settle only lengthened the file.
#: One thread per connection (the monitor is an ordinary connection opened before the load) ...
PLAIN = ManagedTarget(kind="managed", name="plain", quiesce=False,
                      options={"innodb_buffer_pool_size": "64M", "max_connections": "100"})
#: ... and a thread pool with room for 1024 clients (the monitor comes through extra_port).
POOLED = ManagedTarget(kind="managed", name="pooled", quiesce=False, options={
    "innodb_buffer_pool_size": "64M", "max_connections": "1100", "thread_handling": "pool-of-threads",
    "max_prepared_stmt_count": "1000000"})




_seq = iter(range(1, 1000))
#: The runs made so far in this module: the report test reads two runs an agreement test already made
#: (each costs a window and its warm-up) instead of making them again.
_made: dict[tuple[str, str, int, str], RunResult] = {}


def _run(servers: managed.ServerManager, target: ManagedTarget, workload: str, threads: int,
         driver: str = "native") -> RunResult:
    key = (target.name, workload, threads, driver)
    if key not in _made:
        _made[key] = _new_run(servers, target, workload, threads, driver)
    return _made[key]


def _new_run(servers: managed.ServerManager, target: ManagedTarget, workload: str, threads: int,
             driver: str) -> RunResult:
    seq = next(_seq)
    run = RunSpec(run_id=f"agree.{target.name}.{workload}.t{threads}.r1", campaign_id="agree", campaign_name="agree",
                  seq=seq, total_runs=12, cell=Cell(target=target.name, workload=workload, threads=threads),
                  repetition=1, target=target, workload=WorkloadSpec(name=workload), data=SHAPE, driver=driver,
                  duration=4.0, warmup=1.0, seed=seq, published_at=time.time())
    result = runner.execute(run, runner.WorkerIdentity("w-agree"), servers=servers)
    assert result.status == "ok", result.error
    return result


def _assert_agrees(result: RunResult, counter: list[str]) -> None:
    count = result.server.count
    assert count is not None and count.reason is None, count
    assert count.counter == counter
    a = result.quality.server_agreement if result.quality else None
    assert a is not None, result.quality
    # Enough transactions that 2 % is a handful of them, not rounding.
    assert a.server_transactions >= 100, a
    assert a.client_transactions == result.totals.transactions
    # The report's rule, max(2 %, in-flight / count): plain 2 % unless the transactions in flight at
    # the edges are a larger share (1024 connections of oltp_read_write complete ~1.4 each in 4 s),
    # since each of those may fall on one side only.
    assert a == agreement.assess(a.client_transactions, a.server_transactions, in_flight=a.in_flight), a
    assert a.agrees, (a, result.server.status_deltas)


COUNTERS = pytest.mark.parametrize("workload, counter", [
    ("oltp_read_write", ["Com_commit", "Com_rollback"]),
    ("oltp_point_select", ["Com_select"]),
])


# The tests on the plain server come first and the pooled one's last: each change of server starts
# one and prepares its tables again.
@COUNTERS
@pytest.mark.parametrize("threads", [1, 16])
def test_native_driver_agrees_with_the_server(servers, workload, counter, threads):
    """1 and 16 connections on a plain server, the monitor an ordinary connection."""
    _assert_agrees(_run(servers, PLAIN, workload, threads), counter)


@COUNTERS
def test_sysbench_totals_agree_with_the_server(servers, workload, counter):
    """sysbench's run totals against the server's count between readings taken before and after
    its measured process, when none of its transactions runs: a short window agrees."""
    if shutil.which("sysbench") is None:
        pytest.fail("sysbench is not installed (deploy/ensure-services sysbench)", pytrace=False)
    result = _run(servers, PLAIN, workload, 8, driver="sysbench")
    _assert_agrees(result, counter)
    # The counters stood still at both readings: the counts are the same but for a transaction
    # sysbench restarted after an error it ignores (the server may have counted its rollback).
    a = result.quality.server_agreement
    assert abs(a.client_transactions - a.server_transactions) <= result.totals.ignored_errors, a


def test_the_report_shows_both_counts_of_real_runs_and_they_agree(servers):
    """A report of real runs on a private server lists each run's client and server counts, the
    result's own, and sums them up as agreeing on every run."""
    results = [_run(servers, PLAIN, "oltp_point_select", 1), _run(servers, PLAIN, "oltp_read_write", 16)]
    runs = tuple(ResultRow.of(r) for r in results)
    data = CampaignData("agree", "agree", "finished", ("plain",), "plain", ("oltp_point_select", "oltp_read_write"),
                        (1, 16), {"name": "agree"}, runs)
    lines = render_lines(analyse(data, ReportOptions()))
    assert ("Client and server counts agree within tolerance (max(2%, in-flight / count)) on 2 of 2 runs; "
            "0 n/a.") in lines
    for r in results:
        row = next(x.split() for x in lines if r.run_id in x.split())
        client, server = (int(v.replace(",", "")) for v in row[5:7])
        assert (client, server) == (r.totals.transactions, r.server.count.server_transactions)
        assert "#" not in row


@COUNTERS
def test_native_driver_agrees_with_a_pooled_server_at_1024_connections(servers, workload, counter):
    """1024 connections on a server with a thread pool, the monitor past it through extra_port."""
    result = _run(servers, POOLED, workload, 1024)
    assert servers.current is not None and servers.current.extra_port, "a pooled server gets an extra_port"
    _assert_agrees(result, counter)
