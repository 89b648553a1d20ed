"""The 2010 pages' oltp names as sysbench 0.5 ran them in 2010: oltp_simple, select,
oltp_complex_ro, oltp_complex_rw, insert, delete, update_index, update_non_index.

Each follows its script in akopytov/sysbench at b9d0556 (2009-06-10), unchanged up to cea90cb
(2010-10-29): sysbench/tests/db/<name>.lua. One table, as those scripts had (sbtest there,
sbtest1 here, the table sysbench 1.0 and the rest of benchfleet use); statements as the scripts
wrote them; data as their prepare() left it (k = 0, c = ' ', a fixed pad; insert: no rows).
docs/workloads.md says how each differs from the sysbench 1.0 test of a similar name.
"""

from __future__ import annotations

import random
from types import MappingProxyType
from typing import Callable, Mapping

from services.workload.registry import (
    COMMON_OPTIONS,
    COUNT_BY_STATEMENT,
    OTHER,
    READ,
    SYSBENCH_05,
    SYSBENCH_05_EMPTY,
    WRITE,
    Op,
    Transaction,
    register,
)
from services.workload.program import Const, Cycle, Digits, Key, Program, Ref, Statement, block
from services.workload.statements import BEGIN, COMMIT, Generator, c_value, pad_value

#: The one table of the 2010 scripts.
TABLE = "sbtest1"
#: Where the scripts are, at the commit docs/workloads.md cites.
SOURCE = "akopytov/sysbench b9d0556 (unchanged to cea90cb, 2010) sysbench/tests/db/{}.lua"

#: sysbench 0.5's options of these scripts (--oltp-auto-inc, --rand-type), with their defaults.
OPTIONS: Mapping[str, object] = MappingProxyType({"auto_inc": True, **COMMON_OPTIONS})
#: oltp_complex_*: also --oltp-range-size, and lock_tables: the scripts took LOCK TABLES ...
#: READ/WRITE and UNLOCK TABLES instead of BEGIN/COMMIT when --mysql-table-engine was spelt
#: "myisam" in lower case; the 2010 pages wrote "MyISAM", so they ran BEGIN/COMMIT (the default).
COMPLEX_OPTIONS: Mapping[str, object] = MappingProxyType({**OPTIONS, "range_size": 100, "lock_tables": False})

POINT = f"SELECT c FROM {TABLE} WHERE id=?"
SELECT_PAD = f"SELECT pad FROM {TABLE} WHERE id = ?"
RANGES = (
    f"SELECT c FROM {TABLE} WHERE id BETWEEN ? AND ?",
    f"SELECT SUM(K) FROM {TABLE} WHERE id BETWEEN ? AND ?",
    f"SELECT c FROM {TABLE} WHERE id BETWEEN ? AND ? ORDER BY c",
    f"SELECT DISTINCT c FROM {TABLE} WHERE id BETWEEN ? AND ? ORDER BY c",
)
UPDATE_K = f"UPDATE {TABLE} SET k=k+1 WHERE id=?"
UPDATE_C = f"UPDATE {TABLE} SET c=? WHERE id=?"
DELETE = f"DELETE FROM {TABLE} WHERE id=?"
#: oltp_complex_rw puts the deleted id back with constant columns.
REINSERT = f"INSERT INTO {TABLE} VALUES(?,0,' ','aaaaaaaaaaffffffffffrrrrrrrrrreeeeeeeeeeyyyyyyyyyy')"
INSERT = f"INSERT INTO {TABLE} VALUES (?,?,?,?)"
DELETE_ONE = f"DELETE FROM {TABLE} WHERE id = ?"
UPDATE_INDEX = f"UPDATE {TABLE} SET k=k+1 WHERE id = ?"
UPDATE_NON_INDEX = f"UPDATE {TABLE} set c=? where id=?"
#: The points of oltp_complex_*: a fixed 10 (no option in 2010).
POINT_SELECTS = 10


class UniqueIds:
    """sysbench 0.5's sb_rand_uniq(1, size): the k-th call gives (k * 2147483647) % size + 1, one
    sequence shared by every thread, so ids repeat after ``size`` inserts (then error 1062).
    Thread t of T takes the calls t + 1, t + 1 + T, ...: together the same sequence."""

    PRIME = 2147483647

    def __init__(self, size: int, thread_id: int, threads: int):
        self.size = size
        self.k = thread_id + 1
        self.step = max(1, threads)

    def next(self) -> int:
        value = self.k * self.PRIME % self.size + 1
        self.k += self.step
        return value


def _trx(g: Generator, lock: str) -> tuple[Op, Op]:
    if g.workload.option("lock_tables"):
        # Plain text: the server does not prepare LOCK TABLES, and sysbench 0.5 emulated it.
        return (OTHER, f"LOCK TABLES {TABLE} {lock}", None), (OTHER, "UNLOCK TABLES", None)
    return BEGIN, COMMIT


def _build_point(sql: str) -> Callable[[Generator, int, int], Callable[[random.Random], Transaction]]:
    # oltp_simple and select: one point select per event, no transaction around it.
    def build(g: Generator, thread_id: int, threads: int) -> Callable[[random.Random], Transaction]:
        size, draw = g.data.table_size, g.draw

        def event(rng: random.Random) -> Transaction:
            return [(READ, sql, (draw(rng.random, 1, size),))]

        return event

    return build


def _build_complex(writes: bool) -> Callable[[Generator, int, int], Callable[[random.Random], Transaction]]:
    def build(g: Generator, thread_id: int, threads: int) -> Callable[[random.Random], Transaction]:
        size, draw = g.data.table_size, g.draw
        span = int(g.workload.option("range_size")) - 1
        begin, commit = _trx(g, "WRITE" if writes else "READ")

        def event(rng: random.Random) -> Transaction:
            r = rng.random
            out: Transaction = [begin]
            for _ in range(POINT_SELECTS):
                out.append((READ, POINT, (draw(r, 1, size),)))
            for sql in RANGES:
                i = draw(r, 1, size)
                out.append((READ, sql, (i, i + span)))
            if writes:
                out.append((WRITE, UPDATE_K, (draw(r, 1, size),)))
                c = c_value(rng)
                out.append((WRITE, UPDATE_C, (c, draw(r, 1, size))))
                i = draw(r, 1, size)  # DELETE and INSERT on the same id
                out.append((WRITE, DELETE, (i,)))
                out.append((WRITE, REINSERT, (i,)))
            out.append(commit)
            return out

        return event

    return build


def _complex_prepared(writes: bool) -> Callable[[Generator], list[str]]:
    def statements(g: Generator) -> list[str]:
        trx = [] if g.workload.option("lock_tables") else [BEGIN[1], COMMIT[1]]
        return trx + [POINT, *RANGES] + ([UPDATE_K, UPDATE_C, DELETE, REINSERT] if writes else [])

    return statements


def _build_insert(g: Generator, thread_id: int, threads: int) -> Callable[[random.Random], Transaction]:
    # id NULL takes the next AUTO_INCREMENT value; without auto_inc, sb_rand_uniq's ids.
    size, draw = g.data.table_size, g.draw
    ids = None if g.workload.option("auto_inc") else UniqueIds(size, thread_id, threads)

    def event(rng: random.Random) -> Transaction:
        i = None if ids is None else ids.next()
        return [(WRITE, INSERT, (i, draw(rng.random, 1, size), c_value(rng), pad_value(rng)))]

    return event


def _build_one(kind: str, sql: str, with_c: bool) -> Callable[[Generator, int, int], Callable[[random.Random], Transaction]]:
    # delete, update_index, update_non_index: one statement by a random id.
    def build(g: Generator, thread_id: int, threads: int) -> Callable[[random.Random], Transaction]:
        size, draw = g.data.table_size, g.draw

        def event(rng: random.Random) -> Transaction:
            if with_c:
                c = c_value(rng)
                return [(kind, sql, (c, draw(rng.random, 1, size)))]
            return [(kind, sql, (draw(rng.random, 1, size),))]

        return event

    return build


# -- the same events as transaction programs (program.py), what the load core runs ---------------


def _one(kind: str, sql: str, *params) -> Statement:
    return Statement(kind, (sql,), params)


def _program_point(sql: str) -> Callable[[Generator, int, int], Program]:
    def compile_(g: Generator, thread_id: int, threads: int) -> Program:
        return Program(block(0, 1, _one(READ, sql, Key(1, g.data.table_size))), g.distribution(), COUNT_BY_STATEMENT)

    return compile_


def _program_complex(writes: bool) -> Callable[[Generator, int, int], Program]:
    def compile_(g: Generator, thread_id: int, threads: int) -> Program:
        key = Key(1, g.data.table_size)
        saved = Key(1, g.data.table_size, 0)
        span = int(g.workload.option("range_size")) - 1
        begin, commit = _trx(g, "WRITE" if writes else "READ")
        blocks = block(0, 1, Statement(begin[0], (begin[1],), text=begin[2] is None))
        blocks += block(0, POINT_SELECTS, _one(READ, POINT, key))
        blocks += block(0, 1, *(_one(READ, sql, saved, Ref(0, span)) for sql in RANGES))
        if writes:
            # DELETE and INSERT on the same id.
            blocks += block(0, 1, _one(WRITE, UPDATE_K, key), _one(WRITE, UPDATE_C, Digits(10), key),
                            _one(WRITE, DELETE, saved), _one(WRITE, REINSERT, Ref(0)))
        blocks += block(0, 1, Statement(commit[0], (commit[1],), text=commit[2] is None))
        return Program(blocks, g.distribution(), COUNT_BY_STATEMENT, registers=1)

    return compile_


def _program_insert(g: Generator, thread_id: int, threads: int) -> Program:
    size = g.data.table_size
    i = Const(None) if g.workload.option("auto_inc") else Cycle(thread_id + 1, max(1, threads), size)
    return Program(block(0, 1, _one(WRITE, INSERT, i, Key(1, size), Digits(10), Digits(5))), g.distribution(),
                   COUNT_BY_STATEMENT)


def _program_one(kind: str, sql: str, with_c: bool) -> Callable[[Generator, int, int], Program]:
    def compile_(g: Generator, thread_id: int, threads: int) -> Program:
        key = Key(1, g.data.table_size)
        params = (Digits(10), key) if with_c else (key,)
        return Program(block(0, 1, _one(kind, sql, *params)), g.distribution(), COUNT_BY_STATEMENT)

    return compile_


def _register(name: str, statements: Callable[[Generator], list[str]], program: Callable[[Generator, int, int], Program],
              *, options: Mapping[str, object] = OPTIONS, empty: bool = False) -> Callable:
    return register(name, options=options, prepared=statements, source=SOURCE.format(name), program=program,
                    counting=COUNT_BY_STATEMENT, tables=SYSBENCH_05_EMPTY if empty else SYSBENCH_05, max_tables=1)


_register("oltp_simple", lambda g: [POINT], _program_point(POINT))(_build_point(POINT))
_register("select", lambda g: [SELECT_PAD], _program_point(SELECT_PAD))(_build_point(SELECT_PAD))
_register("oltp_complex_ro", _complex_prepared(writes=False), _program_complex(writes=False),
          options=COMPLEX_OPTIONS)(_build_complex(writes=False))
_register("oltp_complex_rw", _complex_prepared(writes=True), _program_complex(writes=True),
          options=COMPLEX_OPTIONS)(_build_complex(writes=True))
_register("insert", lambda g: [INSERT], _program_insert, empty=True)(_build_insert)
_register("delete", lambda g: [DELETE_ONE], _program_one(WRITE, DELETE_ONE, False))(
    _build_one(WRITE, DELETE_ONE, with_c=False))
_register("update_index", lambda g: [UPDATE_INDEX], _program_one(WRITE, UPDATE_INDEX, False))(
    _build_one(WRITE, UPDATE_INDEX, with_c=False))
_register("update_non_index", lambda g: [UPDATE_NON_INDEX], _program_one(WRITE, UPDATE_NON_INDEX, True))(
    _build_one(WRITE, UPDATE_NON_INDEX, with_c=True))
