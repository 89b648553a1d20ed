"""What the status monitor saw of the server's threads second by second (``server.pool`` of a
result): the thread pool's gauges, the commit rate, and the pool's information_schema figures.

History of ``PoolSeries.version``: 1 = first version. A figure the server did not report is None
(never 0): a server without the pool's information_schema tables has None in their fields.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from services.common.messages.base import Count, NonNegative, _Message

POOL_SERIES_VERSION = 1


class PoolSecond(_Message):
    """One second of a run as the monitor saw it through its own route (a thread pool's extra_port)."""

    #: Seconds from the measured window's start to this second's start (negative: the warm-up).
    second: int
    #: SHOW GLOBAL STATUS gauges at the second's last sample.
    threads: Count | None = None  # Threadpool_threads: workers plus listeners the pool holds
    idle_threads: Count | None = None  # Threadpool_idle_threads: waiting for work
    threads_running: Count | None = None
    threads_connected: Count | None = None
    #: Com_commit over this second (interpolated at its edges).
    commits_per_s: NonNegative | None = None
    #: information_schema.THREAD_POOL_GROUPS summed over groups: groups, groups marked stalled,
    #: threads executing a statement, and connections queued for a worker.
    groups: Count | None = None
    stalled_groups: Count | None = None
    active_threads: Count | None = None
    queue_length: Count | None = None
    #: THREAD_POOL_QUEUES: queued connections by priority (high: inside a transaction) and the
    #: longest any of them had waited, in milliseconds.
    queued_high: Count | None = None
    queued_low: Count | None = None
    oldest_queued_ms: NonNegative | None = None
    #: THREAD_POOL_STATS counters summed over groups, per second since the previous sample.
    stalls_per_s: NonNegative | None = None
    stall_thread_creations_per_s: NonNegative | None = None
    throttles_per_s: NonNegative | None = None


class PoolSeries(_Message):
    """The per-second monitor of one run, warm-up included; ``tables_reason`` says why the
    information_schema figures are None (no such tables, no thread pool), else None."""

    version: Literal[1] = POOL_SERIES_VERSION
    seconds: list[PoolSecond] = Field(default_factory=list)
    tables_reason: str | None = None

    def window(self) -> list[PoolSecond]:
        """The seconds of the measured window (from its start on)."""
        return [s for s in self.seconds if s.second >= 0]
