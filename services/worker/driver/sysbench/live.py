"""sysbench's per-second report lines, as they arrive, turned into cumulative Progress (pure).

sysbench reports rates (per second over each interval); every driver reports running totals,
so this adds the rates up. Rounding: sysbench prints each rate with two decimals, and a 1 s
interval's count is that rate (sysbench divides by the interval's measured length, a hair off
1 s, which no reader can undo; the final report's exact totals go into the result). Rates are
summed exactly, in integer hundredths, and only the running sum is rounded (half up), so every
reported total is within half a transaction of the sum of what sysbench printed however long
the run; rounding each second on its own would drift by up to half a transaction a second.
"""

from __future__ import annotations

from dataclasses import replace

from services.worker.driver.contract import Counts, IntervalPercentile, Progress, ProgressCallback
from services.common.results import sysbench_output as so


def _hundredths(rate: float) -> int:
    # Exact for two-decimal values: the float's error is far below half a hundredth.
    return round(rate * 100)


def _rounded(hundredths: int) -> int:
    return (hundredths + 50) // 100


def interval_percentile(iv: so.Interval) -> IntervalPercentile | None:
    """The latency percentile a report line printed; None for an interval in which no transaction
    completed (sysbench prints 0.00 then: no latency, not a latency of 0) or without a percentile."""
    if iv.tps <= 0 or not iv.percentile:
        return None
    return IntervalPercentile(float(iv.percentile), iv.latency_ms)


class LiveProgress:
    """Feed it sysbench's output line by line (``feed``); it calls ``on_progress`` once per
    per-second report, with the counts since the measurement began."""

    def __init__(self, on_progress: ProgressCallback, *, open_loop: bool = False):
        self._on_progress = on_progress
        #: With --rate, each second's queue line follows its report line: wait for it.
        self._open_loop = open_loop
        self._pending: so.Interval | None = None
        # Running sums of the printed rates, in hundredths of a count.
        self._tx = self._reads = self._writes = self._other = self._ignored = self._reconnects = 0

    def feed(self, line: str) -> None:
        iv = so.parse_interval(line)
        if iv is not None:
            self.flush()
            if self._open_loop:
                self._pending = iv
            else:
                self._report(iv)
            return
        q = so.parse_queue(line)
        if q is not None and self._pending is not None and self._pending.second == q[0]:
            iv, self._pending = self._pending, None
            self._report(replace(iv, queue_length=q[1], concurrency=q[2]))

    def flush(self) -> None:
        """Report a second still waiting for its queue line (at the end of the output)."""
        if self._pending is not None:
            iv, self._pending = self._pending, None
            self._report(iv)

    def _report(self, iv: so.Interval) -> None:
        self._tx += _hundredths(iv.tps)
        self._reads += _hundredths(iv.reads)
        self._writes += _hundredths(iv.writes)
        self._other += _hundredths(iv.other)
        self._ignored += _hundredths(iv.errors_per_s)
        self._reconnects += _hundredths(iv.reconnects_per_s)
        counts = Counts(
            transactions=_rounded(self._tx), reads=_rounded(self._reads), writes=_rounded(self._writes),
            other=_rounded(self._other),
            # sysbench aborts on any error it does not ignore, so its err/s are all ignored ones.
            errors=0, ignored_errors=_rounded(self._ignored), reconnects=_rounded(self._reconnects),
        )
        self._on_progress(Progress("measure", iv.second, counts, queue=iv.queue_length,
                                   interval_percentile=interval_percentile(iv)))
