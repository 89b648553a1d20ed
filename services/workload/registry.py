"""The workload registry: every workload a spec may name, each defined once with the options it
accepts (sysbench's defaults), the transaction it runs, the statements each connection prepares
and what its tables need. A new workload is one ``@register``-ed builder in one module, with the
same transaction as a program.Program (``program=``), which the native driver's compiled core runs.

Two families share it: sysbench 1.0.20's tests (oltp.py) and the 2010 pages' names, each running
what sysbench 0.5's script of that name ran in 2010 (sysbench05.py, random_select.py).
docs/workloads.md has one row per name: its source script and commit, its statements, its data.

Pure: no database or service import, so the spec (services/common) validates names and options
against it and the drivers run from it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Mapping, Optional


READ = "read"
WRITE = "write"
OTHER = "other"

#: One statement of a transaction: (kind, sql, params); ``params is None`` marks a statement sent
#: as plain text (oltp_insert's), every other one is a server-side prepared statement.
Op = tuple[str, str, Optional[tuple]]
Transaction = list[Op]
Event = Callable[[random.Random], Transaction]
#: A workload's builder takes the statements.Generator of one thread (typed Any here: that
#: module imports this one), the thread's id and the thread count.
Builder = Callable[[Any, int, int], Event]

RAND_TYPES = ("uniform", "gaussian", "special", "pareto", "zipfian")
#: sysbench's --db-ps-mode: server-side prepared statements (auto) or statements sent as text.
PS_MODES = ("auto", "disable")

#: sysbench's global options every test takes, as each test's options (sysbench 1.0.20's
#: defaults; rand_zipfian_exp is sysbench 1.1's, the native driver's zipfian): the random
#: distribution with its parameters, prepared statements or text, and client compression.
COMMON_OPTIONS: Mapping[str, object] = MappingProxyType(
    {
        "rand_type": "special",
        "rand_spec_iter": 12,
        "rand_spec_pct": 1,
        "rand_spec_res": 75,
        "rand_pareto_h": 0.2,
        "rand_zipfian_exp": 0.8,
        "db_ps_mode": "auto",
        "mysql_compression": False,
    }
)
#: Options a run passes to sysbench under another spelling than --KEY=VALUE (its global options
#: are spelt with '-'), or not at all (rand_zipfian_exp: sysbench 1.0.20 has no zipfian).
SYSBENCH_SPELLING: Mapping[str, str | None] = MappingProxyType(
    {"rand_type": "--rand-type", "rand_spec_iter": "--rand-spec-iter", "rand_spec_pct": "--rand-spec-pct",
     "rand_spec_res": "--rand-spec-res", "rand_pareto_h": "--rand-pareto-h", "rand_zipfian_exp": None,
     "db_ps_mode": "--db-ps-mode", "mysql_compression": "--mysql-compression"}
)
#: Options that change the prepared tables (oltp_common.lua's create_table), besides auto_inc.
TABLE_OPTIONS = ("secondary", "create_secondary")

#: How a workload's statements count as reads, writes and other (docs/workloads.md):
#: sysbench 1.0 counts a statement without a result set as a write only when it changed rows
#: (BEGIN, COMMIT, an UPDATE or DELETE of no row are "other"); sysbench 0.5 counted every
#: INSERT, UPDATE and DELETE as a write, whatever it changed.
COUNT_BY_ROWS = "sysbench-1.0"
COUNT_BY_STATEMENT = "sysbench-0.5"

#: Options every OLTP test accepts, with sysbench 1.0's defaults (oltp_common.lua).
OLTP_OPTIONS: Mapping[str, object] = MappingProxyType(
    {
        "range_size": 100,
        "point_selects": 10,
        "simple_ranges": 1,
        "sum_ranges": 1,
        "order_ranges": 1,
        "distinct_ranges": 1,
        "index_updates": 1,
        "non_index_updates": 1,
        "delete_inserts": 1,
        "range_selects": True,
        "skip_trx": False,
        "auto_inc": True,
        "secondary": False,
        "create_secondary": True,
        **COMMON_OPTIONS,
    }
)

#: Extra options of the select_random_* tests (select_random_points.lua, select_random_ranges.lua).
RANDOM_OPTIONS: Mapping[str, object] = MappingProxyType(
    {"random_points": 10, "number_of_ranges": 10, "delta": 5, **COMMON_OPTIONS}
)

#: The largest value a spec may give each whole-number option. Statement counts are per
#: transaction (sysbench's defaults are 1 to 10) and each placeholder list is built in memory
#: for every event; range sizes and deltas stay within the largest table.
OPTION_LIMITS: Mapping[str, int] = MappingProxyType(
    {
        **dict.fromkeys(("point_selects", "simple_ranges", "sum_ranges", "order_ranges", "distinct_ranges",
                         "index_updates", "non_index_updates", "delete_inserts"), 1_000),
        "random_points": 1_000,
        "number_of_ranges": 1_000,
        "range_size": 2_000_000_000,
        "delta": 2_000_000_000,
        # Uniform draws summed per key: each one costs the load loop a call.
        "rand_spec_iter": 1_000,
        "rand_spec_pct": 100,
        "rand_spec_res": 100,
    }
)
#: The smallest value of whole-number options below which sysbench divides by zero.
OPTION_MINIMUM: Mapping[str, int] = MappingProxyType({"rand_spec_iter": 1})
#: (low, high, whether each end is allowed) of the fractional options: pareto's h is a
#: probability strictly between 0 and 1 (log(h) / log(1 - h)); zipfian's exponent >= 0.
FLOAT_LIMITS: Mapping[str, tuple[float, float, bool, bool]] = MappingProxyType(
    {"rand_pareto_h": (0.0, 1.0, False, False), "rand_zipfian_exp": (0.0, 100.0, True, True)}
)


@dataclass(frozen=True)
class TableLayout:
    """What a workload's tables hold, so prepare builds them and marks their shape apart."""

    #: Appended to the shape marker of prepared tables ("" for sysbench 1.0's tables, which keep
    #: the markers they always had), so a run on another layout prepares again.
    marker: str
    #: Whose CREATE TABLE: "1.0" (oltp_common.lua: signed INTEGERs, index k_N) or "0.5" (the
    #: 2010 scripts: UNSIGNED id and k, MAX_ROWS, index k).
    schema: str
    #: How k is filled: "special" (sysbench 1.0's sb_rand(1, table_size)), "zero" (the 2010
    #: scripts' oltp tables), "id" (the 2010 select_random_* tables), or None: no rows at all.
    k: str | None
    #: Built again before every run: insert's empty table, which each run fills.
    fresh: bool = False


#: sysbench 1.0.20's oltp_common.lua prepare: random c and pad, k from the 'special' distribution.
SYSBENCH_10 = TableLayout("", "1.0", "special")
#: sysbench 0.5's 2010 oltp_simple/select/oltp_complex_*/update_*/delete prepare: k = 0, c = ' ',
#: pad a fixed string.
SYSBENCH_05 = TableLayout("sysbench05-k0", "0.5", "zero")
#: sysbench 0.5's 2010 select_random_points/ranges prepare: k = id, so a point is one row.
SYSBENCH_05_K_ID = TableLayout("sysbench05-kid", "0.5", "id")
#: sysbench 0.5's 2010 insert prepare: the table and its index, no rows.
SYSBENCH_05_EMPTY = TableLayout("sysbench05-empty", "0.5", None, fresh=True)


@dataclass(frozen=True)
class Workload:
    """One workload: what a spec may set, what one event runs, what a connection prepares."""

    name: str
    #: Options a spec may override, with sysbench's defaults.
    options: Mapping[str, object]
    #: (generator, thread id, threads) -> the function that draws one transaction.
    build: Builder
    #: Every statement a connection prepares up front (sysbench's thread_init).
    prepared: Callable[[Any], list[str]]
    #: The script the statements come from (repository, commit, path), and the catalogue
    #: (docs/workloads.md) that has the whole row.
    source: str
    #: How its statements count (COUNT_BY_ROWS or COUNT_BY_STATEMENT).
    counting: str = COUNT_BY_ROWS
    #: What its tables hold.
    tables: TableLayout = SYSBENCH_10
    #: The most tables it runs on (sysbench's script refuses more); None: any number.
    max_tables: int | None = None
    #: The sysbench 1.0.20 test the sysbench driver runs for it; None: sysbench 1.0.20 has no
    #: script that runs these statements (the 2010 oltp names), so that driver refuses it.
    sysbench_test: str | None = None
    #: (generator, thread id, threads) -> the workload's transaction as a program.Program, the
    #: form the native driver's compiled core runs.
    program: Builder | None = None

    @property
    def table_auto_inc(self) -> bool:
        """Whether the tables' shape follows the ``auto_inc`` option (oltp_common's tables)."""
        return "auto_inc" in self.options


#: Where every workload has its row: source script and commit, statements, data, counting.
CATALOGUE = "docs/workloads.md"

#: name -> Workload, filled by @register in the builder modules (imported by the package).
WORKLOADS: dict[str, Workload] = {}


def register(name: str, *, options: Mapping[str, object], prepared: Callable[[Any], list[str]],
             source: str, counting: str = COUNT_BY_ROWS, tables: TableLayout = SYSBENCH_10,
             max_tables: int | None = None, sysbench_test: str | None = None,
             program: Builder | None = None) -> Callable[[Builder], Builder]:
    """Register the builder it decorates as workload ``name``; ``source`` names its script and
    ``program`` compiles it for the load core (program.py)."""

    def add(build: Builder) -> Builder:
        if name in WORKLOADS:
            raise ValueError(f"workload {name} registered twice")
        WORKLOADS[name] = Workload(name, options, build, prepared, f"{source} ({CATALOGUE})", counting, tables,
                                   max_tables, sysbench_test, program)
        return build

    return add


def definition(name: str) -> Workload:
    """The workload a spec names; KeyError for an unknown name."""
    return WORKLOADS[name]
