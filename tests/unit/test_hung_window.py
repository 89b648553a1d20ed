"""A server that stops answering mid-window, past the drain grace (a pool of threads hung so on the
thread-pool study: its 64 connections in flight for good): the native driver's merge of its load
processes must report the whole window, its silent seconds as a stall and the wait as an overrun,
not a shorter window that reads faster than the server was."""

from __future__ import annotations

import pytest

from services.common.results import stalls
from services.common.results.histogram import Histogram
from services.worker.driver.contract import Counts
from services.worker.driver.native.child import DRAIN_GRACE_S
from services.worker.driver.native.parent import _merge
from services.worker.driver.native.protocol import Done, Seconds

T0, WALL0, WARMUP, WINDOW = 100.0, 1_000_000.0, 5.0, 10.0
T_MEASURE, WINDOW_END = T0 + WARMUP, T0 + WARMUP + WINDOW


def part(per_second: list[int], last_end: float, loop_end: float, in_flight_ages: tuple[float, ...]) -> Done:
    """One load process's Done: ``per_second`` completions over the window's seconds."""
    n = len(per_second)
    h = Histogram()
    for _ in range(sum(per_second)):
        h.record(2_000)
    return Done(Counts(transactions=sum(per_second), reads=sum(per_second)),
                Seconds(per_second, per_second, [0] * n, [0] * n, [0] * n, [0] * n), h,
                last_end=last_end, completed=(sum(per_second) // 2,) * 2, in_flight_ages=in_flight_ages,
                window_end=WINDOW_END, loop_end=loop_end)


def judged(parts: list[Done]):
    outcome = _merge(parts, T0, WALL0, T_MEASURE)
    quality = stalls.assess(outcome.series.transactions, warmup_s=WARMUP, duration_s=WINDOW,
                            wall_s=outcome.ended_at - outcome.started_at, completed=outcome.totals.transactions,
                            threads=4)
    return outcome, quality


def test_a_hang_past_the_drain_grace_is_a_stall_over_the_whole_window_not_a_faster_short_one():
    # Two processes answered 1,000 a second for 8 s, then nothing: the last completion 2 s before
    # the window's end, the loops giving up DRAIN_GRACE_S after it with every connection in flight.
    hung = [1000] * 8 + [0, 0]
    gave_up = WINDOW_END + DRAIN_GRACE_S
    outcome, quality = judged([part(hung, T_MEASURE + 8.0, gave_up, (2.0, 2.0)) for _ in range(2)])
    assert outcome.measured_s == WINDOW
    assert outcome.totals.transactions / outcome.measured_s == 16_000 / WINDOW
    assert outcome.series.transactions == [2000] * 8 + [0, 0]
    assert outcome.ended_at - WALL0 == pytest.approx(gave_up - T0)
    assert {"stall", "overrun"} <= set(quality.flags) and quality.stalled_s == 2


def test_a_run_that_drains_its_in_flight_transactions_is_unchanged():
    steady = [1000] * 10
    outcome, quality = judged([part(steady, WINDOW_END + 0.004, WINDOW_END + 0.005, (0.002, 0.001))])
    assert outcome.measured_s == WINDOW and outcome.series.transactions == steady
    assert quality.flags == [] and outcome.ended_at - WALL0 == pytest.approx(WINDOW_END + 0.005 - T0)


def test_connections_that_all_finished_their_events_early_are_measured_to_the_last_completion():
    done_early = [1000] * 6
    outcome, _ = judged([part(done_early, T_MEASURE + 6.0, T_MEASURE + 6.0, ())])
    assert outcome.measured_s == 6.0 and outcome.totals.transactions / outcome.measured_s == 1000.0
