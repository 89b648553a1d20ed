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
from services.worker.target import info, status_clock
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


def test_a_dated_status_reads_the_servers_instant_and_status_names():
    """The counters come with the middle of the server's two clock readings around them, under
    SHOW GLOBAL STATUS's names; a reply without both readings is refused by name."""
    rows = [(status_clock.BEFORE, "1700000000.100000"), ("COM_COMMIT", "42"), ("THREADPOOL_THREADS", "7"),
            ("SOME_NEW_STATUS", "1"), ("VERSION_NOTE", "text"), (status_clock.AFTER, "1700000000.100400")]
    names = {"COM_COMMIT": "Com_commit", "THREADPOOL_THREADS": "Threadpool_threads"}
    status, at = status_clock.dated_status(rows, names)
    assert status == {"Com_commit": 42.0, "Threadpool_threads": 7.0, "SOME_NEW_STATUS": 1.0}
    assert at == pytest.approx(1700000000.1002, abs=1e-6)
    with pytest.raises(ValueError, match=status_clock.AFTER):
        status_clock.dated_status(rows[:-1], {})


def test_the_servers_clock_is_set_by_the_shortest_round_trip():
    """Of three trips, the 0.2 ms one says the server's clock is 5 s ahead (the 40 ms one would say 5.019)."""
    trips = [(100.0, 100.040, 105.039), (101.0, 101.0002, 106.0001), (102.0, 102.010, 107.008)]
    assert status_clock.clock_offset(trips) == pytest.approx(5.0, abs=1e-9)
    with pytest.raises(ValueError):
        status_clock.clock_offset([])


class _Server:
    """A server whose clock runs ``ahead`` of the worker's, answering the monitor's statements on a
    worker clock the test moves: each dated read happens ``read_after`` s after the send and its
    reply arrives ``reply_after`` s after that (the load's queueing)."""

    def __init__(self, clock: list[float], *, ahead: float, read_after: float = 0.0001, reply_after: float = 0.0001):
        self.clock, self.ahead, self.read_after, self.reply_after = clock, ahead, read_after, reply_after
        self.com_select = 0
        self.sent: list[str] = []
        self._rows: list[tuple] = []

    def cursor(self):
        return self

    def close(self):
        pass

    def execute(self, sql):
        self.sent.append(sql)
        if sql.startswith("SELECT"):
            self.com_select += 1  # counted as it begins, so its own reading holds it
        if sql == status_clock.DATED_STATUS:
            self.clock[0] += self.read_after
            t = self.clock[0] + self.ahead
            self._rows = [(status_clock.BEFORE, f"{t - 0.00005:.6f}"), ("COM_SELECT", str(self.com_select + 1000)),
                          (status_clock.AFTER, f"{t + 0.00005:.6f}")]
            self.clock[0] += self.reply_after
        elif sql == "SHOW GLOBAL STATUS":
            self._rows = [("Com_select", str(self.com_select + 1000))]
        else:
            self._rows = []

    def fetchall(self):
        return self._rows


class _Probe:
    """A probe that sends two SELECTs at each sample, as the pool's would."""

    def __init__(self, server: _Server):
        self.server, self.selects = server, []

    def sample(self, cursor, now):
        for _ in range(2):
            cursor.execute("SELECT 1")
        self.selects.append((now, 2))


def test_a_sample_is_dated_when_the_server_read_it_not_by_its_round_trip(monkeypatch):
    """Under load the reply comes 150 ms after the server read its counters: the sample keeps the
    server's instant on the worker's clock (the round trip's middle would be 75 ms late), and
    Com_select holds none of the monitor's own SELECTs nor its probe's."""
    clock = [1000.0]
    monkeypatch.setattr(info.time, "time", lambda: clock[0])
    server = _Server(clock, ahead=-3.0)
    s = info.StatusSampler(ConnectParams())
    probe = _Probe(server)
    s.probes = (probe,)
    s._conn = server
    s._calibrate()
    assert s.offset == pytest.approx(-3.0, abs=1e-4)
    s._sample()
    server.read_after, server.reply_after = 0.010, 0.150
    sent = clock[0]
    s._sample()
    t, status, _ = s.samples[-1]
    assert t == pytest.approx(sent + 0.010, abs=2e-4)
    assert status["Com_select"] == 1000  # the load sent none
    assert sum(n for _, n in probe.selects) == 4 and server.com_select == 3 + 2 + 4


def test_without_the_table_a_sample_is_dated_by_its_round_trip(monkeypatch):
    """A server that cannot date its status (no information_schema.GLOBAL_STATUS) is read with
    SHOW GLOBAL STATUS, at the middle of the round trip."""
    clock = [1000.0]
    monkeypatch.setattr(info.time, "time", lambda: clock[0])
    server = _Server(clock, ahead=0.0)
    real = server.execute

    def execute(sql):
        if sql == status_clock.DATED_STATUS:
            server.com_select += 1  # the server counts a SELECT before it finds the table missing
            raise RuntimeError("1109 (42S02): Unknown table 'GLOBAL_STATUS' in information_schema")
        real(sql)
        if sql == "SHOW GLOBAL STATUS":
            clock[0] += 0.1

    server.execute = execute
    s = info.StatusSampler(ConnectParams())
    s._conn = server
    s._calibrate()
    s._sample()
    # Sent at 1000.1 (after the calibration's own SHOW), answered at 1000.2.
    assert s.offset is None and s.samples[0][0] == pytest.approx(1000.15) and s.samples[0][1]["Com_select"] == 1000


def test_read_now_waits_for_a_sample_taken_after_it_was_asked():
    """The sysbench driver's reading between its processes: a fresh sample, its instant returned;
    None from a sampler that does not run."""
    import threading
    import time

    s = info.StatusSampler(ConnectParams(), interval=10.0)
    assert s.read_now() is None
    s._conn = _StatusConn()
    s._thread = threading.Thread(target=s._loop, daemon=True)
    s._thread.start()
    asked = time.time()
    at = s.read_now(timeout=2.0)
    assert at is not None and at >= asked and at == s.samples[-1][0] and len(s.samples) == 1
    s.stop()
    assert s.read_now() is None


def test_a_count_between_quiet_readings_takes_the_samples_there():
    """sysbench's count runs between the readings before and after its measured process, whatever
    the worker's window says; the samples in between do not change it."""
    from services.common.messages.results import Latency, Series
    from services.worker.driver.contract import LoadOutcome
    from services.worker.target.lifecycle import report

    sampler = info.StatusSampler(ConnectParams())
    sampler.samples = [(9.0, {"Com_commit": 100, "Com_rollback": 0}, None),
                       (10.2, {"Com_commit": 250, "Com_rollback": 0}, None),  # the warm-up's last
                       (10.3, {"Com_commit": 250, "Com_rollback": 0}, None),  # between the processes
                       (12.0, {"Com_commit": 500, "Com_rollback": 1}, None),
                       (14.1, {"Com_commit": 770, "Com_rollback": 1}, None),  # after the measured one
                       (15.0, {"Com_commit": 770, "Com_rollback": 1}, None)]
    session = TargetSession(params=ConnectParams(), client_cpus=None, sampler=sampler)
    outcome = LoadOutcome(totals=Totals(transactions=521), series=Series(), latency=Latency(), errors_by_code={},
                          warmup_s=0.0, measured_s=3.7, started_at=10.0, ended_at=14.0, server_window=(10.3, 14.1))
    server = report(session, outcome, ServerCounter(TRANSACTION_END), to_end=True)
    assert server.count.server_transactions == 521
