"""The workload registry: every workload a spec may name, each defined once with the options it
accepts (sysbench's defaults), the transaction it runs, the statements each connection prepares
and what its tables need. A new workload is one ``@register``-ed builder in one module.

Pure: no database or service import, so the spec (services/common) validates names and options
against it and the drivers run from it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Callable, Mapping, Optional

if TYPE_CHECKING:
    from services.workload.statements import Generator

READ = "read"
WRITE = "write"
OTHER = "other"

#: One statement of a transaction: (kind, sql, params); ``params is None`` marks a statement sent
#: as plain text (oltp_insert's), every other one is a server-side prepared statement.
Op = tuple[str, str, Optional[tuple]]
Transaction = list[Op]
Event = Callable[[random.Random], Transaction]
Builder = Callable[["Generator", int, int], Event]

RAND_TYPES = ("uniform", "gaussian", "special", "pareto", "zipfian")

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
        "rand_type": "special",
    }
)

#: Extra options of the select_random_* tests (select_random_points.lua, select_random_ranges.lua).
RANDOM_OPTIONS: Mapping[str, object] = MappingProxyType(
    {"random_points": 10, "number_of_ranges": 10, "delta": 5, "rand_type": "special"}
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
    }
)


@dataclass(frozen=True)
class Workload:
    """One workload: what a spec may set, what one event runs, what a connection prepares."""

    name: str
    #: Options a spec may override, with sysbench's defaults.
    options: Mapping[str, object]
    #: (generator, thread id, threads) -> the function that draws one transaction.
    build: Builder
    #: Every statement a connection prepares up front (sysbench's thread_init).
    prepared: Callable[["Generator"], list[str]]
    #: Where the statements come from (the sysbench script), for docs/workloads.md.
    source: str
    #: How its statements count (COUNT_BY_ROWS or COUNT_BY_STATEMENT).
    counting: str = COUNT_BY_ROWS

    @property
    def table_auto_inc(self) -> bool:
        """Whether the tables' shape follows the ``auto_inc`` option (oltp_common's tables)."""
        return "auto_inc" in self.options


#: name -> Workload, filled by @register in the builder modules (imported by the package).
WORKLOADS: dict[str, Workload] = {}


def register(name: str, *, options: Mapping[str, object], prepared: Callable[["Generator"], list[str]],
             source: str) -> Callable[[Builder], Builder]:
    """Register the builder it decorates as workload ``name``."""

    def add(build: Builder) -> Builder:
        if name in WORKLOADS:
            raise ValueError(f"workload {name} registered twice")
        WORKLOADS[name] = Workload(name, options, build, prepared, source)
        return build

    return add


#: The names the 2010 result pages use, mapped onto the sysbench 1.0 tests that run the same
#: statements (see docs/workloads.md for the differences sysbench 0.5 had).
ALIASES_2010: Mapping[str, str] = MappingProxyType(
    {
        "oltp_simple": "oltp_point_select",
        "oltp_complex_ro": "oltp_read_only",
        "oltp_complex_rw": "oltp_read_write",
        "select": "oltp_point_select",
        "insert": "oltp_insert",
        "delete": "oltp_delete",
        "update_index": "oltp_update_index",
        "update_non_index": "oltp_update_non_index",
    }
)



def canonical_name(name: str) -> str:
    """Map a 2010 name onto its sysbench 1.0 test; return other names unchanged."""
    return ALIASES_2010.get(name, name)


def definition(name: str) -> Workload:
    """The workload a spec's name (or 2010 alias) runs; KeyError for an unknown name."""
    return WORKLOADS[canonical_name(name)]
