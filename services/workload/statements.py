"""sysbench 1.0.20's OLTP transactions as data: which statements one event runs, with what
parameters, so the load loop only executes them.

A transaction is a list of ``(kind, sql, params)``: ``kind`` is read, write or other (how
sysbench counts it), ``sql`` the statement with ``?`` placeholders, ``params`` the values
to bind. ``params is None`` marks a statement sysbench sends as plain text (oltp_insert);
every other statement is a server-side prepared statement in sysbench, and here too.
Pure: no database import, so tests feed literal seeds and check literal statements.
"""

from __future__ import annotations

import random
from typing import Callable, Optional, Sequence

from services.common.spec import DataShape, WorkloadSpec
from services.workload import distributions

READ = "read"
WRITE = "write"
OTHER = "other"

Op = tuple[str, str, Optional[tuple]]
Transaction = list[Op]

#: oltp_common.lua's stmt_defs: statement key -> (kind, template with %u for the table).
STATEMENTS: dict[str, tuple[str, str]] = {
    "point_selects": (READ, "SELECT c FROM sbtest%u WHERE id=?"),
    "simple_ranges": (READ, "SELECT c FROM sbtest%u WHERE id BETWEEN ? AND ?"),
    "sum_ranges": (READ, "SELECT SUM(k) FROM sbtest%u WHERE id BETWEEN ? AND ?"),
    "order_ranges": (READ, "SELECT c FROM sbtest%u WHERE id BETWEEN ? AND ? ORDER BY c"),
    "distinct_ranges": (READ, "SELECT DISTINCT c FROM sbtest%u WHERE id BETWEEN ? AND ? ORDER BY c"),
    "index_updates": (WRITE, "UPDATE sbtest%u SET k=k+1 WHERE id=?"),
    "non_index_updates": (WRITE, "UPDATE sbtest%u SET c=? WHERE id=?"),
    "deletes": (WRITE, "DELETE FROM sbtest%u WHERE id=?"),
    "inserts": (WRITE, "INSERT INTO sbtest%u (id, k, c, pad) VALUES (?, ?, ?, ?)"),
}
BEGIN: Op = (OTHER, "BEGIN", ())
COMMIT: Op = (OTHER, "COMMIT", ())
_RANGES = ("simple_ranges", "sum_ranges", "order_ranges", "distinct_ranges")


def c_value(rng: random.Random) -> str:
    """sysbench's c column: 10 groups of 11 random digits joined by '-' (119 characters)."""
    rr = rng.randrange
    return "-".join(["%011d" % rr(100_000_000_000) for _ in range(10)])


def pad_value(rng: random.Random) -> str:
    """sysbench's pad column: 5 groups of 11 random digits joined by '-' (59 characters)."""
    rr = rng.randrange
    return "-".join(["%011d" % rr(100_000_000_000) for _ in range(5)])


class _Unique:
    """sysbench.rand.unique: a permutation of uint32, so client-generated ids do not repeat.
    Each thread walks its own residue class of the index so threads never collide."""

    _PRIME = 4294967291

    def __init__(self, rng: random.Random, thread_id: int, threads: int):
        p = self._permute
        self.index = p((p(rng.getrandbits(31)) + 0x682F0161) & 0xFFFFFFFF) + thread_id
        self.offset = p((p(rng.getrandbits(31)) + 0x46790905) & 0xFFFFFFFF)
        self.step = max(1, threads)

    @classmethod
    def _permute(cls, x: int) -> int:
        if x >= cls._PRIME:
            return x
        residue = x * x % cls._PRIME
        return residue if x <= cls._PRIME // 2 else cls._PRIME - residue

    def next(self) -> int:
        i = self.index & 0xFFFFFFFF
        self.index += self.step
        return self._permute(((self._permute(i) + self.offset) & 0xFFFFFFFF) ^ 0x5BF03635)


class Generator:
    """Builds one transaction at a time for one client thread; construct once per thread.

    ``thread_id``/``threads`` matter only to select_random_*, which give each thread its own
    slice of the key range as sysbench does (sysbench.tid % threads).
    """

    def __init__(self, workload: WorkloadSpec, data: DataShape, *, thread_id: int = 0,
                 threads: int = 1, seed_rng: random.Random | None = None):
        name = workload.canonical
        if name not in _BUILDERS:
            raise ValueError(f"workload {name} has no native implementation")
        self.workload = workload
        self.data = data
        self.draw = distributions.by_name(str(workload.option("rand_type")))
        self._unique = _Unique(seed_rng or random.Random(0), thread_id, threads)
        # Formatted once, so the loop hands the same string objects (and cached hashes) on.
        self.sql = {key: [tpl % t for t in range(data.tables + 1)] for key, (_, tpl) in STATEMENTS.items()}
        #: The next transaction from a random stream; the load loop calls this directly, one call
        #: less per transaction than going through __call__.
        self.event: Callable[[random.Random], Transaction] = _BUILDERS[name](self, thread_id, threads)

    def __call__(self, rng: random.Random) -> Transaction:
        return self.event(rng)

    def statements(self) -> list[str]:
        """Every prepared statement this workload may execute (each connection prepares these
        up front, like sysbench's thread_init)."""
        return [s for s in _PREPARED[self.workload.canonical](self) if s]

    # -- pieces shared by the oltp_* events (oltp_common.lua's execute_* functions) --

    def _table(self, r: Callable[[], float]) -> int:
        return 1 + int(r() * self.data.tables)

    def _id(self, r: Callable[[], float]) -> int:
        return self.draw(r, 1, self.data.table_size)


def _trx(g: Generator) -> bool:
    return not g.workload.option("skip_trx")


def _counts(g: Generator) -> dict[str, int]:
    return {k: int(g.workload.option(k)) for k in
            ("point_selects", "index_updates", "non_index_updates", "delete_inserts", *_RANGES)}


def _point_selects(g: Generator, n: int, r: Callable[[], float], out: Transaction) -> None:
    if n <= 0:
        return
    sql = g.sql["point_selects"][g._table(r)]
    for _ in range(n):
        out.append((READ, sql, (g._id(r),)))


def _ranges(g: Generator, counts: dict[str, int], r: Callable[[], float], out: Transaction) -> None:
    span = int(g.workload.option("range_size")) - 1
    for key in _RANGES:
        if counts[key] <= 0:
            continue
        sql = g.sql[key][g._table(r)]
        for _ in range(counts[key]):
            i = g._id(r)
            out.append((READ, sql, (i, i + span)))


def _writes(g: Generator, counts: dict[str, int], rng: random.Random, out: Transaction) -> None:
    r = rng.random
    if counts["index_updates"] > 0:
        sql = g.sql["index_updates"][g._table(r)]
        for _ in range(counts["index_updates"]):
            out.append((WRITE, sql, (g._id(r),)))
    if counts["non_index_updates"] > 0:
        sql = g.sql["non_index_updates"][g._table(r)]
        for _ in range(counts["non_index_updates"]):
            out.append((WRITE, sql, (c_value(rng), g._id(r))))
    if counts["delete_inserts"] > 0:
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
        return [(READ, by_table[1 + int(r() * tables)], (draw(r, 1, size),))]

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


_BUILDERS: dict[str, Callable[[Generator, int, int], Callable[[random.Random], Transaction]]] = {
    "oltp_point_select": _build_point_select,
    "oltp_read_only": _build_oltp(reads=True, writes=False),
    "oltp_read_write": _build_oltp(reads=True, writes=True),
    "oltp_write_only": _build_oltp(reads=False, writes=True),
    "oltp_update_index": _build_single_write("index_updates"),
    "oltp_update_non_index": _build_single_write("non_index_updates"),
    "oltp_delete": _build_delete,
    "oltp_insert": _build_insert,
    "select_random_points": _build_random_points,
    "select_random_ranges": _build_random_ranges,
}


def _per_table(g: Generator, keys: Sequence[str]) -> list[str]:
    return [g.sql[k][t] for k in keys for t in range(1, g.data.tables + 1)]


def _oltp_prepared(reads: bool, writes: bool) -> Callable[[Generator], list[str]]:
    def statements(g: Generator) -> list[str]:
        keys: list[str] = []
        if reads:
            keys.append("point_selects")
            if g.workload.option("range_selects"):
                keys += _RANGES
        if writes:
            keys += ["index_updates", "non_index_updates", "deletes", "inserts"]
        trx = ["BEGIN", "COMMIT"] if _trx(g) else []
        return trx + _per_table(g, keys)

    return statements


_PREPARED: dict[str, Callable[[Generator], list[str]]] = {
    "oltp_point_select": lambda g: _per_table(g, ["point_selects"]),
    "oltp_read_only": _oltp_prepared(reads=True, writes=False),
    "oltp_read_write": _oltp_prepared(reads=True, writes=True),
    "oltp_write_only": _oltp_prepared(reads=False, writes=True),
    "oltp_update_index": lambda g: _per_table(g, ["index_updates"]),
    "oltp_update_non_index": lambda g: _per_table(g, ["non_index_updates"]),
    "oltp_delete": lambda g: _per_table(g, ["deletes"]),
    "oltp_insert": lambda g: [],
    "select_random_points": lambda g: [_random_points_sql(int(g.workload.option("random_points")))],
    "select_random_ranges": lambda g: [_random_ranges_sql(int(g.workload.option("number_of_ranges")))],
}

#: Every workload this module can generate.
IMPLEMENTED: frozenset[str] = frozenset(_BUILDERS)


def transaction(rng: random.Random, workload: WorkloadSpec, data: DataShape) -> Transaction:
    """One transaction of ``workload`` (convenience for tests; loops keep a Generator)."""
    return Generator(workload, data)(rng)
