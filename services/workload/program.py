"""A workload's transaction as data: the statements one event runs, the generators of their
parameters, the key distribution and the counting rule. The load core (compiled, in the native
driver) interprets a Program; ``interpret`` here is the same interpreter in Python, the reference
the core is tested against, so a new workload is a new Program and never new C.

Every generator draws from the connection's one random stream, in the order the parameters are
written, block by block, so a Program run on a stream draws the same transaction as the Python
builder it was compiled from (tests/unit/test_program.py checks every workload).
Pure: no database import.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Union

from services.workload import distributions
from services.workload.registry import COUNT_BY_ROWS, COUNT_BY_STATEMENT, OTHER, RAND_TYPES, READ, WRITE, Transaction

KINDS = (READ, WRITE, OTHER)


@dataclass(frozen=True)
class Distribution:
    """sysbench's --rand-type with its parameters (sb_rand.c's --rand-spec-*, --rand-pareto-h,
    --rand-zipfian-exp), sysbench 1.0.20's defaults."""

    name: str
    iters: int = distributions.SPEC_ITER
    pct: int = distributions.SPEC_PCT
    res: int = distributions.SPEC_RES
    pareto_h: float = distributions.PARETO_H
    zipfian_exp: float = distributions.ZIPFIAN_EXP

    def __post_init__(self) -> None:
        if self.name not in RAND_TYPES:
            raise ValueError(f"distribution name {self.name!r}: not one of {', '.join(RAND_TYPES)}")
        if self.iters < 1:
            raise ValueError(f"distribution iters {self.iters}: must be >= 1")
        if not 0 < self.pareto_h < 1:
            raise ValueError(f"distribution pareto_h {self.pareto_h}: must be in (0, 1)")


@dataclass(frozen=True)
class Key:
    """A key from the program's distribution over [lo, hi]; kept in register ``save`` when >= 0."""

    lo: int
    hi: int
    save: int = -1


@dataclass(frozen=True)
class Ref:
    """The value of register ``reg`` (set earlier in the same block repetition) plus ``plus``."""

    reg: int
    plus: int = 0


@dataclass(frozen=True)
class Digits:
    """sysbench's c and pad columns: ``groups`` groups of 11 random digits joined by '-'."""

    groups: int


@dataclass(frozen=True)
class Const:
    """A fixed value; None binds NULL (an AUTO_INCREMENT id)."""

    value: int | None


@dataclass(frozen=True)
class Unique:
    """sysbench 1.0's sysbench.rand.unique() plus ``plus``: a permutation of uint32 walked from
    ``index`` in steps of ``step`` (the connection's residue class), draws nothing from the stream."""

    index: int
    offset: int
    step: int
    plus: int = 0


@dataclass(frozen=True)
class Cycle:
    """sysbench 0.5's sb_rand_uniq(1, size): call k gives (k * 2147483647) % size + 1, this
    connection taking calls ``k``, ``k + step``, ..."""

    k: int
    step: int
    size: int


Param = Union[Key, Ref, Digits, Const, Unique, Cycle]


@dataclass(frozen=True)
class Statement:
    """One statement: how it counts, its SQL (one per table when its block draws a table), its
    parameters; ``text``: sent as plain text, each ``?`` replaced by its value as written."""

    kind: str
    sql: tuple[str, ...]
    params: tuple[Param, ...] = ()
    text: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"statement kind {self.kind!r}: not one of {', '.join(KINDS)}")
        if not self.sql:
            raise ValueError("statement sql: at least one")
        for s in self.sql:
            if s.count("?") != len(self.params):
                raise ValueError(f"statement {s!r}: {s.count('?')} placeholders for {len(self.params)} params")


@dataclass(frozen=True)
class Block:
    """``statements`` run ``repeat`` times; with ``tables`` > 0 the block first draws a table
    (sysbench.rand.uniform(1, tables), oltp_common.lua's) and every statement takes that table's
    SQL. Repeat 0 with tables: the table is drawn and nothing sent (sysbench's execute_* with a 0 count)."""

    statements: tuple[Statement, ...]
    repeat: int = 1
    tables: int = 0

    def __post_init__(self) -> None:
        if self.repeat < 0 or (self.repeat == 0 and self.tables == 0):
            raise ValueError(f"block repeat {self.repeat}: must be >= 1, or 0 in a block that draws a table "
                             "(leave an empty block out)")
        for st in self.statements:
            if len(st.sql) != max(1, self.tables):
                raise ValueError(f"statement {st.sql[0]!r}: {len(st.sql)} SQL strings for a block of "
                                 f"{self.tables} tables")


@dataclass(frozen=True)
class Program:
    """What one connection runs per event, and how its statements count."""

    blocks: tuple[Block, ...]
    distribution: Distribution
    counting: str = COUNT_BY_ROWS
    #: Registers Key(save=...) may write (a few ints per connection).
    registers: int = field(default=0)
    #: Draws taken from the stream after each event and thrown away: sysbench 1.0's latency
    #: histogram takes one per event (sb_histogram_update picks a slot at random).
    tail_draws: int = 0

    def __post_init__(self) -> None:
        if self.counting not in (COUNT_BY_ROWS, COUNT_BY_STATEMENT):
            raise ValueError(f"program counting {self.counting!r}: not {COUNT_BY_ROWS} or {COUNT_BY_STATEMENT}")
        if not 0 <= self.tail_draws <= 16:
            raise ValueError(f"program tail_draws {self.tail_draws}: must be 0 to 16")
        for b in self.blocks:
            for st in b.statements:
                for p in st.params:
                    reg = p.save if isinstance(p, Key) else p.reg if isinstance(p, Ref) else -1
                    if reg >= self.registers:
                        raise ValueError(f"statement {st.sql[0]!r}: register {reg} of {self.registers}")

    def prepared(self) -> tuple[str, ...]:
        """Every statement a connection prepares up front, in first-use order."""
        seen: dict[str, None] = {}
        for b in self.blocks:
            for st in b.statements:
                if not st.text:
                    seen.update(dict.fromkeys(st.sql))
        return tuple(seen)


def _quoted(sql: str, params: tuple[Param, ...]) -> str:
    """``sql`` with the placeholder of each Digits parameter quoted, as a string is written in SQL."""
    pieces = sql.split("?")
    out = [pieces[0]]
    for p, piece in zip(params, pieces[1:]):
        out += ("'?'" if isinstance(p, Digits) else "?", piece)
    return "".join(out)


def text_program(program: Program) -> Program:
    """``program`` with every statement sent as plain text, BEGIN and COMMIT too: sysbench's
    --db-ps-mode=disable (statements.text_events' transactions, drawn from the same stream)."""
    blocks = tuple(
        replace(b, statements=tuple(
            st if st.text else replace(st, sql=tuple(_quoted(s, st.params) for s in st.sql), text=True)
            for st in b.statements))
        for b in program.blocks)
    return replace(program, blocks=blocks)


def block(tables: int, repeat: int, *statements: Statement) -> tuple[Block, ...]:
    """A block as a 0- or 1-tuple: none when it repeats 0 times (the option turned it off) and
    draws no table; one that draws a table stays, as sysbench's execute_* draw it for 0 too."""
    return (Block(statements, repeat, tables),) if repeat > 0 or tables > 0 else ()


def digits(rng: random.Random, groups: int) -> str:
    """``groups`` groups of 11 random digits joined by '-' (statements.c_value for 10): sb_rand_str,
    one sb_rand_uniform('0', '9') per digit."""
    r = rng.random
    # int(48 + u * 10) as sysbench truncates it: u near 1 rounds up to ':' (58), as sysbench's does.
    return "-".join(["".join([chr(int(48.0 + r() * 10.0)) for _ in range(11)]) for _ in range(groups)])


def _draw_of(d: Distribution):
    if d.name == "uniform":
        return distributions.uniform
    if d.name == "gaussian":
        return lambda r, a, b: distributions.gaussian(r, a, b, d.iters)
    if d.name == "special":
        return lambda r, a, b: distributions.special(r, a, b, d.iters, d.pct, d.res)
    if d.name == "pareto":
        power = distributions._pareto_power(d.pareto_h)
        return lambda r, a, b: distributions.pareto(r, a, b, power)
    return distributions.make_zipfian(d.zipfian_exp)


class Interpreter:
    """Runs a Program on a random stream in Python: one transaction a call, in the shape the
    statement generators return (kind, sql, params; params None for plain text)."""

    def __init__(self, program: Program):
        self.program = program
        self._draw = _draw_of(program.distribution)
        self._regs = [0] * program.registers
        #: Where each Unique and Cycle generator stands, by identity of the generator.
        self._next: dict[int, int] = {}

    def __call__(self, rng: random.Random) -> Transaction:
        r, out = rng.random, []
        for b in self.program.blocks:
            # sysbench.rand.uniform(1, tables), as an index.
            t = int(1.0 + r() * b.tables) - 1 if b.tables else 0
            for _ in range(b.repeat):
                for st in b.statements:
                    values = tuple(self._value(p, rng) for p in st.params)
                    sql = st.sql[t]
                    if st.text:
                        pieces = sql.split("?")
                        text = pieces[0] + "".join(("NULL" if v is None else str(v)) + s
                                                   for v, s in zip(values, pieces[1:]))
                        out.append((st.kind, text, None))
                    else:
                        out.append((st.kind, sql, values))
        for _ in range(self.program.tail_draws):
            r()
        return out

    def _value(self, p: Param, rng: random.Random) -> int | str | None:
        if isinstance(p, Key):
            v = self._draw(rng.random, p.lo, p.hi)
            if p.save >= 0:
                self._regs[p.save] = v
            return v
        if isinstance(p, Ref):
            return self._regs[p.reg] + p.plus
        if isinstance(p, Digits):
            return digits(rng, p.groups)
        if isinstance(p, Const):
            return p.value
        if isinstance(p, Unique):
            i = self._next.get(id(p), p.index)
            self._next[id(p)] = i + p.step
            return unique_value(i, p.offset) + p.plus
        k = self._next.get(id(p), p.k)
        self._next[id(p)] = k + p.step
        return k * 2147483647 % p.size + 1


_PRIME = 4294967291


def _permute(x: int) -> int:
    if x >= _PRIME:
        return x
    residue = x * x % _PRIME
    return residue if x <= _PRIME // 2 else _PRIME - residue


def unique_value(index: int, offset: int) -> int:
    """sysbench.rand.unique()'s value at ``index`` (statements._Unique.next's formula)."""
    return _permute(((_permute(index & 0xFFFFFFFF) + offset) & 0xFFFFFFFF) ^ 0x5BF03635)
