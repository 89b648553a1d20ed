"""Which number of a run a table shows: q/s, tps, latency percentiles, server status deltas
per transaction, CPU per query.

Pure: a metric reads one run's result row or its whole ``RunResult`` and returns a number, or
None when the run did not record it (status deltas and CPU seconds come from managed targets only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from services.common.messages import RunResult
from services.common.results import ResultRow

#: Prefix of a metric naming a server status variable: ``status:Key_reads`` is Key_reads per transaction.
STATUS_PREFIX = "status:"


@dataclass(frozen=True)
class Metric:
    """A metric's key (as given to ``--metric``), its unit in table formulas, and its direction."""

    key: str
    unit: str
    higher_is_better: bool
    #: Read from the result columns (cheap) rather than the whole stored result.
    column: bool = False
    description: str = ""


BUILTIN: dict[str, Metric] = {
    m.key: m
    for m in (
        Metric("qps", "q/s", True, True, "queries per second"),
        Metric("tps", "tps", True, True, "transactions per second"),
        Metric("p50_ms", "p50 ms", False, False, "median transaction latency (ms)"),
        Metric("p95_ms", "p95 ms", False, True, "95th percentile transaction latency (ms)"),
        Metric("p99_ms", "p99 ms", False, True, "99th percentile transaction latency (ms)"),
        Metric("max_ms", "max ms", False, False, "slowest transaction (ms)"),
        Metric("cpu_us_per_query", "server CPU us/query", False, False, "server CPU microseconds per query"),
        Metric("client_cpu_us_per_query", "client CPU us/query", False, False, "client CPU microseconds per query"),
    )
}

def metric(key: str) -> Metric:
    """The metric for ``key``; ``status:NAME`` is any server status variable per transaction."""
    if key in BUILTIN:
        return BUILTIN[key]
    if key.startswith(STATUS_PREFIX) and len(key) > len(STATUS_PREFIX):
        name = key[len(STATUS_PREFIX):]
        # Fewer Key_reads or Innodb_buffer_pool_reads per transaction is better; for a status
        # counter we cannot know, "lower is better" is the usual reading (work per transaction).
        return Metric(key, f"{name}/trx", False, False, f"{name} per transaction (server status delta)")
    known = ", ".join(list(BUILTIN) + [STATUS_PREFIX + "NAME"])
    raise ValueError(f"unknown metric {key!r} (known: {known})")


def value(m: Metric, result: RunResult) -> float | None:
    """The metric's value for one whole stored result; None when the run failed or did not record it."""
    if result.status != "ok":
        return None
    measured, totals, server = result.measured_s, result.totals, result.server
    if m.key == "qps":
        return totals.queries / measured if measured > 0 else None
    if m.key == "tps":
        return totals.transactions / measured if measured > 0 else None
    if m.key.endswith("_ms") and m.key in BUILTIN:
        return float(getattr(result.latency, m.key))
    if m.key in ("cpu_us_per_query", "client_cpu_us_per_query"):
        # CPU seconds come from managed targets (server) and the load processes (client); a
        # result without them has the metric missing, not zero.
        cpu = server.server_cpu_s if m.key == "cpu_us_per_query" else server.client_cpu_s
        return 1e6 * cpu / totals.queries if cpu is not None and totals.queries else None
    if m.key.startswith(STATUS_PREFIX):
        delta = server.status_deltas.get(m.key[len(STATUS_PREFIX):])
        return delta / totals.transactions if delta is not None and totals.transactions else None
    return None


def row_value(m: Metric, row: ResultRow) -> float | None:
    """The metric's value for one result row: from its columns when the metric is one, else from
    its whole result (None when the row was read without it)."""
    if row.status != "ok":
        return None
    if m.column:
        return float(getattr(row, m.key))
    return value(m, row.result) if row.result is not None else None


def available_status(results: Iterable[RunResult]) -> list[str]:
    """Status variable names recorded by any of the results, sorted, for the report's metric list."""
    names: set[str] = set()
    for r in results:
        names.update(r.server.status_deltas)
    return sorted(names)
