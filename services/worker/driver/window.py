"""When a load counts what it did: a transaction, and each statement, counts in the window in
which it completes, whenever it began, as sysbench counts an event when it ends.

Completed before ``deadline[0]``: the warm-up (counted apart, never reported); in
``[deadline[0], deadline[1])``: the measured window, its latency taken from its own start (which
may lie in the warm-up); at or after ``deadline[1]``: no window, and the transaction is recorded
as in flight at the window's end instead. The native driver's compiled core (native/csrc/loop.c)
applies the same rule in C; ``Tally`` applies the same rule to a list of
completions, for tests and for reading, and ``summarize`` turns what the loops recorded into the
result's Window.
"""

from __future__ import annotations

import statistics
from typing import Sequence

from services.common.messages.results import Window

WARMUP, MEASURED, AFTER = 0, 1, 2


def window_of(completed_at: float, deadline: Sequence[float]) -> int:
    """WARMUP, MEASURED or AFTER: the window a completion at ``completed_at`` counts in."""
    if deadline[0] <= completed_at < deadline[1]:
        return MEASURED
    return WARMUP if completed_at < deadline[0] else AFTER


def measured_seconds(last_end: float, window_end: float, t_measure: float, *, in_flight: bool) -> float:
    """The measured interval: from ``t_measure`` to the window's end, or to the last completion
    when every connection stopped before it (fixed events) with nothing ``in_flight`` at the end.
    A server that stops answering mid-window leaves transactions in flight: its silent seconds
    are part of the window (and its stall), not cut off it, which would raise the rate."""
    if in_flight:
        return max(0.0, window_end - t_measure)
    return max(0.0, min(last_end, window_end) - t_measure)


def summarize(completed: Sequence[int], in_flight_ages: Sequence[float]) -> Window:
    """The Window of connections that completed ``completed`` transactions each in the window,
    with transactions of these ages (window end - start) still in flight at its end."""
    return Window(
        connections=len(completed),
        completed_per_connection_min=min(completed, default=0),
        completed_per_connection_median=float(statistics.median(completed)) if completed else 0.0,
        starved_connections=sum(1 for n in completed if n == 0),
        in_flight_at_end=len(in_flight_ages),
        oldest_in_flight_s=max((max(0.0, a) for a in in_flight_ages), default=0.0),
    )


class Tally:
    """The rule applied to completions reported one by one: what each connection completed in
    each window, and what was in flight at the window's end."""

    def __init__(self, connections: int, deadline: tuple[float, float], t0: float = 0.0):
        self.deadline, self.t0 = deadline, t0
        self.warmup = [0] * connections
        self.measured = [0] * connections
        #: Per connection, the start of its transaction that was in flight at the window's end.
        self.in_flight: dict[int, float] = {}
        self.last_end = t0

    def completed(self, connection: int, began: float, ended: float) -> int:
        """Count a transaction of ``connection`` that ran from ``began`` to ``ended``; its window."""
        where = window_of(ended, self.deadline)
        if where == MEASURED:
            self.measured[connection] += 1
        elif where == WARMUP:
            self.warmup[connection] += 1
        elif began < self.deadline[1]:
            self.in_flight.setdefault(connection, began)
        self.last_end = max(self.last_end, ended)
        return where

    def running(self, connection: int, began: float) -> None:
        """Record a transaction of ``connection`` begun at ``began`` that never completed (the load
        gave up on it): in flight at the window's end when it began before it."""
        if began < self.deadline[1]:
            self.in_flight.setdefault(connection, began)

    def transactions(self) -> int:
        return sum(self.measured)

    def rate(self) -> float:
        """Transactions per second over the measured interval, as the driver reports it."""
        s = measured_seconds(self.last_end, self.deadline[1], self.deadline[0], in_flight=bool(self.in_flight))
        return self.transactions() / s if s > 0 else 0.0

    def window(self) -> Window:
        end = self.deadline[1]
        return summarize(self.measured, [end - began for began in self.in_flight.values()])
