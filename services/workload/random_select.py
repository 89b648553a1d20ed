"""select_random_points and select_random_ranges, the 2010 tests MariaDB wrote for its segmented
key cache: one query per event over secondary-index values (k), each thread drawing from its own
slice of the key range, on a table where k = id, so a point is one row and a range of width delta
holds delta + 1 rows whatever the thread count.

Statements as sysbench 0.5's scripts at cea90cb (2010-10-29) and sysbench 1.0.20's scripts of the
same names (a port of them) send them; data as the 0.5 scripts prepared it (1.0.20 prepares k
from its 'special' distribution instead). Both refuse more than one table.
"""

from __future__ import annotations

import random
from typing import Callable

from services.workload.registry import (
    COUNT_BY_STATEMENT,
    RANDOM_OPTIONS,
    READ,
    SYSBENCH_05_K_ID,
    Transaction,
    register,
)
from services.workload.program import Key, Program, Ref, Statement, block
from services.workload.statements import Generator


def _slice(g: Generator, thread_id: int, threads: int) -> tuple[int, int]:
    # Lua computes these as floats and the C call truncates them to uint32.
    rlen = g.data.table_size / max(1, threads)
    rmin = rlen * (thread_id % max(1, threads))
    return int(rmin), int(rmin + rlen)


def _random_points_sql(n: int) -> str:
    return f"SELECT id, k, c, pad FROM sbtest1 WHERE k IN ({', '.join(['?'] * n)})"


def _random_ranges_sql(n: int) -> str:
    return "SELECT count(k) FROM sbtest1 WHERE " + " OR ".join(["k BETWEEN ? AND ?"] * n)


def _build_random_points(g: Generator, thread_id: int, threads: int) -> Callable[[random.Random], Transaction]:
    lo, hi = _slice(g, thread_id, threads)
    n = int(g.workload.option("random_points"))
    sql, draw = _random_points_sql(n), g.draw

    def event(rng: random.Random) -> Transaction:
        r = rng.random
        return [(READ, sql, tuple(draw(r, lo, hi) for _ in range(n)))]

    return event


def _build_random_ranges(g: Generator, thread_id: int, threads: int) -> Callable[[random.Random], Transaction]:
    lo, hi = _slice(g, thread_id, threads)
    n, delta = int(g.workload.option("number_of_ranges")), int(g.workload.option("delta"))
    sql, draw = _random_ranges_sql(n), g.draw

    def event(rng: random.Random) -> Transaction:
        r = rng.random
        params: list[int] = []
        for _ in range(n):
            v = draw(r, lo, hi)
            params += (v, v + delta)
        return [(READ, sql, tuple(params))]

    return event


def _program_random_points(g: Generator, thread_id: int, threads: int) -> Program:
    lo, hi = _slice(g, thread_id, threads)
    n = int(g.workload.option("random_points"))
    stmt = Statement(READ, (_random_points_sql(n),), (Key(lo, hi),) * n)
    return Program(block(0, 1, stmt), g.distribution(), COUNT_BY_STATEMENT)


def _program_random_ranges(g: Generator, thread_id: int, threads: int) -> Program:
    lo, hi = _slice(g, thread_id, threads)
    n, delta = int(g.workload.option("number_of_ranges")), int(g.workload.option("delta"))
    stmt = Statement(READ, (_random_ranges_sql(n),), (Key(lo, hi, 0), Ref(0, delta)) * n)
    return Program(block(0, 1, stmt), g.distribution(), COUNT_BY_STATEMENT, registers=1)


def _register(name: str, prepared, program) -> Callable:
    return register(name, options=RANDOM_OPTIONS, prepared=prepared, counting=COUNT_BY_STATEMENT, program=program,
                    tables=SYSBENCH_05_K_ID, max_tables=1, sysbench_test=name,
                    source=f"akopytov/sysbench cea90cb (2010-10-29) sysbench/tests/db/{name}.lua")


_register("select_random_points",
          lambda g: [_random_points_sql(int(g.workload.option("random_points")))],
          _program_random_points)(_build_random_points)
_register("select_random_ranges",
          lambda g: [_random_ranges_sql(int(g.workload.option("number_of_ranges")))],
          _program_random_ranges)(_build_random_ranges)
