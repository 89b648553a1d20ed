"""Rows generated for prepare: sysbench's layout and distributions, built without per-row Python."""

import random
import re
from statistics import mean

from services.common.spec.workloads import DataShape, WorkloadSpec
from services.workload import distributions
from services.worker import prepare

TSV = re.compile(rb"(\d{6})\t(\d{6})\t(\d{11}(?:-\d{11}){9})\t(\d{11}(?:-\d{11}){4})\n")
SQL = re.compile(rb"\((\d{6}),(\d{6}),'(\d{11}(?:-\d{11}){9})','(\d{11}(?:-\d{11}){4})'\),")


def test_tsv_rows_have_sysbench_columns_and_consecutive_ids():
    """Each LOAD DATA line is id, k, c (10 digit groups), pad (5 groups); ids run start+1.."""
    data = prepare.rows(prepare.rng_for(0, 1), 500, 1000, 100_000, "tsv")
    lines = TSV.findall(data)
    assert len(lines) == 1000 and len(data) == sum(len(m.group(0)) for m in TSV.finditer(data))
    assert [int(i) for i, *_ in lines] == list(range(501, 1501))
    assert all(1 <= int(k) <= 100_000 for _, k, _, _ in lines)


def test_sql_rows_are_values_tuples_of_the_same_data():
    """The INSERT form is the same row layout as VALUES tuples, each followed by a comma."""
    data = prepare.rows(prepare.rng_for(0, 1), 0, 200, 100_000, "sql")
    tuples = SQL.findall(data)
    assert len(tuples) == 200 and data.endswith(b"),")
    assert [int(i) for i, *_ in tuples] == list(range(1, 201))


def test_rows_repeat_for_a_seed_and_table_and_differ_otherwise():
    """The same seed and table give the same rows; another table gets other rows."""
    one = prepare.rows(prepare.rng_for(7, 1), 0, 100, 1000)
    assert one == prepare.rows(prepare.rng_for(7, 1), 0, 100, 1000)
    assert one != prepare.rows(prepare.rng_for(7, 2), 0, 100, 1000)


def test_digits_are_uniform():
    """Every digit of c and pad is about equally frequent (no modulo bias)."""
    data = prepare.rows(prepare.rng_for(1, 1), 0, 20_000, 100_000)
    digits = b"".join(m.group(3) + m.group(4) for m in TSV.finditer(data)).replace(b"-", b"")
    counts = [digits.count(bytes([48 + d])) for d in range(10)]
    assert max(counts) / min(counts) < 1.01


def test_special_many_matches_the_scalar_special_distribution():
    """The vectorised draw has the scalar one's shape: about 3/4 in the hot middle 1%, same mean."""
    n, size = 200_000, 100_000
    many = prepare.special_many(prepare.rng_for(3, 1), 1, size, n)
    r = random.Random(3).random
    scalar = [distributions.special(r, 1, size) for _ in range(n)]

    def hot(xs):
        return sum(1 for x in xs if 49_500 <= x <= 50_501) / len(xs)

    assert many.min() >= 1 and many.max() <= size
    # 75% drawn in the hot range, plus the few gaussian draws that land there.
    assert abs(hot(many) - hot(scalar)) < 0.01 and 0.75 <= hot(many) < 0.78
    assert abs(float(many.mean()) - mean(scalar)) < 0.005 * size


def test_table_ddl_follows_sysbench_auto_inc():
    """sysbench's create_table: id AUTO_INCREMENT by default, a plain INTEGER NOT NULL with --auto_inc=off."""
    on = prepare._table_sql(3, "InnoDB")
    off = prepare._table_sql(3, "InnoDB", auto_inc=False)
    assert "id INTEGER NOT NULL AUTO_INCREMENT," in on
    assert "AUTO_INCREMENT" not in off and "id INTEGER NOT NULL," in off
    assert off == on.replace(" AUTO_INCREMENT", "")


def test_shape_marker_and_workloads_tell_auto_inc_apart():
    """The marker that decides whether prepared tables are reused differs with auto_inc off;
    workloads say which they need, and the select_random_* tests take either."""
    shape = DataShape(tables=2, table_size=300)
    assert shape.marker() == shape.marker(True) != shape.marker(False)
    assert prepare.auto_inc_of(WorkloadSpec(name="oltp_insert")) is True
    assert prepare.auto_inc_of(WorkloadSpec(name="oltp_insert", options={"auto_inc": False})) is False
    assert prepare.auto_inc_of(WorkloadSpec(name="insert", options={"auto_inc": False})) is False
    assert prepare.auto_inc_of(WorkloadSpec(name="select_random_points")) is None


class _FileCursor:
    """Stands in for a cursor: keeps the file each LOAD DATA names, or refuses LOCAL INFILE."""

    def __init__(self, refuse: bool = False):
        self.loaded: list[bytes] = []
        self.statements: list[str] = []
        self.refuse = refuse

    def execute(self, sql, params=None):
        self.statements.append(sql)
        if self.refuse:
            import mysql.connector

            raise mysql.connector.Error(msg="refused", errno=4166)
        with open(params[0], "rb") as f:
            self.loaded.append(f.read())


def test_load_infile_sends_the_rows_in_order_while_the_next_chunk_is_generated(monkeypatch, tmp_path):
    """Generating ahead changes nothing: the chunks are the table's rows 1..size, in order, as
    generated one after the other from the table's stream, the last one shorter."""
    monkeypatch.setattr(prepare, "LOAD_ROWS", 300)
    cur = _FileCursor()
    assert prepare._load_infile(cur, prepare.rng_for(5, 2), 2, 1000, str(tmp_path)) == 1000
    gen = prepare.rng_for(5, 2)
    expected = [bytes(prepare.rows(gen, s, min(300, 1000 - s), 1000)) for s in range(0, 1000, 300)]
    assert cur.loaded == expected
    assert [int(i) for i in re.findall(rb"^(\d{4})\t", b"".join(cur.loaded), re.M)] == list(range(1, 1001))
    assert all("CHARACTER SET binary" in s for s in cur.statements)


def test_load_infile_reports_a_refused_local_infile():
    """The server refusing LOCAL INFILE on the first chunk means: INSERT instead (0 rows loaded)."""
    assert prepare._load_infile(_FileCursor(refuse=True), prepare.rng_for(0, 1), 1, 1000, "/tmp") == 0
