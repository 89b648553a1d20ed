"""The workload catalogue: sysbench 1.0 test names, their options with sysbench's defaults,
and the 2010 (sysbench 0.4/0.5) names used in the seed studies."""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

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

#: Every workload name a spec may use, with the options it accepts.
WORKLOADS: Mapping[str, Mapping[str, object]] = MappingProxyType(
    {
        "oltp_point_select": OLTP_OPTIONS,
        "oltp_read_only": OLTP_OPTIONS,
        "oltp_read_write": OLTP_OPTIONS,
        "oltp_write_only": OLTP_OPTIONS,
        "oltp_update_index": OLTP_OPTIONS,
        "oltp_update_non_index": OLTP_OPTIONS,
        "oltp_insert": OLTP_OPTIONS,
        "oltp_delete": OLTP_OPTIONS,
        "select_random_points": RANDOM_OPTIONS,
        "select_random_ranges": RANDOM_OPTIONS,
    }
)

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

#: Workloads the native driver can run in this version; the rest are refused at validation.
NATIVE_IMPLEMENTED: frozenset[str] = frozenset(WORKLOADS)

RAND_TYPES = ("uniform", "gaussian", "special", "pareto", "zipfian")


def canonical_name(name: str) -> str:
    """Map a 2010 name onto its sysbench 1.0 test; return other names unchanged."""
    return ALIASES_2010.get(name, name)
