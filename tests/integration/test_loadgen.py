"""The load engine against the real MariaDB: prepare, reuse, counts the server agrees with."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import threading
import time

import pytest

from services.common.spec.workloads import DataShape, WorkloadSpec
from services.worker import prepare
from services.common.errors import LoadError
from services.worker.driver.contract import LoadRequest, Progress
from services.worker.driver.native.parent import run_load
from services.worker.target.dsn import connect
from services.worker.target.connect_params import ConnectParams

pytestmark = pytest.mark.integration
#: The tests that time their runs (the measured window, rates, wall-clock bounds) or count through the
#: shared server's userstat, which they turn on and off: run alone, after the parallel pass (Makefile).
serial = pytest.mark.serial

DB = "bf_test_loadgen"
SHAPE = DataShape(tables=2, table_size=1000)


@pytest.fixture(scope="module")
def _mariadb(mariadb_params) -> ConnectParams:
    params = ConnectParams(**mariadb_params, database=DB)
    prepare.ensure_tables(params, SHAPE)
    return params


def _query(params: ConnectParams, sql: str, database: bool = False) -> list[tuple]:
    conn = connect(params, database=database)
    try:
        cur = conn.cursor()
        cur.execute(sql)
        return cur.fetchall() if cur.with_rows else []
    finally:
        conn.close()


def _root_sql(sql: str) -> None:
    """A global setting, as the server's root over its socket (unix_socket auth as the OS root)."""
    try:
        subprocess.run(["mariadb", "--protocol=socket", "-uroot", "-e", sql], check=True, capture_output=True, timeout=30)
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"cannot change a global setting as root over the socket: {e}")


@pytest.fixture(scope="module")
def primary_rows_read(_mariadb):
    """A reader of rows read through sbtest PRIMARY keys in this test's database only.

    Global Com_select counts every client of a shared server; per-index statistics of our own
    database do not, and every id of 1..table_size exists, so a point select (or a range of
    size 1) reads exactly one row: the rows read equal the SELECTs the server executed.
    """
    (was_on,), = _query(_mariadb, "SELECT @@global.userstat")
    _root_sql("SET GLOBAL userstat = 1")  # the fleet's DB user has no SUPER (deploy/ensure-services)

    def read() -> int:
        (n,), = _query(_mariadb, "SELECT COALESCE(SUM(ROWS_READ), 0) FROM information_schema.INDEX_STATISTICS "
                                 f"WHERE TABLE_SCHEMA = '{DB}' AND INDEX_NAME = 'PRIMARY'")
        return int(n)

    yield read
    if not was_on:
        _root_sql("SET GLOBAL userstat = 0")


def _sane_latency(out) -> None:
    lat = out.latency
    assert 0 < lat.p50_ms <= lat.p95_ms <= lat.p99_ms <= lat.max_ms < 5000
    assert sum(lat.histogram["buckets"].values()) == out.totals.transactions


def test_prepare_reuses_a_matching_shape_and_recreates_a_changed_one(mariadb_params):
    """Tables are loaded once per shape: same shape reused, other shape rebuilt, both sysbench's."""
    params = ConnectParams(**mariadb_params, database="bf_test_loadgen_prep")
    small = DataShape(tables=2, table_size=300)
    prepare.cleanup(params, small)
    try:
        assert prepare.ensure_tables(params, small) is True
        assert prepare.ensure_tables(params, small) is False
        counts = _query(params, "SELECT COUNT(*), MIN(id), MAX(id) FROM sbtest2", database=True)
        assert counts == [(300, 1, 300)]
        index = _query(params, "SHOW INDEX FROM sbtest2 WHERE Key_name = 'k_2'", database=True)
        assert len(index) == 1
        (c, pad), = _query(params, "SELECT c, pad FROM sbtest1 WHERE id = 1", database=True)
        assert len(c) == 119 and len(pad) == 59 and c.count("-") == 9

        assert prepare.ensure_tables(params, DataShape(tables=1, table_size=200)) is True
        tables = {r[0] for r in _query(params, "SHOW TABLES", database=True)}
        assert tables == {"sbtest1", prepare.SHAPE_TABLE}  # sbtest2 of the old shape is gone
        assert _query(params, "SELECT COUNT(*) FROM sbtest1", database=True) == [(200,)]
    finally:
        prepare.cleanup(params, small)
    assert "sbtest1" not in {r[0] for r in _query(params, "SHOW TABLES", database=True)}


def test_auto_inc_off_prepares_plain_ids_and_oltp_insert_runs_on_them(mariadb_params):
    """auto_inc false is sysbench's --auto_inc=off: id is not AUTO_INCREMENT, ids 1..table_size
    are explicit, the shape is told apart from the default one, and oltp_insert inserts its own ids."""
    params = ConnectParams(**mariadb_params, database="bf_test_loadgen_noinc")
    shape = DataShape(tables=1, table_size=300)
    prepare.cleanup(params, shape)
    try:
        assert prepare.ensure_tables(params, shape, auto_inc=False) is True
        assert prepare.ensure_tables(params, shape, auto_inc=False) is False
        assert prepare.ensure_tables(params, shape, auto_inc=None) is False  # readers take either
        (_, ddl), = _query(params, "SHOW CREATE TABLE sbtest1", database=True)
        assert "AUTO_INCREMENT" not in ddl.upper() and "`id` int(11) NOT NULL," in ddl
        assert _query(params, "SELECT COUNT(*), MIN(id), MAX(id) FROM sbtest1", database=True) == [(300, 1, 300)]
        wl = WorkloadSpec(name="oltp_insert", options={"auto_inc": False})
        out = run_load(LoadRequest(params, wl, shape, threads=2, warmup=0, duration=1, seed=5), processes=1)
        assert out.totals.transactions > 0 and out.totals.errors == 0 and out.totals.writes == out.totals.transactions
        (n,), = _query(params, "SELECT COUNT(*) FROM sbtest1", database=True)
        # A statement in flight at the deadline may land without being counted, one per thread at most.
        assert 0 <= n - 300 - out.totals.transactions <= 2

        assert prepare.ensure_tables(params, shape) is True  # the default shape is another one
        (_, ddl), = _query(params, "SHOW CREATE TABLE sbtest1", database=True)
        assert "`id` int(11) NOT NULL AUTO_INCREMENT," in ddl
    finally:
        prepare.cleanup(params, shape)


def test_connections_use_the_c_extension(_mariadb):
    """The pinned connector's C extension loads; the pure-Python one costs twice the CPU."""
    from mysql.connector.connection_cext import CMySQLConnection

    conn = connect(_mariadb)
    try:
        assert type(conn) is CMySQLConnection
        assert conn.autocommit is True
    finally:
        conn.close()


@serial
def test_point_select_reads_equal_the_servers_select_count(_mariadb, primary_rows_read):
    """Every counted read is one SELECT the server executed, and nothing else is counted: the
    SELECTs in flight at the window's end complete after it, uncounted."""
    before = primary_rows_read()
    out = run_load(LoadRequest(_mariadb, WorkloadSpec(name="oltp_point_select"), SHAPE,
                               threads=4, warmup=0, duration=2, seed=1), processes=2)
    assert out.window is not None and out.window.in_flight_at_end <= 4
    assert out.totals.reads == primary_rows_read() - before - out.window.in_flight_at_end
    assert out.totals.transactions == out.totals.reads > 1000
    assert out.totals.errors == out.totals.writes == out.totals.other == 0
    assert len(out.series.transactions) == 2 and sum(out.series.queries) == out.totals.queries
    assert 2.0 <= out.measured_s < 2.5
    _sane_latency(out)


@serial
def test_read_only_counts_14_reads_and_2_other_per_transaction(_mariadb, primary_rows_read):
    """oltp_read_only: the server ran the SELECTs counted, and the rest of the transactions in
    flight at the window's end (a statement counts in the window it completes in); BEGIN/COMMIT
    are 'other'."""
    before = primary_rows_read()
    # range_size=1 makes each range select read one row, so rows read count statements.
    out = run_load(LoadRequest(_mariadb, WorkloadSpec(name="oltp_read_only", options={"range_size": 1}), SHAPE,
                               threads=4, warmup=0, duration=2, seed=2), processes=2)
    t = out.totals
    assert out.window is not None
    partial = out.window.in_flight_at_end
    assert t.reads <= primary_rows_read() - before <= t.reads + 14 * partial
    assert 14 * t.transactions <= t.reads <= 14 * (t.transactions + partial)
    assert 2 * t.transactions <= t.other <= 2 * (t.transactions + partial)
    assert sum(out.series.transactions) == t.transactions
    _sane_latency(out)


@serial
def test_warmup_is_run_but_never_counted(_mariadb, primary_rows_read):
    """The server runs warm-up queries, the outcome leaves them out."""
    before = primary_rows_read()
    out = run_load(LoadRequest(_mariadb, WorkloadSpec(name="oltp_point_select"), SHAPE,
                               threads=2, warmup=2, duration=1, seed=3), processes=1)
    executed = primary_rows_read() - before
    # Two warm-up seconds against one measured: the server saw well over the counted reads even
    # when a busy machine slows one of the three seconds (a 1:1 split failed at load average 80).
    assert executed > out.totals.reads * 1.5
    assert 1.9 <= out.warmup_s <= 2.1 and 1.0 <= out.measured_s < 1.5
    assert len(out.series.transactions) == 1


@serial
def test_stop_cancels_a_run_early_and_on_progress_reports_progress(_mariadb):
    """Setting stop ends a long run within a few seconds; progress arrives about once a second."""
    stop, seen = threading.Event(), []

    def note(progress: Progress) -> None:
        # Stop half a second after the second measured second, counted from the run's own
        # clock: a wall-clock timer would include the spawn time, which varies on a busy host.
        seen.append(progress)
        if progress.phase == "measure" and progress.elapsed_s == 2.0:
            threading.Timer(0.5, stop.set).start()

    started = time.monotonic()
    out = run_load(LoadRequest(_mariadb, WorkloadSpec(name="oltp_point_select"), SHAPE, threads=2, warmup=0,
                               duration=60, seed=4, stop=stop, on_progress=note), processes=2)
    assert time.monotonic() - started < 15
    assert 2.0 <= out.measured_s < 4.0 and len(out.series.transactions) == 3
    measured = [s for s in seen if s.phase == "measure"]
    assert [s.elapsed_s for s in measured[:2]] == [1.0, 2.0]
    assert all(a.counts.queries <= b.counts.queries for a, b in zip(measured, measured[1:]))
    assert measured[-1].counts.transactions == out.totals.transactions


def _children() -> dict[int, str]:
    """This process's children: pid -> command line."""
    out = {}
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) != os.getpid():
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                out[int(entry)] = f.read().replace(b"\0", b" ").decode()
        except (OSError, ValueError, IndexError):
            pass
    return out


def test_load_processes_are_the_only_processes_a_run_starts_and_none_outlives_it(_mariadb):
    """A worker's memory goes to its connections: no resource tracker (another interpreter, kept
    for the worker's life) is started beside the load processes, and none is left after the run.
    (Children the test process had before the run, such as another test's unreaped one, are not the run's.)"""
    before = _children()
    during: list[list[str]] = []

    def note(progress: Progress) -> None:
        if progress.phase == "measure" and not during:
            during.append([c for pid, c in _children().items() if pid not in before])

    run_load(LoadRequest(_mariadb, WorkloadSpec(name="oltp_point_select"), SHAPE, threads=2, warmup=0,
                         duration=2, seed=4, on_progress=note), processes=2)
    assert len(during[0]) == 2, during
    assert all("services.worker.driver.native.load_process" in c for c in during[0]), during
    assert [c for pid, c in _children().items() if pid not in before] == []


def test_unreachable_database_raises_load_error_with_the_mysql_code(_mariadb):
    """A target that refuses connections fails the run with the server's error code."""
    with pytest.raises(LoadError) as e:
        run_load(LoadRequest(dataclasses.replace(_mariadb, database="bf_no_such_db"),
                             WorkloadSpec(name="oltp_point_select"), SHAPE, threads=2, warmup=0, duration=1, seed=0),
                 processes=1)
    assert e.value.code == 1049
    assert "Unknown database" in str(e.value) and "1049" in str(e.value)


@pytest.mark.parametrize("name, per_tx", [
    ("oltp_read_write", (14, 4, 2)),
    ("oltp_write_only", (0, 4, 2)),
    ("oltp_update_index", (0, 1, 0)),
    ("oltp_update_non_index", (0, 1, 0)),
    ("oltp_insert", (0, 1, 0)),
    ("oltp_delete", (0, 1, 0)),
    ("select_random_points", (1, 0, 0)),
    ("select_random_ranges", (1, 0, 0)),
])
def test_other_workloads_run_cleanly(mariadb_params, name, per_tx):
    """Every catalogue workload runs on sysbench tables without errors, with sysbench's mix."""
    params = ConnectParams(**mariadb_params, database="bf_test_loadgen_rw")
    # select_random_* run on one table, as sysbench's scripts do, whose k = id
    shape = DataShape(tables=1 if name.startswith("select_random") else 2, table_size=1000)
    prepare.ensure_workload_tables(params, shape, WorkloadSpec(name=name))
    out = run_load(LoadRequest(params, WorkloadSpec(name=name), shape, threads=2, warmup=0, duration=1, seed=5),
                   processes=1)
    t = out.totals
    assert t.transactions > 0 and t.errors == 0
    # Deadlocks between two writers are expected and retried, as sysbench does; the statements
    # a retried transaction ran before the deadlock still count, the transaction does not.
    assert set(out.errors_by_code) <= {"1213", "1205", "1020"}
    reads, changes = per_tx[0], per_tx[1] + per_tx[2]
    # The statements of a transaction in flight at the window's end that completed in it count too.
    assert out.window is not None
    partial = t.ignored_errors + out.window.in_flight_at_end
    assert reads * t.transactions <= t.reads <= reads * (t.transactions + partial)
    # A write that changed no row (a delete of an id already gone) counts as "other", as in sysbench 1.0.
    assert changes * t.transactions <= t.writes + t.other <= changes * (t.transactions + partial)
    assert t.writes <= per_tx[1] * (t.transactions + partial)


@serial
def test_open_loop_below_capacity_runs_at_the_rate_with_no_queue(_mariadb):
    """A rate far below capacity: tps is the rate (Poisson noise aside) and nothing queues."""
    out = run_load(LoadRequest(_mariadb, WorkloadSpec(name="oltp_point_select"), SHAPE, threads=4, warmup=0.5,
                               duration=4, seed=11, rate=300))
    tps = out.totals.transactions / out.measured_s
    assert abs(tps - 300) < 0.15 * 300, tps
    assert len(out.series.queue) == len(out.series.transactions) >= 4
    assert max(out.series.queue) <= 20
    _sane_latency(out)


@serial
def test_open_loop_above_capacity_queues_and_latency_grows_with_the_queue(_mariadb):
    """Three times what one connection can do: the queue grows every second, and the last
    transactions waited about queue / rate, since latency counts from the intended start."""
    closed = run_load(LoadRequest(_mariadb, WorkloadSpec(name="oltp_point_select"), SHAPE, threads=1, warmup=0,
                                  duration=1, seed=12))
    rate = 3 * closed.totals.transactions / closed.measured_s
    out = run_load(LoadRequest(_mariadb, WorkloadSpec(name="oltp_point_select"), SHAPE, threads=1, warmup=0,
                               duration=3, seed=12, rate=rate))
    q = out.series.queue
    assert len(q) >= 3 and q[0] < q[1] < q[2], q
    assert q[-1] > rate  # more than a second's arrivals are waiting at the end
    waited_ms = 1000 * q[-1] / rate
    assert 0.7 * waited_ms < out.latency.max_ms < 1.4 * waited_ms, (out.latency.max_ms, waited_ms)
    assert out.measured_s < 3.5  # the backlog is left unstarted at the deadline, not worked off
    assert out.latency.p50_ms > 20 * closed.latency.p50_ms


@serial
def test_an_open_loop_backlog_past_its_bound_ends_the_run_with_what_it_measured(_mariadb):
    """A million arrivals a second on one connection: the backlog passes its bound within
    seconds, and the run ends there, long before its 20 s, keeping what it measured and how far
    behind the rate it was (a finding about the server, not a failure)."""
    t0 = time.monotonic()
    out = run_load(LoadRequest(_mariadb, WorkloadSpec(name="oltp_point_select"), SHAPE, threads=1, warmup=0,
                               duration=20, seed=13, rate=1_000_000))
    assert time.monotonic() - t0 < 15
    assert out.behind is not None and out.behind >= 1_000_000, out.behind
    assert out.totals.transactions > 0 and 0 < out.measured_s < 15


@serial
def test_latency_by_kind_times_every_statement_and_merges_exactly(_mariadb):
    """Asked for it, a run reports latency per statement kind: one sample per statement of that
    kind, merged across load processes, and no per-kind data when not asked."""
    wl = WorkloadSpec(name="oltp_read_only")
    out = run_load(LoadRequest(_mariadb, wl, SHAPE, threads=4, warmup=0.3, duration=1.5, seed=9,
                               latency_by_kind=True), processes=2)
    by_kind = out.latency.by_kind
    assert set(by_kind) == {"read", "other"}
    totals = {k: sum(v["histogram"]["buckets"].values()) for k, v in by_kind.items()}
    assert totals == {"read": out.totals.reads, "other": out.totals.other}
    assert 0 < by_kind["read"]["p50_ms"] <= by_kind["read"]["p99_ms"] <= by_kind["read"]["max_ms"]
    # A statement never takes longer than the slowest transaction it was part of.
    assert by_kind["read"]["max_ms"] <= out.latency.max_ms * 1.01
    plain = run_load(LoadRequest(_mariadb, wl, SHAPE, threads=2, warmup=0, duration=0.5, seed=9))
    assert plain.latency.by_kind == {}


def _kill_load_connections_after(params: ConnectParams, delay: float, connections: int) -> threading.Thread:
    """Once the run's ``connections`` are open (load processes take a while to spawn on a busy
    machine), wait ``delay`` seconds and kill them all."""
    def load_connections() -> list[tuple]:
        return _query(params, "SELECT ID FROM information_schema.PROCESSLIST "
                              f"WHERE DB = '{DB}' AND ID <> CONNECTION_ID() AND COMMAND <> 'Daemon'")

    def kill() -> None:
        give_up = time.monotonic() + 30
        while len(load_connections()) < connections and time.monotonic() < give_up:
            time.sleep(0.05)
        time.sleep(delay)
        for (i,) in load_connections():
            try:
                _query(params, f"KILL CONNECTION {int(i)}")
            except Exception:  # noqa: BLE001 - a connection that ended meanwhile
                pass

    killer = threading.Thread(target=kill)
    killer.start()
    return killer


@serial
def test_a_killed_connection_ends_the_run_with_its_error_by_default(_mariadb):
    """sysbench's default ignore list does not hold lost connections: KILL CONNECTION ends the run
    with MySQL error 2013 (or 2006), as sysbench stops on it, instead of a low number."""
    killer = _kill_load_connections_after(_mariadb, 0.5, 2)
    t0 = time.monotonic()
    with pytest.raises(LoadError) as e:
        run_load(LoadRequest(_mariadb, WorkloadSpec(name="oltp_point_select"), SHAPE, threads=2, warmup=0, duration=30,
                             seed=7), processes=2)
    killer.join()
    assert e.value.code in (2013, 2006), str(e.value)
    assert str(e.value).startswith(f"MySQL error {e.value.code}: ") and "not in ignore_errors: 1020, 1205, 1213" in str(e.value)
    assert time.monotonic() - t0 < 20, "the run should end at the error, not at its deadline"


@serial
@pytest.mark.parametrize("threads, processes", [(3, 1), (2, 2)], ids=["epoll-loop", "one-blocking-connection-each"])
def test_connections_killed_mid_run_are_reconnected_counted_and_the_run_goes_on(_mariadb, threads, processes):
    """With the lost-connection codes in ignore_errors, KILL CONNECTION on every load connection:
    each sees error 2013 (or 2006), reconnects, re-prepares and carries on; the outcome counts the
    reconnects (not as ignored errors) and the error codes, per second too. Alike whether a load
    process multiplexes its connections or drives its only one with blocking calls."""
    killer = _kill_load_connections_after(_mariadb, 1.0, threads)
    out = run_load(LoadRequest(_mariadb, WorkloadSpec(name="oltp_point_select"), SHAPE,
                               threads=threads, warmup=0, duration=3, seed=7,
                               ignore_errors=(1020, 1205, 1213, 2006, 2013, 2055)), processes=processes)
    killer.join()
    assert out.totals.ignored_errors == 0 and sum(out.series.reconnects) == threads
    assert out.totals.reconnects == threads
    lost = sum(n for code, n in out.errors_by_code.items() if code in {"2013", "2006", "2026", "2055"})
    assert lost == threads, out.errors_by_code
    # Transactions went on after the reconnect: every second of the run has some.
    assert len(out.series.transactions) == 3 and all(n > 0 for n in out.series.transactions)


@serial
def test_a_short_run_exports_live_latency_samples(_mariadb):
    """The live "Transaction latency" panel has data: each second's Progress carries the load
    processes' merged latency histogram, so a worker's scrape shows a histogram whose count is the
    transactions measured so far."""
    from services.worker.metrics import WorkerMetrics

    from tests.metered_run import metered_run

    seen: list[Progress] = []
    out = run_load(LoadRequest(_mariadb, WorkloadSpec(name="oltp_point_select"), SHAPE, threads=2, warmup=0,
                               duration=2, seed=5, on_progress=seen.append), processes=2)
    measured = [s for s in seen if s.phase == "measure"]
    assert measured and all(s.latency is not None for s in measured)
    assert [s.latency.total for s in measured] == [s.counts.transactions for s in measured]
    assert measured[-1].latency.total == out.totals.transactions > 0
    run = metered_run(duration=2, seed=5)
    metrics = WorkerMetrics("w1")
    metrics.run_started(run)
    for progress in seen:
        metrics.observe_progress(run, progress)
    text = metrics.scrape().decode()
    count = next(line for line in text.splitlines() if line.startswith("benchfleet_worker_transaction_latency_seconds_count"))
    assert float(count.rsplit(" ", 1)[1]) == out.totals.transactions
