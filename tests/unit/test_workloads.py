"""The sysbench 1.0 transactions and random distributions, checked on literal seeds."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest

from services.common.spec.workloads import DataShape, WorkloadSpec
from services.workload import distributions as dist
from services.workload.statements import Generator, c_value, pad_value, transaction

SHAPE = DataShape(tables=4, table_size=1000)


def kinds(tx) -> tuple[int, int, int]:
    c = Counter(kind for kind, _, _ in tx)
    return c["read"], c["write"], c["other"]


def run(name: str, seed: int = 1, shape: DataShape = SHAPE, **options):
    return transaction(random.Random(seed), WorkloadSpec(name=name, options=options), shape)


@pytest.mark.parametrize(
    "name, expected",
    [
        ("oltp_point_select", (1, 0, 0)),
        ("oltp_read_only", (14, 0, 2)),
        ("oltp_read_write", (14, 4, 2)),
        ("oltp_write_only", (0, 4, 2)),
        ("oltp_update_index", (0, 1, 0)),
        ("oltp_update_non_index", (0, 1, 0)),
        ("oltp_insert", (0, 1, 0)),
        ("oltp_delete", (0, 1, 0)),
        ("select_random_points", (1, 0, 0)),
        ("select_random_ranges", (1, 0, 0)),
        ("oltp_simple", (1, 0, 0)),
        ("oltp_complex_ro", (14, 0, 2)),
    ],
)
def test_reads_writes_other_per_transaction_match_sysbench(name, expected):
    """Each event counts reads/writes/other as sysbench 1.0 reports them per transaction."""
    assert kinds(run(name)) == expected


def test_read_only_runs_sysbench_statements_in_order():
    """oltp_read_only: BEGIN, 10 point selects, the four range selects, COMMIT."""
    tx = run("oltp_read_only")
    sqls = [re.sub(r"sbtest\d+", "sbtest?", sql) for _, sql, _ in tx]
    assert sqls == (
        ["BEGIN"]
        + ["SELECT c FROM sbtest? WHERE id=?"] * 10
        + [
            "SELECT c FROM sbtest? WHERE id BETWEEN ? AND ?",
            "SELECT SUM(k) FROM sbtest? WHERE id BETWEEN ? AND ?",
            "SELECT c FROM sbtest? WHERE id BETWEEN ? AND ? ORDER BY c",
            "SELECT DISTINCT c FROM sbtest? WHERE id BETWEEN ? AND ? ORDER BY c",
            "COMMIT",
        ]
    )
    # The ten point selects of one transaction hit one table, as execute_point_selects does.
    assert len({sql for _, sql, _ in tx[1:11]}) == 1
    for _, _, (lo, hi) in tx[11:15]:
        assert hi - lo == 99 and 1 <= lo <= 1000


def test_skip_trx_drops_begin_and_commit():
    """skip_trx runs the same reads in autocommit mode, so 'other' falls to zero."""
    tx = run("oltp_read_only", skip_trx=True)
    assert kinds(tx) == (14, 0, 0)
    assert all(sql not in ("BEGIN", "COMMIT") for _, sql, _ in tx)


def test_options_change_the_statement_mix():
    """range_selects=false, point_selects and range_size change what one transaction runs."""
    assert kinds(run("oltp_read_only", range_selects=False)) == (10, 0, 2)
    assert kinds(run("oltp_read_only", point_selects=3, sum_ranges=2)) == (8, 0, 2)
    tx = run("oltp_read_only", range_size=10)
    assert all(p[1] - p[0] == 9 for _, sql, p in tx if "BETWEEN" in sql)


def test_point_select_forces_one_query_whatever_point_selects_says():
    """oltp_point_select sets point_selects=1, as its Lua script does."""
    assert kinds(run("oltp_point_select", point_selects=10)) == (1, 0, 0)


def test_same_seed_same_transactions_other_seed_differs():
    """A seeded run is reproducible; another seed gives other keys."""
    a = Generator(WorkloadSpec(name="oltp_read_write"), SHAPE)
    first = [a(random.Random(42)) for _ in range(3)]
    assert first == [a(random.Random(42)) for _ in range(3)]
    r1, r2 = random.Random(1), random.Random(2)
    assert [a(r1) for _ in range(5)] != [a(r2) for _ in range(5)]


def test_keys_and_tables_stay_in_the_shape():
    """Every id is within 1..table_size and every table within sbtest1..N."""
    g = Generator(WorkloadSpec(name="oltp_read_write", options={"rand_type": "uniform"}), SHAPE)
    r = random.Random(3)
    tables, ids = set(), []
    for _ in range(300):
        for _, sql, params in g(r):
            m = re.search(r"sbtest(\d+)", sql)
            if m:
                tables.add(int(m.group(1)))
            if sql.startswith(("SELECT c FROM", "DELETE", "UPDATE sbtest1 SET k")):
                ids.append(params[-1] if "BETWEEN" not in sql else params[0])
    assert tables == {1, 2, 3, 4}
    assert min(ids) >= 1 and max(ids) <= 1000


def test_write_statements_carry_sysbench_values():
    """Non-index updates set a sysbench c value; delete+insert reuse the deleted id."""
    tx = run("oltp_write_only")
    update_c = next(p for _, sql, p in tx if sql.startswith("UPDATE") and "SET c=?" in sql)
    assert re.fullmatch(r"(\d{11}-){9}\d{11}", update_c[0])
    (_, delete, (deleted,)), (_, insert, (iid, k, c, pad)) = tx[-3], tx[-2]
    assert delete.startswith("DELETE") and insert.startswith("INSERT") and iid == deleted
    assert len(c) == 119 and len(pad) == 59 and 1 <= k <= 1000


def test_insert_is_plain_text_with_auto_increment_or_unique_ids():
    """oltp_insert sends text (params None): id 0 with auto_inc, distinct ids without."""
    (kind, sql, params), = run("oltp_insert")
    assert params is None and kind == "write"
    assert re.fullmatch(r"INSERT INTO sbtest\d \(id, k, c, pad\) VALUES \(0, \d+, '[\d-]{119}', '[\d-]{59}'\)", sql)
    wl = WorkloadSpec(name="oltp_insert", options={"auto_inc": False})
    seen = set()
    for tid in range(3):
        g = Generator(wl, SHAPE, thread_id=tid, threads=3, seed_rng=random.Random(9))
        r = random.Random(tid)
        for _ in range(500):
            seen.add(int(re.search(r"VALUES \((-?\d+),", g(r)[0][1]).group(1)))
    assert len(seen) == 1500
    assert all(-(2**31) <= i < 2**31 for i in seen)


def test_select_random_points_stays_in_its_thread_slice():
    """Thread 1 of 4 on 1000 rows draws k values from its own quarter, 250..500."""
    g = Generator(WorkloadSpec(name="select_random_points"), DataShape(table_size=1000), thread_id=1, threads=4)
    r = random.Random(5)
    values = [v for _ in range(200) for v in g(r)[0][2]]
    assert len(g(r)[0][2]) == 10
    assert 250 <= min(values) and max(values) <= 500


def test_select_random_ranges_binds_pairs_delta_apart():
    """Each of the 10 k ranges is [v, v + delta]."""
    (_, sql, params), = run("select_random_ranges", delta=7)
    assert sql.count("k BETWEEN ? AND ?") == 10 and len(params) == 20
    assert all(params[i + 1] - params[i] == 7 for i in range(0, 20, 2))


def test_statements_lists_what_each_connection_prepares():
    """read_only on 4 tables prepares BEGIN, COMMIT and 5 statements per table; insert none."""
    ro = Generator(WorkloadSpec(name="oltp_read_only"), SHAPE).statements()
    assert ro[:2] == ["BEGIN", "COMMIT"] and len(ro) == 2 + 5 * 4
    assert Generator(WorkloadSpec(name="oltp_insert"), SHAPE).statements() == []
    r = random.Random(1)
    g = Generator(WorkloadSpec(name="oltp_read_write"), SHAPE)
    prepared = set(g.statements())
    assert {sql for _ in range(50) for _, sql, _ in g(r)} <= prepared


def test_every_registered_workload_generates_only_statements_it_prepared():
    """Each registered workload draws transactions whose prepared statements a connection prepared."""
    from services.workload.registry import WORKLOADS

    assert len(WORKLOADS) == 18
    for name in WORKLOADS:
        g = Generator(WorkloadSpec(name=name), SHAPE)
        prepared = set(g.statements())
        r = random.Random(7)
        drawn = {sql for _ in range(30) for _, sql, params in g(r) if params is not None}
        assert drawn <= prepared, name


def test_c_and_pad_values_have_sysbench_format():
    """c is 10 groups of 11 digits, pad 5 groups, joined by '-'."""
    r = random.Random(0)
    assert re.fullmatch(r"(\d{11}-){9}\d{11}", c_value(r))
    assert re.fullmatch(r"(\d{11}-){4}\d{11}", pad_value(r))


# -- distributions


@pytest.mark.parametrize("name", sorted(dist.BY_NAME))
@pytest.mark.parametrize("a, b", [(1, 10), (5, 5), (1, 1_000_000), (250, 500)])
def test_every_distribution_stays_within_bounds(name, a, b):
    """No draw of any rand_type leaves [a, b], including one-value ranges."""
    draw, r = dist.by_name(name), random.Random(11).random
    values = [draw(r, a, b) for _ in range(3000)]
    assert min(values) >= a and max(values) <= b
    assert all(isinstance(v, int) for v in values)


def test_draws_are_deterministic_for_a_seed():
    """Literal values for seed 1 on 1..10000: a change here changes every benchmark's keys."""
    got = [dist.BY_NAME[n](random.Random(1).random, 1, 10000)
           for n in ("special", "uniform", "gaussian", "pareto", "zipfian")]
    assert got == [5337, 1344, 4814, 1, 5413]


def test_special_puts_three_quarters_on_the_middle_percent():
    """sysbench 1.0's default: 75% of keys fall uniformly in the middle 1% of the range."""
    r = random.Random(2).random
    values = [dist.special(r, 1, 100_000) for _ in range(20000)]
    hot = sum(49_500 <= v <= 50_501 for v in values) / len(values)
    assert 0.74 <= hot <= 0.78
    assert min(values) < 40_000 and max(values) > 60_000  # the gaussian rest spreads out


def test_uniform_covers_the_range_evenly():
    """Uniform: every value of 1..10 about equally often."""
    r = random.Random(3).random
    c = Counter(dist.uniform(r, 1, 10) for _ in range(20000))
    assert set(c) == set(range(1, 11)) and max(c.values()) / min(c.values()) < 1.15


def test_zipfian_weights_follow_the_exponent():
    """Zipfian (exponent 0.8): P(1)/P(2) is 2**0.8 and 1 is the most frequent value."""
    r = random.Random(4).random
    c = Counter(dist.zipfian(r, 1, 10) for _ in range(40000))
    assert c.most_common(1)[0][0] == 1
    assert c[1] / c[2] == pytest.approx(2**0.8, rel=0.08)


def test_pareto_and_gaussian_shapes():
    """Pareto piles up at the low end; gaussian around the middle."""
    r = random.Random(5).random
    p = [dist.pareto(r, 1, 100) for _ in range(10000)]
    assert sum(v <= 10 for v in p) / len(p) > 0.7
    g = [dist.gaussian(r, 1, 100) for _ in range(10000)]
    assert sum(35 <= v <= 65 for v in g) / len(g) > 0.9


def test_unknown_rand_type_names_the_known_ones():
    """A bad rand_type says which ones exist."""
    with pytest.raises(ValueError, match="uniform"):
        dist.by_name("poisson")
