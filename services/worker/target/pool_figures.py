"""The per-second thread-pool series of a run, from the status monitor's samples: pure, tested on
literal rows (the monitor's reads are in pool_probe.py).

Which figures, and why they explain a pool that does not hold (MariaDB's thread pool: a group
per CPU, one listener and a few workers each, more workers only when a group stalls):
- ``queue_length`` and the queued connections by priority: requests waiting for a worker. A pool
  that holds drains its queue every second or so; a queue that stays near the client count means
  the workers cannot keep up, and the high-priority queue (statements inside an open transaction)
  filling means transactions holding locks wait behind new ones.
- ``oldest_queued_ms``: how long the longest waiter has waited, to set beside the latency.
- ``stalled_groups`` and ``stalls_per_s``: a group whose worker runs past thread_pool_stall_limit
  (a long statement, a lock wait) is stalled and the pool wakes or creates another worker;
  groups stalled second after second mean the pool degenerates into thread-per-connection.
- ``throttles_per_s``: creations the pool refused to do at once (it limits thread creation when
  it already has many): the queue then grows while the pool waits.
- ``threads``, ``idle_threads``, ``active_threads``: whether the pool had capacity it did not use
  (idle workers beside a long queue: the listener, not the workers, is the bottleneck) or ran
  out of it (threads at thread_pool_max_threads).
- ``threads_running``, ``threads_connected`` and ``commits_per_s``: the server's side of the
  throughput the client measured, second by second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from services.common.messages.pool import PoolSecond, PoolSeries


@dataclass(frozen=True)
class GroupRow:
    """One row of information_schema.THREAD_POOL_GROUPS."""

    group_id: int
    connections: int
    threads: int
    active_threads: int
    standby_threads: int
    queue_length: int
    has_listener: bool
    is_stalled: bool


@dataclass(frozen=True)
class QueueRow:
    """THREAD_POOL_QUEUES grouped by PRIORITY (0: high, 1: low): how many entries, and the
    longest QUEUEING_TIME_MICROSECONDS among them."""

    priority: int
    queued: int
    oldest_us: int


@dataclass(frozen=True)
class StatsRow:
    """The cumulative counters of one row of THREAD_POOL_STATS the series uses."""

    group_id: int
    thread_creations_due_to_stall: int
    throttles: int
    stalls: int


@dataclass(frozen=True)
class TablesSample:
    """The pool's information_schema figures at wall time ``t``, summed over its groups."""

    t: float
    groups: int
    stalled_groups: int
    active_threads: int
    queue_length: int
    queued_high: int
    queued_low: int
    oldest_queued_ms: float
    #: Cumulative over the server's life: per-second rates come from two samples.
    stalls: int
    stall_thread_creations: int
    throttles: int


#: THREAD_POOL_QUEUES.PRIORITY of the high-priority queue (MariaDB's TP_PRIORITY_HIGH).
HIGH_PRIORITY = 0


def tables_sample(t: float, groups: Sequence[GroupRow], queues: Sequence[QueueRow],
                  stats: Sequence[StatsRow]) -> TablesSample:
    """The figures of one read of the three tables at wall time ``t``."""
    # An empty queue was read: nobody waited (0), which is not a figure the server withheld.
    oldest = max((q.oldest_us for q in queues if q.queued > 0), default=0)
    return TablesSample(
        t=t, groups=len(groups), stalled_groups=sum(1 for g in groups if g.is_stalled),
        active_threads=sum(g.active_threads for g in groups), queue_length=sum(g.queue_length for g in groups),
        queued_high=sum(q.queued for q in queues if q.priority == HIGH_PRIORITY),
        queued_low=sum(q.queued for q in queues if q.priority != HIGH_PRIORITY),
        oldest_queued_ms=oldest / 1000.0,
        stalls=sum(s.stalls for s in stats), stall_thread_creations=sum(s.thread_creations_due_to_stall for s in stats),
        throttles=sum(s.throttles for s in stats))


#: (wall time, SHOW GLOBAL STATUS) as the status sampler keeps them.
StatusPoint = tuple[float, dict[str, float]]

_GAUGES = {"threads": "Threadpool_threads", "idle_threads": "Threadpool_idle_threads",
           "threads_running": "Threads_running", "threads_connected": "Threads_connected"}


def _counter_at(points: Sequence[tuple[float, float]], t: float) -> float | None:
    """Linear interpolation of a counter at ``t``; None outside the sampled span (never extrapolated)."""
    if not points or t < points[0][0] or t > points[-1][0]:
        return None
    for (t0, v0), (t1, v1) in zip(points, points[1:]):
        if t0 <= t <= t1:
            return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)
    return points[-1][1]


def _rate(prev: TablesSample | None, cur: TablesSample, name: str) -> float | None:
    if prev is None or cur.t <= prev.t:
        return None
    # A counter that went down belongs to a restarted server: no rate rather than a negative one.
    d = getattr(cur, name) - getattr(prev, name)
    return round(d / (cur.t - prev.t), 3) if d >= 0 else None


def pool_series(status: Sequence[StatusPoint], tables: Sequence[TablesSample], *, started_at: float,
                window_start: float, ended_at: float, tables_reason: str | None) -> PoolSeries:
    """One PoolSecond per whole second from ``started_at`` (the warm-up's start) to ``ended_at``,
    numbered from ``window_start``: gauges from the second's last status sample, Com_commit
    interpolated at its edges, the tables' figures from its last read (None where a second holds
    no sample: the monitor fell behind, or the server has no such tables)."""
    status = sorted(status, key=lambda p: p[0])
    tables = sorted(tables, key=lambda s: s.t)
    commits = [(t, s["Com_commit"]) for t, s in status if "Com_commit" in s]
    first = -math.ceil(round(window_start - started_at, 6))
    last = math.ceil(round(ended_at - window_start, 6))
    out: list[PoolSecond] = []
    for k in range(first, last):
        a, b = window_start + k, window_start + k + 1
        fields: dict[str, object] = {"second": k}
        inside = [s for t, s in status if a <= t < b]
        if inside:
            for field, name in _GAUGES.items():
                values = [s[name] for s in inside if name in s]
                fields[field] = int(values[-1]) if values else None
        c0, c1 = _counter_at(commits, a), _counter_at(commits, b)
        if c0 is not None and c1 is not None and c1 >= c0:
            fields["commits_per_s"] = round(c1 - c0, 3)
        reads = [i for i, s in enumerate(tables) if a <= s.t < b]
        if reads:
            i = reads[-1]
            cur, prev = tables[i], tables[i - 1] if i > 0 else None
            fields.update(groups=cur.groups, stalled_groups=cur.stalled_groups, active_threads=cur.active_threads,
                          queue_length=cur.queue_length, queued_high=cur.queued_high, queued_low=cur.queued_low,
                          oldest_queued_ms=cur.oldest_queued_ms, stalls_per_s=_rate(prev, cur, "stalls"),
                          stall_thread_creations_per_s=_rate(prev, cur, "stall_thread_creations"),
                          throttles_per_s=_rate(prev, cur, "throttles"))
        out.append(PoolSecond.model_validate(fields))
    return PoolSeries(seconds=out, tables_reason=tables_reason)
