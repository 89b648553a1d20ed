"""What every workload's transactions are made of: sysbench's SQL, its column values, its unique
ids, and the Generator that draws one transaction at a time for one client thread. The
workloads themselves (which statements an event runs) are registered in oltp.py,
sysbench05.py and random_select.py.

A transaction is a list of ``(kind, sql, params)``: ``kind`` is read, write or other (how
sysbench counts it), ``sql`` the statement with ``?`` placeholders, ``params`` the values
to bind. ``params is None`` marks a statement sysbench sends as plain text (oltp_insert);
every other statement is a server-side prepared statement in sysbench, and here too.
Pure: no database import, so tests feed literal seeds and check literal statements.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Protocol, Sequence

from services.workload import distributions
from services.workload.program import Distribution, digits, text_program
from services.workload.registry import OTHER, READ, WRITE, Op, Transaction, definition


class WorkloadOptions(Protocol):
    """What the generator reads of a workload (services.common.spec.workloads.WorkloadSpec has it)."""

    @property
    def name(self) -> str: ...

    def option(self, key: str) -> Any: ...


class TableShape(Protocol):
    """What the generator reads of the table shape (services.common.spec.workloads.DataShape has it)."""

    @property
    def tables(self) -> int: ...

    @property
    def table_size(self) -> int: ...


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
RANGES = ("simple_ranges", "sum_ranges", "order_ranges", "distinct_ranges")


def c_value(rng: random.Random) -> str:
    """sysbench's c column: 10 groups of 11 random digits joined by '-' (119 characters)."""
    return digits(rng, 10)


def pad_value(rng: random.Random) -> str:
    """sysbench's pad column: 5 groups of 11 random digits joined by '-' (59 characters)."""
    return digits(rng, 5)


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

    def __init__(self, workload: WorkloadOptions, data: TableShape, *, thread_id: int = 0,
                 threads: int = 1, seed_rng: random.Random | None = None):
        if getattr(workload, "script", None) is not None:
            raise ValueError(f"workload {workload.name} is a Lua script, which only driver: sysbench runs")
        try:
            self.definition = definition(workload.name)
        except KeyError:
            raise ValueError(f"workload {workload.name} has no native implementation") from None
        self.workload = workload
        self.data = data
        self.thread_id, self.threads = thread_id, threads
        self.draw = draw_of(workload)
        self._unique = _Unique(seed_rng or random.Random(0), thread_id, threads)
        # Formatted once, so the loop hands the same string objects (and cached hashes) on.
        self.sql = {key: [tpl % t for t in range(data.tables + 1)] for key, (_, tpl) in STATEMENTS.items()}
        #: The next transaction from a random stream; the load loop calls this directly, one call
        #: less per transaction than going through __call__.
        self.event: Callable[[random.Random], Transaction] = self.definition.build(self, thread_id, threads)

    def __call__(self, rng: random.Random) -> Transaction:
        return self.event(rng)

    def program(self) -> Any:
        """This thread's transaction as a program.Program (the load core runs it); ValueError
        when the workload has none yet."""
        compile_ = self.definition.program
        if compile_ is None:
            raise ValueError(f"workload {self.workload.name} has no transaction program")
        program = compile_(self, self.thread_id, self.threads)
        # db_ps_mode disable: nothing prepared on the server, every statement sent as text.
        return program if uses_prepared(self.workload) else text_program(program)

    def distribution(self) -> Distribution:
        """The key distribution of the rand_type option with its parameters (rand_spec_*,
        rand_pareto_h, rand_zipfian_exp), as a program.Distribution."""
        o = self.workload.option
        return Distribution(str(o("rand_type")), iters=int(o("rand_spec_iter")), pct=int(o("rand_spec_pct")),
                            res=int(o("rand_spec_res")), pareto_h=float(o("rand_pareto_h")),
                            zipfian_exp=float(o("rand_zipfian_exp")))

    def statements(self) -> list[str]:
        """Every prepared statement this workload may execute (each connection prepares these
        up front, like sysbench's thread_init)."""
        return [s for s in self.definition.prepared(self) if s]

    # -- pieces shared by the oltp_* events (oltp_common.lua's execute_* functions) --

    def _table(self, r: Callable[[], float]) -> int:
        # sysbench.rand.uniform(1, tables)
        return int(1 + r() * self.data.tables)

    def _id(self, r: Callable[[], float]) -> int:
        return self.draw(r, 1, self.data.table_size)


def literal(v: Any) -> str:
    """One parameter as SQL text, the way a statement sent without server-side preparing
    carries it (sysbench's --db-ps-mode=disable): numbers as written, text quoted, None NULL."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, (int, float)):
        return repr(v)
    text = v.decode() if isinstance(v, bytes) else str(v)
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def as_text(sql: str, params: Sequence[Any]) -> str:
    """``sql`` with each ``?`` replaced by its parameter as SQL text (the templates hold no
    literal '?'); ValueError when the counts differ."""
    pieces = sql.split("?")
    if len(pieces) != len(params) + 1:
        raise ValueError(f"{len(params)} parameters for {len(pieces) - 1} placeholders in {sql!r}")
    out = [pieces[0]]
    for value, piece in zip(params, pieces[1:]):
        out += (literal(value), piece)
    return "".join(out)


def text_events(event: Callable[[random.Random], Transaction]) -> Callable[[random.Random], Transaction]:
    """``event`` with every statement sent as text (``params`` None) instead of prepared on the
    server: sysbench's --db-ps-mode=disable, which sends BEGIN and COMMIT as text too."""

    def text(rng: random.Random) -> Transaction:
        return [(kind, sql if params is None else as_text(sql, params), None) for kind, sql, params in event(rng)]

    return text


def uses_prepared(workload: WorkloadOptions) -> bool:
    """Whether ``workload``'s statements are prepared on the server (db_ps_mode auto)."""
    return str(workload.option("db_ps_mode")) != "disable"


def draw_of(workload: WorkloadOptions) -> distributions.Draw:
    """The key distribution of ``workload``: its rand_type with that type's parameters."""
    o = workload.option
    return distributions.make(str(o("rand_type")), iters=int(o("rand_spec_iter")), pct=int(o("rand_spec_pct")),
                              res=int(o("rand_spec_res")), pareto_h=float(o("rand_pareto_h")),
                              zipfian_exp=float(o("rand_zipfian_exp")))


def per_table(g: Generator, keys: Sequence[str]) -> list[str]:
    """The statements ``keys`` for every table, as a connection prepares them."""
    return [g.sql[k][t] for k in keys for t in range(1, g.data.tables + 1)]


def transaction(rng: random.Random, workload: WorkloadOptions, data: TableShape) -> Transaction:
    """One transaction of ``workload`` (convenience for tests; loops keep a Generator)."""
    return Generator(workload, data)(rng)
