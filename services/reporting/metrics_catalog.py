"""Which number of a run a table shows: q/s, tps, latency percentiles, server status deltas
per transaction, CPU per query.

Pure: a metric reads one run's stored result (plain dicts) and returns a number, or None when
the run did not record it (status deltas and CPU seconds come from managed targets only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

#: Prefix of a metric naming a server status variable: ``status:Key_reads`` is Key_reads per transaction.
STATUS_PREFIX = "status:"


@dataclass(frozen=True)
class Metric:
    """A metric's key (as given to ``--metric``), its unit in table formulas, and its direction."""

    key: str
    unit: str
    higher_is_better: bool
    #: Read from the result columns (cheap) rather than the stored result JSON.
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

# Where a result may carry CPU seconds: the managed-target work records them in ``server``;
# older or DSN-target results have none, and the metric is then missing, not zero.
_SERVER_CPU_KEYS = ("server_cpu_s", "cpu_s")
_CLIENT_CPU_KEYS = ("client_cpu_s",)


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


def _queries(doc: Mapping[str, Any]) -> int:
    t = doc.get("totals") or {}
    return int(t.get("reads", 0)) + int(t.get("writes", 0)) + int(t.get("other", 0))


def _first(d: Mapping[str, Any], keys: tuple[str, ...]) -> float | None:
    for k in keys:
        v = d.get(k)
        if isinstance(v, (int, float)):
            return float(v)
    return None


def status_deltas(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """The server status deltas of a result, or an empty mapping when it has none."""
    server = doc.get("server") or {}
    deltas = server.get("status_deltas") if isinstance(server, Mapping) else None
    return deltas if isinstance(deltas, Mapping) else {}


def value(m: Metric, doc: Mapping[str, Any]) -> float | None:
    """The metric's value for one stored result (``RunResult`` as JSON); None when not recorded."""
    if doc.get("status") != "ok":
        return None
    measured = float(doc.get("measured_s") or 0.0)
    totals = doc.get("totals") or {}
    if m.key == "qps":
        return _queries(doc) / measured if measured > 0 else None
    if m.key == "tps":
        return int(totals.get("transactions", 0)) / measured if measured > 0 else None
    if m.key.endswith("_ms") and m.key in BUILTIN:
        v = (doc.get("latency") or {}).get(m.key)
        return float(v) if isinstance(v, (int, float)) else None
    server = doc.get("server") or {}
    if m.key in ("cpu_us_per_query", "client_cpu_us_per_query"):
        keys = _SERVER_CPU_KEYS if m.key == "cpu_us_per_query" else _CLIENT_CPU_KEYS
        cpu = _first(server, keys) if isinstance(server, Mapping) else None
        if cpu is None and m.key == "client_cpu_us_per_query":
            cpu = _first(doc, keys)
        q = _queries(doc)
        return 1e6 * cpu / q if cpu is not None and q else None
    if m.key.startswith(STATUS_PREFIX):
        delta = status_deltas(doc).get(m.key[len(STATUS_PREFIX):])
        trx = int(totals.get("transactions", 0))
        return float(delta) / trx if isinstance(delta, (int, float)) and trx else None
    return None


def available_status(docs: list[Mapping[str, Any]]) -> list[str]:
    """Status variable names recorded by any of the results, sorted, for the report's metric list."""
    names: set[str] = set()
    for d in docs:
        names.update(k for k, v in status_deltas(d).items() if isinstance(v, (int, float)))
    return sorted(names)
