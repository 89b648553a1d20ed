"""Which MySQL errors a run survives, once parsed: the policy's values and what both drivers ask
of them. Free of pydantic (ignore_errors.py parses the spec's forms), so a load process, which
imports this, stays small.
"""

from __future__ import annotations

from typing import Literal, Union

#: sysbench 1.0's default: deadlock (1213), record changed since last read (1020), lock wait
#: timeout (1205). Kept sorted, as every parsed list is, so equal lists compare equal.
DEFAULT: tuple[int, ...] = (1020, 1205, 1213)
ALL = "all"
#: Client errors after which sysbench reconnects when they are ignored: CR_SERVER_GONE_ERROR,
#: CR_TCP_CONNECTION, CR_SERVER_LOST, CR_SERVER_LOST_EXTENDED.
RECONNECT_ON = frozenset({2006, 2011, 2013, 2055})

#: A parsed policy: ``"all"`` or the sorted, distinct codes to ignore (empty: none).
Policy = Union[Literal["all"], tuple[int, ...]]


def ignores(policy: Policy, code: int) -> bool:
    """Whether a run with ``policy`` survives MySQL error ``code``."""
    return policy == ALL or code in policy


def sysbench_value(policy: Policy) -> str:
    """The value of sysbench's --mysql-ignore-errors for ``policy``. An empty list is "none",
    which sysbench reads as the code 0, one no statement ever fails with."""
    if policy == ALL:
        return ALL
    return ",".join(str(c) for c in policy) or "none"


def describe(policy: Policy) -> str:
    """``policy`` for an error message: "1020, 1205, 1213", "all" or "none"."""
    if policy == ALL:
        return ALL
    return ", ".join(str(c) for c in policy) or "none"
