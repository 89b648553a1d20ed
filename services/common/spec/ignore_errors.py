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

# The policy's values and functions live beside it, free of pydantic, and are read from here too.
from services.common.spec.ignore_policy import (
    ALL,
    DEFAULT,
    RECONNECT_ON,
    describe,
    ignores,
    sysbench_value,
)

__all__ = ["ALL", "DEFAULT", "RECONNECT_ON", "IgnoreErrors", "describe", "ignores", "sysbench_value"]


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
