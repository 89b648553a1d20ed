"""Which MySQL errors a run survives: sysbench 1.0's ``--mysql-ignore-errors``, as a spec field and
a run-message field, read the same way by both drivers.

sysbench (src/drivers/mysql/drv_mysql.c, check_error) ends the run on any error outside the list,
with a FATAL line naming the code. An error in the list restarts the event (the transaction, from
its first statement, with new random values) and counts as an ignored error; a lost connection in
the list reconnects first and counts as a reconnect instead. ``all`` ignores every code.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BeforeValidator, Field, WithJsonSchema

#: sysbench 1.0's default: deadlock (1213), record changed since last read (1020), lock wait
#: timeout (1205). Kept sorted, as every parsed list is, so equal lists compare equal.
DEFAULT: tuple[int, ...] = (1020, 1205, 1213)
ALL = "all"
#: Client errors after which sysbench reconnects when they are ignored: CR_SERVER_GONE_ERROR,
#: CR_TCP_CONNECTION, CR_SERVER_LOST, CR_SERVER_LOST_EXTENDED.
RECONNECT_ON = frozenset({2006, 2011, 2013, 2055})


def _parse(v: Any) -> Any:
    """``all``, a list of codes, one code, or sysbench's own comma-separated text ("1213,1062")."""
    if isinstance(v, str):
        text = v.strip().lower()
        if text == ALL:
            return ALL
        if text in ("", "none"):
            return ()
        parts = [p.strip() for p in text.split(",")]
        if not all(p.isdigit() for p in parts):
            raise ValueError(f"must be 'all' or MySQL error codes like 1213,1062 (got {v!r})")
        v = [int(p) for p in parts]
    if isinstance(v, bool):
        raise ValueError("must be 'all' or a list of MySQL error codes")
    if isinstance(v, int):
        v = [v]
    if isinstance(v, (list, tuple)):
        if any(isinstance(c, bool) or not isinstance(c, int) for c in v):
            raise ValueError("must be 'all' or a list of MySQL error codes (whole numbers)")
        return tuple(sorted(set(v)))
    return v


#: A parsed policy: ``"all"`` or the sorted, distinct codes to ignore (empty: none).
IgnoreErrors = Annotated[
    Union[Literal["all"], tuple[Annotated[int, Field(ge=1, le=65535)], ...]],
    BeforeValidator(_parse),
    # Every form _parse reads: all (any case), none, sysbench's "1213,1062", one code, a list.
    WithJsonSchema({"anyOf": [
        {"type": "string", "pattern": r"^ *(?:[aA][lL][lL]|[nN][oO][nN][eE]|[0-9]+(?: *, *[0-9]+)*)? *$"},
        {"type": "integer", "minimum": 1, "maximum": 65535},
        {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 65535}}]}),
]


def ignores(policy: IgnoreErrors, code: int) -> bool:
    """Whether a run with ``policy`` survives MySQL error ``code``."""
    return policy == ALL or code in policy


def sysbench_value(policy: IgnoreErrors) -> str:
    """The value of sysbench's --mysql-ignore-errors for ``policy``. An empty list is "none",
    which sysbench reads as the code 0, one no statement ever fails with."""
    if policy == ALL:
        return ALL
    return ",".join(str(c) for c in policy) or "none"


def describe(policy: IgnoreErrors) -> str:
    """``policy`` for an error message: "1020, 1205, 1213", "all" or "none"."""
    if policy == ALL:
        return ALL
    return ", ".join(str(c) for c in policy) or "none"
