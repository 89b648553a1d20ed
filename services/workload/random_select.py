"""sysbench 1.0.20's select_random_points and select_random_ranges: one query per event over
secondary-index values (k), each thread drawing from its own slice of the key range."""

from __future__ import annotations

import random
from typing import Callable

from services.workload.registry import RANDOM_OPTIONS, READ, Transaction, register
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


register("select_random_points", options=RANDOM_OPTIONS, source="sysbench 1.0.20 src/lua/select_random_points.lua",
         prepared=lambda g: [_random_points_sql(int(g.workload.option("random_points")))])(_build_random_points)
register("select_random_ranges", options=RANDOM_OPTIONS, source="sysbench 1.0.20 src/lua/select_random_ranges.lua",
         prepared=lambda g: [_random_ranges_sql(int(g.workload.option("number_of_ranges")))])(_build_random_ranges)
