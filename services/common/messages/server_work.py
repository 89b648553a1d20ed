"""What the server did per query and per transaction, as database engineers' benchmark reports
show it: CPU and context switches per query, disk KB per transaction, cache hit ratios.

Pure and defined once: the worker stores these figures in a result's ``server`` field, and the
reports derive them again from the raw counts the result carries (so results stored before a
figure was recorded still get what their counts allow, such as hit ratios from status deltas).
A figure whose inputs were not recorded is None, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

#: (misses, requests) status counters of each hit ratio.
KEY_CACHE = ("Key_reads", "Key_read_requests")
BUFFER_POOL = ("Innodb_buffer_pool_reads", "Innodb_buffer_pool_read_requests")


def per(count: float | None, n: int, scale: float = 1.0) -> float | None:
    """``count * scale / n``; None when the count was not recorded or nothing was counted."""
    if count is None or n <= 0:
        return None
    return count * scale / n


def hit_ratio(deltas: Mapping[str, int], counters: tuple[str, str]) -> float | None:
    """1 - misses/requests over the measured interval; None without requests or without the counters."""
    misses, requests = deltas.get(counters[0]), deltas.get(counters[1])
    if misses is None or requests is None or requests <= 0:
        return None
    # Interpolated deltas can put a few more misses than requests at a tiny interval: clamp.
    return min(1.0, max(0.0, 1.0 - misses / requests))


@dataclass(frozen=True)
class ServerWork:
    """One run's per-query and per-transaction figures; None where the run did not record the inputs."""

    server_cpu_us_per_query: float | None
    client_cpu_us_per_query: float | None
    server_ctxt_switches_per_query: float | None
    client_ctxt_switches_per_query: float | None
    disk_read_kb_per_transaction: float | None
    disk_write_kb_per_transaction: float | None
    key_cache_hit_ratio: float | None
    buffer_pool_hit_ratio: float | None


def server_work(*, queries: int, transactions: int, status_deltas: Mapping[str, int],
                server_cpu_s: float | None = None, client_cpu_s: float | None = None,
                server_ctxt_switches: int | None = None, client_ctxt_switches: int | None = None,
                disk_read_bytes: int | None = None, disk_write_bytes: int | None = None) -> ServerWork:
    """The figures of one run from its raw counts over the measured interval."""
    # A client CPU of exactly 0 means the driver did not measure it (results before it did).
    client_cpu = client_cpu_s if client_cpu_s else None
    return ServerWork(
        server_cpu_us_per_query=per(server_cpu_s, queries, 1e6),
        client_cpu_us_per_query=per(client_cpu, queries, 1e6),
        server_ctxt_switches_per_query=per(server_ctxt_switches, queries),
        client_ctxt_switches_per_query=per(client_ctxt_switches, queries),
        disk_read_kb_per_transaction=per(disk_read_bytes, transactions, 1 / 1024),
        disk_write_kb_per_transaction=per(disk_write_bytes, transactions, 1 / 1024),
        key_cache_hit_ratio=hit_ratio(status_deltas, KEY_CACHE),
        buffer_pool_hit_ratio=hit_ratio(status_deltas, BUFFER_POOL),
    )
