"""The 2010 workloads against the real MariaDB: prepare builds each 2010 data layout, each
workload runs on it with its script's statement mix, and every query returns the rows that
data gives (a select_random_points point is one row, since k = id)."""

from __future__ import annotations

import dataclasses
import random

import pytest

from services.common.errors import LoadError
from services.common.spec.workloads import DataShape, WorkloadSpec
from services.worker import prepare
from services.worker.driver.contract import ConnectParams, LoadRequest
from services.worker.driver.native.parent import run_load
from services.worker.target.dsn import connect
from services.workload.statements import Generator

pytestmark = pytest.mark.integration

DB = "bf_test_2010"
SHAPE = DataShape(tables=1, table_size=2000)
EVENTS = 300


@pytest.fixture(scope="module")
def params(mariadb_params):
    p = ConnectParams(**mariadb_params, database=DB)
    yield p
    _query(p, f"DROP DATABASE IF EXISTS {DB}", database=False)
    _query(p, f"DROP DATABASE IF EXISTS {DB}_myisam", database=False)


def _query(params: ConnectParams, sql: str, args: tuple = (), database: bool = True) -> list[tuple]:
    conn = connect(params, database=database)
    try:
        cur = conn.cursor()
        cur.execute(sql.replace("?", "%s"), args)
        return cur.fetchall() if cur.with_rows else []
    finally:
        conn.close()


def test_prepare_builds_each_2010_layout_and_marks_it(params):
    """k = 0 for the oltp names, k = id for select_random_*, no rows for insert (every time), on the
    scripts' UNSIGNED schema; switching layouts prepares again, the same layout does not."""
    prepare.ensure_workload_tables(params, SHAPE, WorkloadSpec(name="update_index"))
    assert prepare.ensure_workload_tables(params, SHAPE, WorkloadSpec(name="oltp_simple")) is False
    assert _query(params, "SELECT COUNT(*), SUM(k), MIN(id), MAX(id), MAX(c), MIN(pad) FROM sbtest1")[0] == (
        2000, 0, 1, 2000, "", "qqqqqqqqqqwwwwwwwwwweeeeeeeeeerrrrrrrrrrtttttttttt")
    (_, ddl), = _query(params, "SHOW CREATE TABLE sbtest1")
    assert "`id` int(10) unsigned NOT NULL AUTO_INCREMENT" in ddl and "`k` int(10) unsigned" in ddl
    assert "KEY `k` (`k`)" in ddl and "MAX_ROWS=50000000" in ddl

    assert prepare.ensure_workload_tables(params, SHAPE, WorkloadSpec(name="select_random_points")) is True
    assert _query(params, "SELECT COUNT(*), SUM(k = id) FROM sbtest1")[0] == (2000, 2000)

    assert prepare.ensure_workload_tables(params, SHAPE, WorkloadSpec(name="insert")) is True
    assert _query(params, "SELECT COUNT(*) FROM sbtest1")[0] == (0,)
    _query(params, "INSERT INTO sbtest1 VALUES (NULL, 1, 'x', 'y')")
    assert prepare.ensure_workload_tables(params, SHAPE, WorkloadSpec(name="insert")) is True
    assert _query(params, "SELECT COUNT(*) FROM sbtest1")[0] == (0,)


@pytest.mark.parametrize("name, per_tx", [
    ("oltp_simple", (1, 0, 0)),
    ("select", (1, 0, 0)),
    ("oltp_complex_ro", (14, 0, 2)),
    ("oltp_complex_rw", (14, 4, 2)),
    ("insert", (0, 1, 0)),
    ("delete", (0, 1, 0)),
    ("update_index", (0, 1, 0)),
    ("update_non_index", (0, 1, 0)),
    ("select_random_points", (1, 0, 0)),
    ("select_random_ranges", (1, 0, 0)),
])
def test_each_2010_workload_runs_its_script_mix_on_its_data(params, name, per_tx):
    """A fixed number of events: reads/writes/other exactly the script's per event (0.5 counted every
    INSERT/UPDATE/DELETE as a write, even one that changed no row), no error."""
    w = WorkloadSpec(name=name)
    prepare.ensure_workload_tables(params, SHAPE, w)
    out = run_load(LoadRequest(params, w, SHAPE, 1, 0.0, None, 5, events=EVENTS))
    t = out.totals
    assert (t.transactions, t.errors, t.ignored_errors) == (EVENTS, 0, 0)
    assert (t.reads, t.writes, t.other) == tuple(n * EVENTS for n in per_tx)
    if name == "insert":
        # into the empty table prepare built for this run: every event added one row
        assert _query(params, "SELECT COUNT(*) FROM sbtest1")[0] == (EVENTS,)


def _rows(params: ConnectParams, sql: str, args: tuple) -> list[tuple]:
    return _query(params, sql, args)


def test_select_random_points_returns_one_row_per_point(params):
    """On k = id data each point of the IN list is one row (0 for k = 0, below the table), whatever the
    thread: the work per query no longer depends on the thread count."""
    w = WorkloadSpec(name="select_random_points", options={"random_points": 20})
    prepare.ensure_workload_tables(params, SHAPE, w)
    for threads, tid in ((1, 0), (16, 5), (16, 15)):
        g = Generator(w, SHAPE, thread_id=tid, threads=threads)
        r = random.Random(tid)
        for _ in range(10):
            ((_, sql, points),) = g(r)
            rows = _rows(params, sql, points)
            assert len(rows) == len({p for p in points if 1 <= p <= SHAPE.table_size})
            assert all(k == i for i, k, _, _ in rows)


def test_select_random_ranges_count_each_key_of_the_ranges_once(params):
    """count(k) over ranges [v, v + delta] on k = id data: every key in their union, once."""
    w = WorkloadSpec(name="select_random_ranges", options={"delta": 50})
    prepare.ensure_workload_tables(params, SHAPE, w)
    g = Generator(w, SHAPE, thread_id=2, threads=4)
    r = random.Random(2)
    for _ in range(10):
        ((_, sql, bounds),) = g(r)
        keys = {k for lo, hi in zip(bounds[::2], bounds[1::2]) for k in range(lo, hi + 1) if 1 <= k <= SHAPE.table_size}
        assert _rows(params, sql, bounds) == [(len(keys),)]


def test_oltp_2010_queries_read_the_rows_the_script_expects(params):
    """oltp_complex_ro on k = 0 data: a point select is one row, each range oltp_range_size rows (fewer
    at the table's end), SUM(K) is 0; select reads pad."""
    prepare.ensure_workload_tables(params, SHAPE, WorkloadSpec(name="oltp_complex_ro"))
    g = Generator(WorkloadSpec(name="oltp_complex_ro"), SHAPE)
    r = random.Random(3)
    for _ in range(5):
        for kind, sql, args in g(r):
            if sql in ("BEGIN", "COMMIT"):
                continue
            rows = _rows(params, sql, args)
            if "SUM(K)" in sql:
                assert rows == [(0,)]
            elif "BETWEEN" in sql:
                expected = min(args[1], SHAPE.table_size) - args[0] + 1
                assert len(rows) == (1 if "DISTINCT" in sql else expected)  # every c is ''
            else:
                assert len(rows) == 1
    ((_, sql, args),) = Generator(WorkloadSpec(name="select"), SHAPE)(r)
    assert _rows(params, sql, args) == [("qqqqqqqqqqwwwwwwwwwweeeeeeeeeerrrrrrrrrrtttttttttt",)]


def test_complex_rw_on_myisam_hits_the_seeds_duplicate_keys_unless_tables_are_locked(params):
    """The seeds' "oltp_complex_rw: Dup key errors (due to sysbench)" on MyISAM: with BEGIN/COMMIT
    (what the pages ran) concurrent delete+reinsert of one id fails with 1062; LOCK TABLES (the
    scripts' lower-case myisam path) serialises them and the run finishes."""
    p = dataclasses.replace(params, database=f"{DB}_myisam")
    shape = DataShape(tables=1, table_size=1000, engine="MyISAM")
    prepare.ensure_workload_tables(p, shape, WorkloadSpec(name="oltp_complex_rw"))
    with pytest.raises(LoadError) as e:
        run_load(LoadRequest(p, WorkloadSpec(name="oltp_complex_rw"), shape, 4, 0.0, None, 5, events=3000))
    assert e.value.code == 1062 and str(e.value).startswith("MySQL error 1062: Duplicate entry")
    locked = WorkloadSpec(name="oltp_complex_rw", options={"lock_tables": True})
    out = run_load(LoadRequest(p, locked, shape, 4, 0.0, None, 5, events=1000))
    assert out.totals.transactions == 1000 and out.totals.errors == 0
