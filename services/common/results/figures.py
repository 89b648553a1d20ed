"""The few figures of a whole result that a full report reads of every run (median latency, the
server's raw counts, status deltas, how many seconds its series holds), kept as columns of the
results table (schema 16) so a 10,000-run report need not decode 10,000 whole results.

Pure: built from a ``RunResult`` when it is stored, or from those columns when it is read; both
give equal figures, so a report reads the same numbers either way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from services.common.messages.results import RunResult
from services.common.messages.server_work import ServerWork, server_work

#: The results table's columns the figures are read from, in the order ``columns``/``from_columns``
#: use: the first three were result columns before; schema 16 added the others.
FIGURE_COLUMNS: tuple[str, ...] = (
    "queries", "transactions", "p50_ms", "server_kind", "server_cpu_s", "client_cpu_s",
    "server_ctxt_switches", "client_ctxt_switches", "disk_read_bytes", "disk_write_bytes",
    "status_deltas_json", "series_seconds",
)


@dataclass(frozen=True)
class RunFigures:
    """One run's figures beyond the row's columns; ``work`` is derived from the raw counts."""

    #: None where no transaction completed.
    p50_ms: float | None
    transactions: int
    #: "managed", "dsn", or None when the run did not say.
    kind: str | None
    #: SHOW GLOBAL STATUS counter deltas over the measured interval (not to be changed).
    status_deltas: Mapping[str, int]
    work: ServerWork
    #: Seconds in the per-second q/s series (0: none recorded), to pick the runs a plot draws.
    series_seconds: int = 0

    @classmethod
    def of(cls, result: RunResult) -> "RunFigures":
        """The figures of a whole result."""
        return cls(p50_ms=result.latency.p50_ms, transactions=result.totals.transactions, kind=result.server.kind,
                   status_deltas=result.server.status_deltas, work=result.work,
                   series_seconds=len(result.series.queries))

    @staticmethod
    def columns(result: RunResult) -> tuple[Any, ...]:
        """The figure columns the store writes for ``result``, in ``FIGURE_COLUMNS`` order."""
        s = result.server
        return (result.totals.queries, result.totals.transactions, result.latency.p50_ms, s.kind, s.server_cpu_s,
                s.client_cpu_s, s.server_ctxt_switches, s.client_ctxt_switches, s.disk_read_bytes,
                s.disk_write_bytes, json.dumps(s.status_deltas, separators=(",", ":")), len(result.series.queries))

    @classmethod
    def from_columns(cls, values: Sequence[Any]) -> "RunFigures | None":
        """The figures from database values in ``FIGURE_COLUMNS`` order; None for a row stored
        before schema 16 and not backfilled (series_seconds NULL): read its whole result."""
        (queries, transactions, p50, kind, server_cpu, client_cpu, server_cs, client_cs, disk_read, disk_write,
         deltas_json, seconds) = values
        if seconds is None or deltas_json is None:
            return None
        deltas = json.loads(deltas_json)
        work = server_work(queries=int(queries), transactions=int(transactions), status_deltas=deltas,
                           server_cpu_s=_float(server_cpu), client_cpu_s=_float(client_cpu),
                           server_ctxt_switches=_int(server_cs), client_ctxt_switches=_int(client_cs),
                           disk_read_bytes=_int(disk_read), disk_write_bytes=_int(disk_write))
        return cls(p50_ms=_float(p50), transactions=int(transactions), kind=kind, status_deltas=deltas, work=work, series_seconds=int(seconds))


def _float(v: Any) -> float | None:
    return None if v is None else float(v)


def _int(v: Any) -> int | None:
    return None if v is None else int(v)
