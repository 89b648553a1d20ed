"""Open-loop arrivals: the intended start times a load process's connections share."""

from __future__ import annotations

import bisect
import collections
import random
import threading


#: Arrivals one run may hold due and not started: the open-loop backlog, shared by its load processes
#: (backlog_share). A server that falls further behind the rate ends the run (child.py) instead of
#: growing the queue without end, at 1,000,000/s by tens of MB a second.
MAX_BACKLOG = 1_000_000


def backlog_share(connections: int, run_connections: int, bound: int = MAX_BACKLOG) -> int:
    """A load process's part of the run's backlog bound, in proportion to its connections (as its
    part of the rate is); at least 1, and the parts of a run add up to at most the bound plus one
    per process (rounding up)."""
    if not 0 < connections <= run_connections:
        raise ValueError(f"connections must be 1..{run_connections}, got {connections}")
    return max(1, -(-bound * connections // run_connections))


class Schedule:
    """Poisson arrivals shared by the connections of one load process.

    A connection takes the next intended start time, waits until it (if it is in the future)
    and measures latency from it, so a server that stalls is charged for the transactions that
    queued meanwhile (coordinated omission corrected). The run's rate is split over the load
    processes in proportion to their connections; independent Poisson streams add up to one
    Poisson stream of the whole rate, so this is the same as one schedule for the whole run.
    """

    def __init__(self, rate: float, start: float, rng: random.Random, limit: int = MAX_BACKLOG):
        self._lock = threading.Lock()
        self._rate, self._rng, self._limit = rate, rng, limit
        #: Intended start times drawn and not yet taken, oldest first.
        self._pending: collections.deque[float] = collections.deque()
        self._last = start
        #: The backlog that went past ``limit`` (nothing more is drawn after it), or None.
        self.exceeded: int | None = None

    def _draw_until(self, t: float) -> None:
        pending = self._pending
        while not pending or pending[-1] <= t:
            if len(pending) > self._limit:
                self.exceeded = len(pending)
                return
            self._last += self._rng.expovariate(self._rate)
            pending.append(self._last)

    def take(self, before: float) -> float | None:
        """The next intended start time, or None (and nothing taken) if it is at or after ``before``."""
        with self._lock:
            if not self._pending:
                self._draw_until(self._last)
            t = self._pending[0]
            if t >= before:
                return None
            return self._pending.popleft()

    def queue(self, now: float) -> int:
        """Transactions due by ``now`` that no connection has started yet."""
        with self._lock:
            self._draw_until(now)
            return bisect.bisect_right(self._pending, now)
