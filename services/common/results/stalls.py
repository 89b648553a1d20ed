"""Stalls and overruns: whether a run's mean hides seconds in which the server did nothing.

A mean over a measured interval tells nothing of a 36-second stall inside it (issue 18: an "8 s"
sysbench run took 39 s of wall time at 1,111 q/s against 43,000 in another campaign). Pure:
per-second counts and times in, a ``RunQuality`` out; the worker assesses every finished run
with ``assess``, and its live metrics count stalled seconds with ``stalled_seconds``, by the
same rules, so the counter and the result agree.

Rules:
- A stalled second is a whole measured second, within the planned duration, in which no
  transaction completed (for sysbench: a per-second report line with 0 tps). A trailing partial
  second, and whatever ran past the planned duration, is the overrun's business instead.
- An open-loop run slower than ``MIN_RATE_FOR_STALLS`` transactions/s expects empty seconds, so
  its stalls are not checked. A closed loop always has a transaction in flight: an empty second
  there means every connection waited the whole second.
- The overrun is wall time past warm-up + duration; it is marked beyond ``OVERRUN_FRACTION`` of
  the plan, and never for less than ``OVERRUN_MIN_S`` (process start and connection set-up of
  a short run are not a stall).
- A closed-loop window is short when it holds fewer than ``MIN_COMPLETED_PER_CONNECTION``
  completed transactions per connection: by Little's law (connections = throughput x mean
  response time) that is a window shorter than that many mean response times, where the
  transactions in flight at its ends weigh on the count. An open loop's connections wait
  between arrivals, so its count per connection says nothing of its response time.
"""

from __future__ import annotations

import math
from typing import Sequence

from services.common.messages.results import QualityFlag, RunQuality

#: Below this open-loop rate (transactions/s) an empty second is chance, not a stall: at 5/s a
#: Poisson stream leaves a second empty with probability e^-5 (0.7%).
MIN_RATE_FOR_STALLS = 5.0
#: An overrun is marked when it exceeds this share of the planned time (warm-up + duration) ...
OVERRUN_FRACTION = 0.10
#: ... and this many seconds.
OVERRUN_MIN_S = 1.0
#: A closed-loop window holding fewer completed transactions per connection is marked short.
MIN_COMPLETED_PER_CONNECTION = 10.0
#: Float slack when comparing a second's end with the planned duration.
_EPS = 1e-6


def stalls_apply(rate: float | None) -> bool:
    """Whether an empty second of a run at this open-loop ``rate`` (None: closed loop) is a stall."""
    return rate is None or rate == 0 or rate >= MIN_RATE_FOR_STALLS


def full_seconds(duration_s: float) -> int:
    """How many whole seconds the planned measured interval holds."""
    return max(0, math.floor(duration_s + _EPS))


def stall_spans(transactions: Sequence[int], duration_s: float) -> list[tuple[int, int]]:
    """(first second, length) of each run of consecutive empty seconds among the whole seconds
    of the planned duration; second i is the i-th after warm-up, from 0."""
    spans: list[tuple[int, int]] = []
    start: int | None = None
    n = min(len(transactions), full_seconds(duration_s))
    for i in range(n):
        if transactions[i] == 0:
            if start is None:
                start = i
        elif start is not None:
            spans.append((start, i - start))
            start = None
    if start is not None:
        spans.append((start, n - start))
    return spans


def completed_per_connection(transactions: int, threads: int, rate: float | None = None) -> float | None:
    """Transactions a closed-loop window completed per connection; None for an open loop (``rate``)
    or without connections."""
    if threads <= 0 or not (rate is None or rate == 0):
        return None
    return transactions / threads


def window_short(per_connection: float | None) -> bool:
    """Whether a window with this many completions per connection is too short to measure."""
    return per_connection is not None and per_connection < MIN_COMPLETED_PER_CONNECTION


def overrun_marked(overrun_s: float, planned_s: float) -> bool:
    """Whether an overrun is large enough to mark the run."""
    return overrun_s > max(OVERRUN_FRACTION * planned_s, OVERRUN_MIN_S)


def assess(transactions: Sequence[int], *, warmup_s: float, duration_s: float, wall_s: float,
           rate: float | None = None, completed: int | None = None, threads: int = 0) -> RunQuality:
    """The quality of a finished run: its per-second transaction counts (the result's series),
    its planned warm-up and duration, the wall time it took, its open-loop rate (None: closed),
    and the transactions its window ``completed`` over its connections (``threads``)."""
    if warmup_s < 0 or duration_s < 0:
        raise ValueError(f"planned times must be >= 0, got warm-up {warmup_s} and duration {duration_s}")
    planned = warmup_s + duration_s
    wall = max(0.0, wall_s)
    overrun = max(0.0, wall - planned)
    checked = stalls_apply(rate)
    spans = stall_spans(transactions, duration_s) if checked else []
    longest = max(spans, key=lambda s: (s[1], -s[0]), default=None)
    flags: list[QualityFlag] = []
    if spans:
        flags.append("stall")
    if overrun_marked(overrun, planned):
        flags.append("overrun")
    per_connection = completed_per_connection(completed, threads, rate) if completed is not None else None
    if window_short(per_connection):
        flags.append("short")
    return RunQuality(planned_s=planned, wall_s=wall, overrun_s=overrun, completed_per_connection=per_connection,
                      stalled_s=sum(n for _, n in spans), longest_stall_s=longest[1] if longest else 0,
                      longest_stall_at_s=longest[0] if longest else None, stalls_checked=checked, flags=flags)


def stalled_seconds(second_end_s: float, span_s: float, transactions: int, *, duration_s: float,
                    rate: float | None = None) -> int:
    """Stalled seconds a live per-second report adds: ``transactions`` completed in the
    ``span_s`` seconds ending ``second_end_s`` after warm-up; only whole seconds within the
    planned duration count, as ``assess`` counts them."""
    if transactions > 0 or span_s <= 0 or not stalls_apply(rate):
        return 0
    end = min(second_end_s, float(full_seconds(duration_s)))
    return max(0, round(end - (second_end_s - span_s)))
