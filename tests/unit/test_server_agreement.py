"""Agreement with the server: which counter counts a workload's transactions, how the server's
count is read from the monitor's deltas, when a run is marked, and how the monitor gets past a
thread pool."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.common.messages.results import RunQuality, RunResult, ServerReport, Totals
from services.common.messages.runs import Cell
from services.common.results import agreement
from services.common.results.rows import ResultRow
from services.common.spec import server_options
from services.common.spec.targets import ManagedTarget
from services.common.spec.workloads import DataShape, WorkloadSpec
from services.worker.target import info
from services.worker.target.connect_params import ConnectParams
from services.worker.target.lifecycle import POOL_WITHOUT_EXTRA_PORT, TargetSession, monitor_route, server_count
from services.worker.target.managed_server import ManagedServer
from services.worker.target.managed_template import ServerBuild
from services.workload.server_counter import TRANSACTION_END, ServerCounter, counter_for

SHAPE = DataShape()


@pytest.mark.parametrize("name, options, counters, per_trx", [
    ("oltp_read_write", {}, TRANSACTION_END, 1),
    ("oltp_read_only", {}, TRANSACTION_END, 1),
    ("oltp_point_select", {}, ("Com_select",), 1),
    ("oltp_update_index", {}, ("Com_update",), 1),
    ("oltp_insert", {}, ("Com_insert",), 1),
    # Without BEGIN/COMMIT, a read-only transaction is its 10 point selects and 4 ranges.
    ("oltp_read_only", {"skip_trx": True}, ("Com_select",), 14),
])
def test_the_counter_follows_the_workloads_statements(name, options, counters, per_trx):
    c = counter_for(WorkloadSpec(name=name, options=options), SHAPE)
    assert (c.counters, c.per_transaction, c.reason) == (counters, per_trx, None)


def test_statement_counts_become_transactions():
    c = ServerCounter(("Com_select",), per_transaction=14)
    assert c.transactions({"Com_select": 1400, "Com_commit": 3}) == 100
    assert ServerCounter(TRANSACTION_END).transactions({"Com_commit": 98, "Com_rollback": 2}) == 100
    assert ServerCounter(TRANSACTION_END).transactions({"Com_commit": 98}) is None


@pytest.mark.parametrize("client, server, in_flight, agrees", [
    (1000, 1000, 0, True),
    (1019, 1000, 0, True),
    (1021, 1000, 0, False),
    (979, 1000, 0, False),
    # 50 transactions in flight at the window's end allow 5 %.
    (1049, 1000, 50, True),
    (1051, 1000, 50, False),
    (10, 0, 0, False),
])
def test_a_run_is_marked_beyond_2_percent_or_its_in_flight_share(client, server, in_flight, agrees):
    a = agreement.assess(client, server, in_flight=in_flight)
    assert a is not None and a.agrees is agrees, a


def test_no_server_count_is_no_verdict():
    assert agreement.assess(100, None) is None
    assert agreement.assess(0, 0) is None


def _session(*, problem: str | None = None, error: str | None = None) -> TargetSession:
    sampler = info.StatusSampler(ConnectParams())
    sampler.error = error
    return TargetSession(params=ConnectParams(), client_cpus=None, sampler=sampler, monitor_problem=problem)


def test_the_server_count_or_why_it_is_na():
    counter = ServerCounter(TRANSACTION_END)
    ok = server_count(counter, _session(), {"Com_commit": 500, "Com_rollback": 1})
    assert (ok.server_transactions, ok.counter, ok.reason) == (501, ["Com_commit", "Com_rollback"], None)
    pooled = server_count(counter, _session(problem=POOL_WITHOUT_EXTRA_PORT), {"Com_commit": 500, "Com_rollback": 1})
    assert pooled.server_transactions is None and "thread pool" in pooled.reason
    lost = server_count(counter, _session(error="OperationalError: gone"), {})
    assert lost.server_transactions is None and "gone" in lost.reason
    split = server_count(ServerCounter((), reason="a part of a split run"), _session(), {"Com_commit": 5})
    assert split.server_transactions is None and split.reason == "a part of a split run"


def _server(options: dict[str, str], version: str = "10.11.19-MariaDB") -> ManagedServer:
    target = ManagedTarget(kind="managed", name="m", options=options)
    build = ServerBuild("system", Path("/usr/sbin/mariadbd"), None, version, None)
    return ManagedServer(target=target, key="k", build=build, dir=Path("/tmp/x"), port=3307, password="pw",
                         server_cpus=[0], client_cpus=[1], extra_port=3308)


def test_a_pooled_managed_server_gets_an_extra_port_for_the_monitor():
    pooled = _server({"thread_handling": "pool-of-threads"})
    assert "--extra-port=3308" in pooled.argv() and any(a.startswith("--extra-max-connections=") for a in pooled.argv())
    session = TargetSession(params=pooled.connect_params(), client_cpus=None, server=pooled)
    params, problem = monitor_route(session)
    assert (params.host, params.port, params.unix_socket, problem) == ("127.0.0.1", 3308, None, None)
    plain = _server({})
    assert not any("extra" in a for a in plain.argv())
    assert monitor_route(TargetSession(params=plain.connect_params(), client_cpus=None, server=plain)) == (
        plain.connect_params(), None)


def test_a_dsn_pool_is_monitored_through_its_extra_port_or_not_counted():
    params = ConnectParams(host="db", port=3306, user="u")
    ident = info.ServerIdentity("10.11", "", {}, thread_handling="pool-of-threads", extra_port=3307)
    route, problem = monitor_route(TargetSession(params=params, client_cpus=None, identity=ident))
    assert (route.host, route.port, problem) == ("db", 3307, None)
    closed = info.ServerIdentity("10.11", "", {}, thread_handling="pool-of-threads", extra_port=0)
    assert monitor_route(TargetSession(params=params, client_cpus=None, identity=closed))[1] == POOL_WITHOUT_EXTRA_PORT


@pytest.mark.parametrize("name", ["extra_port", "extra-max-connections"])
def test_a_spec_may_not_set_the_monitors_port(name):
    assert "set by the worker" in (server_options.reserved_problem(name) or "")


def test_the_row_shows_the_servers_count_and_the_mark():
    a = agreement.assess(900, 1000)
    quality = RunQuality(planned_s=5, wall_s=5, overrun_s=0, server_agreement=a)
    result = RunResult(run_id="c.t.w.t1.r1", campaign_id="c", cell=Cell(target="t", workload="w", threads=1),
                       repetition=1, status="ok", worker="w", host="h", started_at=0, ended_at=5, measured_s=5,
                       totals=Totals(transactions=900), quality=quality,
                       server=ServerReport(count={"counter": ["Com_commit", "Com_rollback"], "server_transactions": 1000}))
    again = RunResult.model_validate_json(result.encode())
    row = ResultRow.of(again)
    assert row.server_count.server_transactions == 1000
    assert row.server_agreement.agrees is False and row.server_agreement.off == 0.1


class _StatusConn:
    """A connection whose SHOW GLOBAL STATUS answers at once (the sampler's timing alone is tested)."""

    def cursor(self):
        return self

    def execute(self, sql):
        pass

    def fetchall(self):
        return [("Com_commit", "1")]

    def close(self):
        pass


def test_the_monitor_samples_at_the_windows_edges_between_its_regular_samples():
    """With a sample due only every 10 s, the window's edges are still read within a few ms of them."""
    import threading
    import time

    s = info.StatusSampler(ConnectParams(), interval=10.0)
    s._conn = _StatusConn()
    s._thread = threading.Thread(target=s._loop, daemon=True)
    s._thread.start()
    edges = (time.time() + 0.1, time.time() + 0.25)
    s.sample_at(*edges)
    time.sleep(0.4)
    s.stop()
    times = [t for t, _, _ in s.samples]
    assert len(times) == 3, times  # two edges and the last one at stop
    for edge, t in zip(edges, times):
        assert 0 <= t - edge < 0.05, (edge, t)
