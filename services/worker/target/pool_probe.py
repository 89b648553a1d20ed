"""Reads the thread pool's information_schema tables (MariaDB 10.5+) about once a second on the
status monitor's connection, which reaches a managed pool through the worker's extra_port and so
does not queue behind the load it watches. The figures are summed in pool_figures.py."""

from __future__ import annotations

from typing import Any

from services.worker.target.pool_figures import GroupRow, QueueRow, StatsRow, TablesSample, tables_sample

#: Seconds between two reads: the series is per second, and at 4096 connections each read costs
#: the server a walk over its groups' queues.
INTERVAL_S = 1.0

_GROUPS = ("SELECT GROUP_ID, CONNECTIONS, THREADS, ACTIVE_THREADS, STANDBY_THREADS, QUEUE_LENGTH, HAS_LISTENER, "
           "IS_STALLED FROM information_schema.THREAD_POOL_GROUPS")
# Grouped on the server: at 4096 clients the queue can hold thousands of rows a second, and the
# series needs only their count and the longest wait per priority.
_QUEUES = ("SELECT PRIORITY, COUNT(*), COALESCE(MAX(QUEUEING_TIME_MICROSECONDS), 0) "
           "FROM information_schema.THREAD_POOL_QUEUES GROUP BY PRIORITY")
_STATS = ("SELECT GROUP_ID, THREAD_CREATIONS_DUE_TO_STALL, THROTTLES, STALLS "
          "FROM information_schema.THREAD_POOL_STATS")


class PoolProbe:
    """A status sampler's probe (info.Probe) of the pool's tables; ``reason`` says why it read
    none (no such tables, or no thread pool behind them), and then it stops trying."""

    def __init__(self, *, interval: float = INTERVAL_S):
        self.interval = interval
        self.samples: list[TablesSample] = []
        self.reason: str | None = None
        #: (wall time, SELECTs sent): each adds one to the server's Com_select, which counts the
        #: load's transactions for autocommit workloads, so the sampler takes them out of it.
        self.selects: list[tuple[float, int]] = []
        self._due = 0.0

    def sample(self, cursor: Any, now: float) -> None:
        if self.reason is not None or now < self._due:
            return
        self._due = now + self.interval
        sent = 0
        try:
            sent += 1
            cursor.execute(_GROUPS)
            groups = [GroupRow(*(int(v) for v in row[:6]), bool(row[6]), bool(row[7])) for row in cursor.fetchall()]
            sent += 1
            cursor.execute(_QUEUES)
            queues = [QueueRow(int(p), int(n), int(oldest)) for p, n, oldest in cursor.fetchall()]
            sent += 1
            cursor.execute(_STATS)
            stats = [StatsRow(*(int(v) for v in row)) for row in cursor.fetchall()]
        except Exception as e:  # extra information: a server without these tables still runs the load
            self.reason = f"no thread pool tables in information_schema ({type(e).__name__}: {e})"
            return
        finally:
            self.selects.append((now, sent))
        if not groups:
            # One thread per connection: the tables exist (10.5+) but hold no group.
            self.reason = "THREAD_POOL_GROUPS is empty: the server runs no thread pool"
            return
        self.samples.append(tables_sample(now, groups, queues, stats))
