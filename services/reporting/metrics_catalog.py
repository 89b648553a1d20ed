"""Which number of a run a table shows: q/s, tps, latency percentiles, server status deltas
per transaction, and what the server did per query (CPU, context switches, disk KB per
transaction, hit ratios).

Pure: a metric reads one run's result row or its whole ``RunResult`` and returns a number, or
None when the run did not record it (server CPU, context switches and disk bytes come from
managed targets only; hit ratios need status deltas with requests in them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from services.common.messages.results import RunResult
from services.common.results.rows import ResultRow

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
        Metric("ctxt_switches_per_query", "server cs/query", False, False,
               "server context switches per query"),
        Metric("client_ctxt_switches_per_query", "client cs/query", False, False,
               "client context switches per query"),
        Metric("disk_read_kb_per_transaction", "read KB/trx", False, False,
               "server disk KB read per transaction"),
        Metric("disk_write_kb_per_transaction", "write KB/trx", False, False,
               "server disk KB written per transaction"),
        Metric("key_cache_hit_ratio", "key cache hit ratio", True, False,
               "key cache hit ratio (1 - Key_reads / Key_read_requests)"),
        Metric("buffer_pool_hit_ratio", "buffer pool hit ratio", True, False,
               "InnoDB buffer pool hit ratio (1 - Innodb_buffer_pool_reads / _read_requests)"),
    )
}

#: Metric key -> the ServerWork field it reads (services/common/messages/server_work.py defines them once).
#: The latency metrics: a successful run without one completed nothing, or read sysbench's output
#: where it printed no such figure.
LATENCY_KEYS = frozenset({"p50_ms", "p95_ms", "p99_ms", "max_ms"})

WORK_FIELDS = {
    "cpu_us_per_query": "server_cpu_us_per_query",
    "client_cpu_us_per_query": "client_cpu_us_per_query",
    "ctxt_switches_per_query": "server_ctxt_switches_per_query",
    "client_ctxt_switches_per_query": "client_ctxt_switches_per_query",
    "disk_read_kb_per_transaction": "disk_read_kb_per_transaction",
    "disk_write_kb_per_transaction": "disk_write_kb_per_transaction",
    "key_cache_hit_ratio": "key_cache_hit_ratio",
    "buffer_pool_hit_ratio": "buffer_pool_hit_ratio",
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
        v = getattr(result.latency, m.key)  # None: no transaction completed
        return None if v is None else float(v)
    if m.key in WORK_FIELDS:
        # Server figures come from managed targets, client ones from the load processes; a
        # result without them has the metric missing, not zero.
        return getattr(result.work, WORK_FIELDS[m.key])
    if m.key.startswith(STATUS_PREFIX):
        delta = server.status_deltas.get(m.key[len(STATUS_PREFIX):])
        return delta / totals.transactions if delta is not None and totals.transactions else None
    return None


def row_value(m: Metric, row: ResultRow) -> float | None:
    """The metric's value for one result row: from its columns when the metric is one, else from
    its figures (read from the figure columns or the whole result; None when read without them)."""
    if row.status != "ok":
        return None
    if m.column:
        # q/s and tps over no measured second, or latency of no completed transaction: missing.
        v = getattr(row, m.key)
        return None if v is None or (m.key in ("qps", "tps") and row.measured_s <= 0) else float(v)
    f = row.figures
    if f is None:
        return value(m, row.result) if row.result is not None else None
    # As ``value`` reads a whole result, from the few figures a row keeps of it.
    if m.key == "p50_ms":
        return f.p50_ms
    if m.key == "max_ms":
        return None if row.max_ms is None else float(row.max_ms)
    if m.key in WORK_FIELDS:
        return getattr(f.work, WORK_FIELDS[m.key])
    if m.key.startswith(STATUS_PREFIX):
        delta = f.status_deltas.get(m.key[len(STATUS_PREFIX):])
        return delta / f.transactions if delta is not None and f.transactions else None
    return None


def available_status(rows: Iterable[ResultRow]) -> list[str]:
    """Status variable names recorded by any of the rows' results, sorted, for the report's metric list."""
    names: set[str] = set()
    for r in rows:
        if r.figures is not None:
            names.update(r.figures.status_deltas)
    return sorted(names)
