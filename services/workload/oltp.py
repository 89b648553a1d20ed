"""sysbench 1.0.20's oltp_* tests: which statements one event runs, with what parameters
(oltp_common.lua's execute_* functions and each test's event())."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Callable

from services.workload.program import Const, Digits, Key, Program, Ref, Statement, Unique, block
from services.workload.registry import OLTP_OPTIONS, OTHER, READ, WRITE, Transaction, register
from services.workload.statements import (
    BEGIN,
    COMMIT,
    RANGES,
    STATEMENTS,
    Generator,
    c_value,
    pad_value,
    per_table,
)


def _trx(g: Generator) -> bool:
    return not g.workload.option("skip_trx")


def _counts(g: Generator) -> dict[str, int]:
    return {k: int(g.workload.option(k)) for k in
            ("point_selects", "index_updates", "non_index_updates", "delete_inserts", *RANGES)}


# Each execute_* of oltp_common.lua draws its table even when its count is 0.


def _point_selects(g: Generator, n: int, r: Callable[[], float], out: Transaction) -> None:
    sql = g.sql["point_selects"][g._table(r)]
    for _ in range(n):
        out.append((READ, sql, (g._id(r),)))


def _ranges(g: Generator, counts: dict[str, int], r: Callable[[], float], out: Transaction) -> None:
    span = int(g.workload.option("range_size")) - 1
    for key in RANGES:
        sql = g.sql[key][g._table(r)]
        for _ in range(counts[key]):
            i = g._id(r)
            out.append((READ, sql, (i, i + span)))


def _writes(g: Generator, counts: dict[str, int], rng: random.Random, out: Transaction) -> None:
    r = rng.random
    sql = g.sql["index_updates"][g._table(r)]
    for _ in range(counts["index_updates"]):
        out.append((WRITE, sql, (g._id(r),)))
    sql = g.sql["non_index_updates"][g._table(r)]
    for _ in range(counts["non_index_updates"]):
        out.append((WRITE, sql, (c_value(rng), g._id(r))))
    t = g._table(r)
    delete, insert = g.sql["deletes"][t], g.sql["inserts"][t]
    for _ in range(counts["delete_inserts"]):
        i, k = g._id(r), g._id(r)
        out.append((WRITE, delete, (i,)))
        out.append((WRITE, insert, (i, k, c_value(rng), pad_value(rng))))


def _build_point_select(g: Generator, thread_id: int, threads: int) -> Callable[[random.Random], Transaction]:
    # oltp_point_select forces point_selects=1 and never wraps it in BEGIN/COMMIT.
    by_table = g.sql["point_selects"]
    tables, size, draw = g.data.tables, g.data.table_size, g.draw

    def event(rng: random.Random) -> Transaction:
        r = rng.random
        return [(READ, by_table[int(1 + r() * tables)], (draw(r, 1, size),))]

    return event


def _build_oltp(reads: bool, writes: bool) -> Callable[[Generator, int, int], Callable[[random.Random], Transaction]]:
    def build(g: Generator, thread_id: int, threads: int) -> Callable[[random.Random], Transaction]:
        counts, trx = _counts(g), _trx(g)
        range_selects = bool(g.workload.option("range_selects"))

        def event(rng: random.Random) -> Transaction:
            r = rng.random
            out: Transaction = [BEGIN] if trx else []
            if reads:
                _point_selects(g, counts["point_selects"], r, out)
                if range_selects:
                    _ranges(g, counts, r, out)
            if writes:
                _writes(g, counts, rng, out)
            if trx:
                out.append(COMMIT)
            return out

        return event

    return build


def _build_single_write(key: str) -> Callable[[Generator, int, int], Callable[[random.Random], Transaction]]:
    # oltp_update_index / oltp_update_non_index: the execute_* function alone, no BEGIN/COMMIT.
    def build(g: Generator, thread_id: int, threads: int) -> Callable[[random.Random], Transaction]:
        n = int(g.workload.option(key))

        def event(rng: random.Random) -> Transaction:
            r = rng.random
            out: Transaction = []
            sql = g.sql[key][g._table(r)]
            for _ in range(n):
                params = (g._id(r),) if key == "index_updates" else (c_value(rng), g._id(r))
                out.append((WRITE, sql, params))
            return out

        return event

    return build


def _build_delete(g: Generator, thread_id: int, threads: int) -> Callable[[random.Random], Transaction]:
    def event(rng: random.Random) -> Transaction:
        r = rng.random
        return [(WRITE, g.sql["deletes"][g._table(r)], (g._id(r),))]

    return event


def _build_insert(g: Generator, thread_id: int, threads: int) -> Callable[[random.Random], Transaction]:
    # sysbench sends these as text: with auto_inc the id 0 asks the server for the next value;
    # without it, a unique uint32 shifted into the signed INT range.
    auto_inc = bool(g.workload.option("auto_inc"))

    def event(rng: random.Random) -> Transaction:
        r = rng.random
        table = g._table(r)
        k = g._id(r)
        i = 0 if auto_inc else g._unique.next() - 2147483648
        sql = (f"INSERT INTO sbtest{table} (id, k, c, pad) VALUES "
               f"({i}, {k}, '{c_value(rng)}', '{pad_value(rng)}')")
        return [(WRITE, sql, None)]

    return event


# -- the same events as transaction programs (program.py), what the load core runs ---------------


def _per_table(g: Generator, key: str) -> tuple[str, ...]:
    return tuple(g.sql[key][1:])


def _key(g: Generator, save: int = -1) -> Key:
    return Key(1, g.data.table_size, save)


def _stmt(g: Generator, key: str, *params) -> Statement:
    return Statement(STATEMENTS[key][0], _per_table(g, key), params)


def _program_point_select(g: Generator, thread_id: int, threads: int) -> Program:
    return Program(block(g.data.tables, 1, _stmt(g, "point_selects", _key(g))), g.distribution())


def _program_oltp(reads: bool, writes: bool) -> Callable[[Generator, int, int], Program]:
    def compile_(g: Generator, thread_id: int, threads: int) -> Program:
        counts, trx, n = _counts(g), _trx(g), g.data.tables
        span = int(g.workload.option("range_size")) - 1
        blocks = block(0, 1, Statement(OTHER, ("BEGIN",))) if trx else ()
        if reads:
            blocks += block(n, counts["point_selects"], _stmt(g, "point_selects", _key(g)))
            if g.workload.option("range_selects"):
                for key in RANGES:
                    blocks += block(n, counts[key], _stmt(g, key, _key(g, 0), Ref(0, span)))
        if writes:
            blocks += block(n, counts["index_updates"], _stmt(g, "index_updates", _key(g)))
            blocks += block(n, counts["non_index_updates"], _stmt(g, "non_index_updates", Digits(10), _key(g)))
            # The id deleted is inserted again, with a new k, c and pad.
            blocks += block(n, counts["delete_inserts"], _stmt(g, "deletes", _key(g, 0)),
                            _stmt(g, "inserts", Ref(0), _key(g), Digits(10), Digits(5)))
        if trx:
            blocks += block(0, 1, Statement(OTHER, ("COMMIT",)))
        return Program(blocks, g.distribution(), registers=1)

    return compile_


def _program_single_write(key: str) -> Callable[[Generator, int, int], Program]:
    def compile_(g: Generator, thread_id: int, threads: int) -> Program:
        params = (_key(g),) if key == "index_updates" else (Digits(10), _key(g))
        # One table drawn per event, then the n statements on it.
        return Program(block(g.data.tables, int(g.workload.option(key)), _stmt(g, key, *params)), g.distribution())

    return compile_


def _program_delete(g: Generator, thread_id: int, threads: int) -> Program:
    return Program(block(g.data.tables, 1, _stmt(g, "deletes", _key(g))), g.distribution())


def _program_insert(g: Generator, thread_id: int, threads: int) -> Program:
    # Plain text, as sysbench sends it; the id 0 asks for the next AUTO_INCREMENT value.
    u = g._unique
    i = Const(0) if g.workload.option("auto_inc") else Unique(u.index, u.offset, u.step, -2147483648)
    sql = tuple(f"INSERT INTO sbtest{t} (id, k, c, pad) VALUES (?, ?, '?', '?')" for t in range(1, g.data.tables + 1))
    return Program(block(g.data.tables, 1, Statement(WRITE, sql, (i, _key(g), Digits(10), Digits(5)), text=True)),
                   g.distribution())


def _oltp_prepared(reads: bool, writes: bool) -> Callable[[Generator], list[str]]:
    def statements(g: Generator) -> list[str]:
        keys: list[str] = []
        if reads:
            keys.append("point_selects")
            if g.workload.option("range_selects"):
                keys += RANGES
        if writes:
            keys += ["index_updates", "non_index_updates", "deletes", "inserts"]
        trx = ["BEGIN", "COMMIT"] if _trx(g) else []
        return trx + per_table(g, keys)

    return statements


# -- the registry: one entry per workload ----------------------------------------------------------


def _with_histogram_draw(build: Callable[[Generator, int, int], Callable[[random.Random], Transaction]]
                        ) -> Callable[[Generator, int, int], Callable[[random.Random], Transaction]]:
    # sysbench 1.0.20 ends every event with one draw of the thread's stream (the latency
    # histogram's slot), which the next event's keys come after.
    def wrapped(g: Generator, thread_id: int, threads: int) -> Callable[[random.Random], Transaction]:
        event = build(g, thread_id, threads)

        def with_draw(rng: random.Random) -> Transaction:
            out = event(rng)
            rng.random()
            return out

        return with_draw

    return wrapped


def _register(name: str, prepared: Callable[[Generator], list[str]],
              program: Callable[[Generator, int, int], Program]) -> Callable:
    # Each runs under its own name with the sysbench driver too.
    def with_tail(g: Generator, thread_id: int, threads: int) -> Program:
        return replace(program(g, thread_id, threads), tail_draws=1)

    registered = register(name, options=OLTP_OPTIONS, prepared=prepared, sysbench_test=name, program=with_tail,
                          source=f"akopytov/sysbench 1.0.20 src/lua/{name}.lua + src/lua/oltp_common.lua")
    return lambda build: registered(_with_histogram_draw(build))


_register("oltp_point_select", lambda g: per_table(g, ["point_selects"]),
          _program_point_select)(_build_point_select)
_register("oltp_read_only", _oltp_prepared(reads=True, writes=False),
          _program_oltp(reads=True, writes=False))(_build_oltp(reads=True, writes=False))
_register("oltp_read_write", _oltp_prepared(reads=True, writes=True),
          _program_oltp(reads=True, writes=True))(_build_oltp(reads=True, writes=True))
_register("oltp_write_only", _oltp_prepared(reads=False, writes=True),
          _program_oltp(reads=False, writes=True))(_build_oltp(reads=False, writes=True))
_register("oltp_update_index", lambda g: per_table(g, ["index_updates"]),
          _program_single_write("index_updates"))(_build_single_write("index_updates"))
_register("oltp_update_non_index", lambda g: per_table(g, ["non_index_updates"]),
          _program_single_write("non_index_updates"))(_build_single_write("non_index_updates"))
_register("oltp_delete", lambda g: per_table(g, ["deletes"]), _program_delete)(_build_delete)
_register("oltp_insert", lambda g: [], _program_insert)(_build_insert)
