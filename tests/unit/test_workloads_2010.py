"""The 2010 pages' names, checked on literal seeds against sysbench 0.5's scripts of 2010
(akopytov/sysbench b9d0556..cea90cb, sysbench/tests/db/*.lua): statements, counts, data, refusals."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from services.common.errors import LoadError
from services.common.spec.campaign import CampaignSpec
from services.common.spec.workloads import DataShape, WorkloadSpec
from services.worker import prepare
from services.worker.driver.sysbench import driver as sd
from services.workload import registry
from services.workload.statements import Generator

ONE = DataShape(tables=1, table_size=1000)
NAMES_2010 = ("oltp_simple", "select", "oltp_complex_ro", "oltp_complex_rw", "insert", "delete", "update_index",
              "update_non_index", "select_random_points", "select_random_ranges")
PAD = "'aaaaaaaaaaffffffffffrrrrrrrrrreeeeeeeeeeyyyyyyyyyy'"


def tx(name: str, seed: int = 1, **options):
    return Generator(WorkloadSpec(name=name, options=options), ONE)(random.Random(seed))


def sqls(t) -> list[str]:
    return [sql for _, sql, _ in t]


def kinds(t) -> tuple[int, int, int]:
    c = Counter(kind for kind, _, _ in t)
    return c["read"], c["write"], c["other"]


@pytest.mark.parametrize("name, sql", [
    ("oltp_simple", "SELECT c FROM sbtest1 WHERE id=?"),
    ("select", "SELECT pad FROM sbtest1 WHERE id = ?"),
    ("delete", "DELETE FROM sbtest1 WHERE id = ?"),
    ("update_index", "UPDATE sbtest1 SET k=k+1 WHERE id = ?"),
])
def test_one_statement_tests_send_their_script_statement_by_a_random_id(name, sql):
    """oltp_simple, select, delete, update_index: one statement per event, no BEGIN/COMMIT, an id in 1..table_size."""
    for seed in range(20):
        ((kind, text, (i,)),) = tx(name, seed)
        assert text == sql and kind == ("read" if sql.startswith("SELECT") else "write")
        assert 1 <= i <= 1000


def test_select_reads_pad_where_oltp_simple_reads_c():
    """The 2010 select is `SELECT pad ... WHERE id = ?`, not oltp_simple's point select of c."""
    assert sqls(tx("select")) != sqls(tx("oltp_simple"))
    assert sqls(tx("select")) == ["SELECT pad FROM sbtest1 WHERE id = ?"]


def test_update_non_index_sets_a_random_c_by_id():
    """update_non_index: `UPDATE sbtest set c=? where id=?` with a 119-character c of digit groups."""
    ((kind, sql, (c, i)),) = tx("update_non_index", 3)
    assert (kind, sql) == ("write", "UPDATE sbtest1 set c=? where id=?")
    assert len(c) == 119 and c.count("-") == 9 and 1 <= i <= 1000


def test_complex_ro_runs_begin_ten_points_four_ranges_commit():
    """oltp_complex_ro: BEGIN, 10 point selects, the four range selects of oltp_range_size rows, COMMIT."""
    t = tx("oltp_complex_ro", 5)
    assert sqls(t) == (["BEGIN"] + ["SELECT c FROM sbtest1 WHERE id=?"] * 10 + [
        "SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ?",
        "SELECT SUM(K) FROM sbtest1 WHERE id BETWEEN ? AND ?",
        "SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c",
        "SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c",
    ] + ["COMMIT"])
    assert kinds(t) == (14, 0, 2)
    assert all(hi - lo == 99 for _, _, (lo, hi) in t[11:15])
    assert all(hi - lo == 9 for _, _, (lo, hi) in tx("oltp_complex_ro", 5, range_size=10)[11:15])


def test_complex_rw_adds_two_updates_and_a_delete_reinsert_of_one_id():
    """oltp_complex_rw: the read part, then k=k+1, c=?, DELETE and INSERT of the same id with constant columns."""
    t = tx("oltp_complex_rw", 8)
    assert kinds(t) == (14, 4, 2)
    writes = t[15:19]
    assert sqls(writes) == ["UPDATE sbtest1 SET k=k+1 WHERE id=?", "UPDATE sbtest1 SET c=? WHERE id=?",
                            "DELETE FROM sbtest1 WHERE id=?", f"INSERT INTO sbtest1 VALUES(?,0,' ',{PAD})"]
    (deleted,), (reinserted,) = writes[2][2], writes[3][2]
    assert deleted == reinserted
    assert t[-1][1] == "COMMIT"


def test_lock_tables_replaces_begin_commit_as_the_scripts_did_for_lower_case_myisam():
    """lock_tables: LOCK TABLES sbtest1 READ (ro) / WRITE (rw) and UNLOCK TABLES, sent as text, counted as other."""
    ro, rw = tx("oltp_complex_ro", 2, lock_tables=True), tx("oltp_complex_rw", 2, lock_tables=True)
    assert ro[0] == ("other", "LOCK TABLES sbtest1 READ", None) and ro[-1] == ("other", "UNLOCK TABLES", None)
    assert rw[0] == ("other", "LOCK TABLES sbtest1 WRITE", None) and rw[-1] == ("other", "UNLOCK TABLES", None)
    g = Generator(WorkloadSpec(name="oltp_complex_ro", options={"lock_tables": True}), ONE)
    assert "BEGIN" not in g.statements() and "LOCK TABLES sbtest1 READ" not in g.statements()


def test_insert_sends_null_ids_with_auto_inc_and_random_k_c_pad():
    """insert: `INSERT INTO sbtest VALUES (?,?,?,?)`, id NULL (the next AUTO_INCREMENT), k in 1..table_size."""
    ((kind, sql, (i, k, c, pad)),) = tx("insert", 4)
    assert (kind, sql, i) == ("write", "INSERT INTO sbtest1 VALUES (?,?,?,?)", None)
    assert 1 <= k <= 1000 and len(c) == 119 and len(pad) == 59


def test_insert_without_auto_inc_takes_sb_rand_uniq_ids_shared_by_the_threads():
    """sb_rand_uniq(1, 1000): the k-th call is k * 2147483647 % 1000 + 1 (648, 295, 942, ...), one
    sequence across threads, so the first 1000 ids are 1..1000 once each and the 1001st repeats."""
    wl = WorkloadSpec(name="insert", options={"auto_inc": False})
    gens = [Generator(wl, ONE, thread_id=t, threads=2) for t in range(2)]
    r = random.Random(0)
    first = [gens[t](r)[0][2][0] for t in (0, 1, 0)]
    assert first == [648, 295, 942]
    ids = first + [gens[0](r)[0][2][0] for _ in range(498)] + [gens[1](r)[0][2][0] for _ in range(499)]
    assert sorted(ids) == list(range(1, 1001))
    assert gens[0](r)[0][2][0] == 648  # the 1001st call: a duplicate key, as in 2010


def test_every_2010_name_counts_as_sysbench_0_5_and_runs_on_one_table():
    """The 2010 names count writes by statement (0.5) and need one table; only select_random_* have a sysbench 1.0.20 script."""
    for name in NAMES_2010:
        w = registry.definition(name)
        assert w.counting == registry.COUNT_BY_STATEMENT and w.max_tables == 1
        assert w.sysbench_test == (name if name.startswith("select_random") else None)
    layouts = {name: registry.definition(name).tables for name in NAMES_2010}
    assert layouts["insert"] == registry.SYSBENCH_05_EMPTY and layouts["insert"].fresh
    assert layouts["select_random_points"] == layouts["select_random_ranges"] == registry.SYSBENCH_05_K_ID
    assert {layouts[n] for n in NAMES_2010[:3] + NAMES_2010[5:8]} == {registry.SYSBENCH_05}
    assert registry.definition("oltp_read_write").counting == registry.COUNT_BY_ROWS


def test_2010_data_rows_are_the_scripts_constant_rows():
    """k = 0 (or k = id for select_random_*), c a space, pad the scripts' fixed string; ids 1..N."""
    pad = "qqqqqqqqqqwwwwwwwwwweeeeeeeeeerrrrrrrrrrtttttttttt"
    zero = prepare.rows_05(None, 8, 3, 1000, "tsv", registry.SYSBENCH_05)
    assert zero == f"0009\t0000\t \t{pad}\n0010\t0000\t \t{pad}\n0011\t0000\t \t{pad}\n".encode()
    by_id = prepare.rows_05(None, 0, 2, 1000, "sql", registry.SYSBENCH_05_K_ID)
    assert by_id == f"(0001,0001,' ','{pad}'),(0002,0002,' ','{pad}'),".encode()


def test_2010_tables_are_the_scripts_schema_and_their_markers_differ():
    """UNSIGNED id and k, MAX_ROWS (the seeds' 50M or the table size); each layout marks its shape apart,
    while sysbench 1.0's tables keep the marker they always had."""
    ddl = prepare._table_sql_05(1, DataShape(tables=1, table_size=1000, engine="MyISAM"))
    assert "id INTEGER UNSIGNED NOT NULL AUTO_INCREMENT," in ddl and "k INTEGER UNSIGNED DEFAULT '0' NOT NULL" in ddl
    assert ddl.endswith("ENGINE = MyISAM MAX_ROWS = 50000000")
    assert prepare._table_sql_05(1, DataShape(table_size=60_000_000), auto_inc=False).endswith("MAX_ROWS = 60000000")
    markers = {prepare.marker(ONE, True, layout) for layout in
               (registry.SYSBENCH_10, registry.SYSBENCH_05, registry.SYSBENCH_05_K_ID, registry.SYSBENCH_05_EMPTY)}
    assert len(markers) == 4 and prepare.marker(ONE, True) == ONE.marker(True) == "1x1000:InnoDB"


def _campaign(workloads, **kw) -> CampaignSpec:
    return CampaignSpec(name="c", targets=[{"name": "a", "user": "bench"}], threads=[1], duration=1, workloads=workloads, **kw)


def test_2010_names_and_select_random_refuse_more_than_one_table():
    """As sysbench's select_random_* refuse --tables > 1 (and the 2010 scripts had one table), the spec refuses more."""
    for name in NAMES_2010:
        with pytest.raises(ValueError, match=r"runs on at most 1 table\(s\).*data.tables is 4"):
            _campaign([name], data={"tables": 4})
    with pytest.raises(ValueError, match=r"points_50 \(select_random_points\): runs on at most 1"):
        _campaign([{"name": "select_random_points", "label": "points_50"}], data={"tables": 2})
    assert _campaign(["oltp_read_only"], data={"tables": 4}).data.tables == 4


def test_sysbench_driver_refuses_the_2010_oltp_names_and_runs_select_random():
    """sysbench 1.0.20 has no script for the 2010 oltp names: the spec and the command refuse them with
    driver sysbench; select_random_* run as sysbench's own tests of those names."""
    with pytest.raises(ValueError, match="oltp_simple, select: sysbench 1.0.20 has no script"):
        _campaign(["select", "oltp_simple", "select_random_points"], driver="sysbench")
    with pytest.raises(LoadError, match="use driver: native"):
        sd.command(WorkloadSpec(name="update_index"), ONE, threads=1, seed=1, duration=1)
    argv = sd.command(WorkloadSpec(name="select_random_points", options={"random_points": 50}), ONE, threads=1,
                      seed=1, duration=1)
    assert argv[1] == "select_random_points" and "--random_points=50" in argv
