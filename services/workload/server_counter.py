"""Which of the server's own counters count a workload's transactions, derived from the
statements its registry entry draws, so a run can set the server's count beside the client's.

MariaDB 10.11 counts what the load sends in SHOW GLOBAL STATUS (checked on the server): a
COMMIT, text or server-side prepared, adds one to Com_commit; a SELECT, text or prepared, adds
one to Com_select (a prepared one adds one to Com_stmt_execute too, as BEGIN and COMMIT do, so
Com_stmt_execute cannot tell a transaction from its statements); SHOW GLOBAL STATUS, which the
monitor runs, adds to Com_show_status only. So an explicit transaction (BEGIN ... COMMIT) is one
Com_commit (or Com_rollback when it is given up), and a transaction without one is its data
statements, counted by verb. Pure: no database import.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from services.workload.statements import Generator, TableShape, WorkloadOptions

#: Counters of an explicit transaction's end: committed, or rolled back after an error.
TRANSACTION_END = ("Com_commit", "Com_rollback")
#: Statement verbs whose counter Com_<verb> counts them, text or prepared.
_VERBS = ("select", "insert", "update", "delete", "replace")
#: Transactions drawn to learn the statements per transaction (all must agree).
_DRAWS = 50


@dataclass(frozen=True)
class ServerCounter:
    """The counters whose sum over the measured window, divided by ``per_transaction``, is the
    server's count of the run's transactions; ``counters`` empty and ``reason`` set when none is."""

    counters: tuple[str, ...]
    per_transaction: int = 1
    reason: str | None = None

    def transactions(self, deltas: dict[str, int]) -> int | None:
        """The server's transactions from SHOW GLOBAL STATUS ``deltas``; None when a counter is missing."""
        if not self.counters or any(c not in deltas for c in self.counters):
            return None
        return sum(deltas[c] for c in self.counters) // self.per_transaction


def _verb(sql: str) -> str:
    return sql.lstrip().split(None, 1)[0].lower() if sql.strip() else ""


def counter_for(workload: WorkloadOptions, data: TableShape) -> ServerCounter:
    """The server counter of ``workload``'s transactions on tables ``data``, from drawn transactions."""
    if getattr(workload, "script", None) is not None:
        return ServerCounter((), reason="a custom Lua script: which statements make its transaction is its own")
    try:
        gen = Generator(workload, data)
    except ValueError as e:
        return ServerCounter((), reason=str(e))
    rng = random.Random(0)
    trxs = [gen(rng) for _ in range(_DRAWS)]
    if all(t and _verb(t[0][1]) == "begin" and _verb(t[-1][1]) == "commit" for t in trxs):
        return ServerCounter(TRANSACTION_END)
    if any(_verb(op[1]) in ("begin", "commit") for t in trxs for op in t):
        return ServerCounter((), reason="some transactions are explicit (BEGIN/COMMIT) and some are not")
    verbs = sorted({_verb(op[1]) for t in trxs for op in t if _verb(op[1]) in _VERBS})
    sizes = {sum(1 for op in t if _verb(op[1]) in _VERBS) for t in trxs}
    if not verbs or len(sizes) != 1 or 0 in sizes:
        return ServerCounter((), reason="its transactions run a varying number of counted statements")
    return ServerCounter(tuple(f"Com_{v}" for v in verbs), per_transaction=sizes.pop())
