"""Stalls and overruns of a run, on literal per-second series: what marks a run, what does not."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.common.messages.results import RunQuality, RunResult
from services.common.results.stalls import MIN_RATE_FOR_STALLS, assess, stall_spans, stalled_seconds


def q(series, *, warmup=0.0, duration=None, wall=None, rate=None) -> RunQuality:
    duration = float(len(series)) if duration is None else duration
    return assess(series, warmup_s=warmup, duration_s=duration, wall_s=warmup + duration if wall is None else wall,
                  rate=rate)


def test_a_steady_run_is_clean():
    """Transactions every second and an on-time end: no stall, no overrun, nothing to mark."""
    r = q([1200, 1185, 1210, 1190, 1201, 1199, 1188, 1204], warmup=2, wall=10.3)
    assert (r.stalled_s, r.longest_stall_s, r.longest_stall_at_s, r.flags) == (0, 0, None, [])
    assert r.overrun_s == pytest.approx(0.3) and r.planned_s == 10.0 and r.stalls_checked


def test_the_issue_sysbench_stall_is_marked_on_both_counts():
    """Issue 18's sysbench run: "8 s" planned (2 s warm-up), a stall from second 3 on, 39 s of wall
    time: stalled seconds counted within the 8 planned, 29 s of overrun, both marked."""
    r = q([5400, 5321, 5388, 0, 0, 0, 0, 0], warmup=2, duration=8, wall=39.0)
    assert (r.stalled_s, r.longest_stall_s, r.longest_stall_at_s) == (5, 5, 3)
    assert r.overrun_s == pytest.approx(29.0)
    assert r.flags == ["stall", "overrun"]


def test_several_stalls_count_every_empty_second_and_name_the_longest():
    """Two stalls of 2 and 3 seconds: 5 stalled seconds, the longest 3 long starting at second 6."""
    r = q([10, 0, 0, 10, 10, 10, 0, 0, 0, 10])
    assert (r.stalled_s, r.longest_stall_s, r.longest_stall_at_s, r.flags) == (5, 3, 6, ["stall"])


def test_equal_stalls_name_the_first():
    """Of two stalls of the same length the first is the longest one reported."""
    assert stall_spans([0, 5, 0, 5], 4) == [(0, 1), (2, 1)]
    assert q([0, 5, 0, 5]).longest_stall_at_s == 0


@pytest.mark.parametrize("series, duration, stalled", [
    ([0], 1.0, 1),                  # a one-second run that did nothing
    ([0, 0, 0], 3.0, 3),            # nothing at all: every second stalled
    ([5, 5, 0], 2.5, 0),            # the empty third "second" is the half second after 2 s: not whole
    ([5, 5, 0], 3.0, 1),            # ... unless the plan had three whole seconds
    ([5, 5, 5, 0, 0], 3.0, 0),      # seconds past the plan are the overrun's, not the stall's
    ([], 8.0, 0),                   # no series (a result stored without one): nothing to judge
    ([0, 7], 2.0, 1),               # a stall at the very start of the measurement
])
def test_only_whole_seconds_of_the_planned_duration_count(series, duration, stalled):
    """Stalled seconds are whole seconds inside the planned duration, wherever they fall."""
    assert q(series, duration=duration).stalled_s == stalled


def test_a_low_open_loop_rate_expects_empty_seconds():
    """At 1 transaction/s an empty second is chance: stalls are not checked (and say so); at the
    threshold rate and in a closed loop they are."""
    series = [1, 0, 2, 0, 1]
    low = q(series, rate=1.0)
    assert (low.stalled_s, low.stalls_checked, low.flags) == (0, False, [])
    assert q(series, rate=MIN_RATE_FOR_STALLS).stalled_s == 2
    assert q(series, rate=None).stalled_s == 2


@pytest.mark.parametrize("planned, wall, marked", [
    (10.0, 10.9, False),    # 0.9 s: under 1 s and under 10%
    (10.0, 11.1, True),     # 1.1 s > max(1.0, 1.0)
    (100.0, 109.0, False),  # 9%: within 10%
    (100.0, 111.0, True),   # 11%
    (2.0, 2.9, False),      # 45% of a 2 s test run, but under a second: process start, not a stall
    (2.0, 3.5, True),
    (10.0, 8.0, False),     # ended early (cancelled at the boundary): no overrun
])
def test_overrun_is_marked_beyond_ten_percent_and_a_second(planned, wall, marked):
    """The overrun mark needs more than 10% of the plan and more than a second."""
    r = assess([5] * int(planned), warmup_s=0, duration_s=planned, wall_s=wall)
    assert ("overrun" in r.flags) is marked
    assert r.overrun_s == pytest.approx(max(0.0, wall - planned))


def test_negative_plan_is_refused():
    """A negative planned time is a caller's bug, named."""
    with pytest.raises(ValueError, match="warm-up -1"):
        assess([1], warmup_s=-1, duration_s=1, wall_s=1)


def test_quality_round_trips_in_a_result_and_old_results_decode_without_it():
    """A result carries its quality through encode/decode; a result without one still decodes."""
    r = q([5, 0, 5], wall=9.0)
    base = dict(run_id="r", campaign_id="c", cell={"target": "a", "workload": "w", "threads": 1}, repetition=1,
                status="ok", worker="w", host="h", started_at=0, ended_at=9)
    res = RunResult(quality=r, **base)
    back = RunResult.model_validate_json(res.encode())
    assert back.quality == r and back.quality.version == 2  # version 2: the short flag
    assert RunResult.model_validate_json(RunResult(**base).encode()).quality is None


@given(st.lists(st.integers(min_value=0, max_value=3), max_size=40), st.integers(min_value=0, max_value=45))
def test_stall_counts_agree_with_the_series(series, duration):
    """For any series and plan: stalled seconds are the empty whole seconds of the plan, the spans
    cover exactly them, and the longest is no longer than their total."""
    r = q(series, duration=float(duration))
    window = series[:duration]
    assert r.stalled_s == window.count(0)
    covered = {s + k for s, n in stall_spans(series, duration) for k in range(n)}
    assert covered == {i for i, v in enumerate(window) if v == 0}
    assert r.longest_stall_s <= r.stalled_s
    assert ("stall" in r.flags) == (r.stalled_s > 0)


@given(st.lists(st.integers(min_value=0, max_value=2), min_size=1, max_size=30), st.integers(min_value=1, max_value=30))
def test_live_counting_adds_up_to_the_result(series, duration):
    """Feeding a run's seconds one report at a time into the live counter gives the result's stalled seconds."""
    live = sum(stalled_seconds(float(i + 1), 1.0, n, duration_s=float(duration)) for i, n in enumerate(series))
    assert live == q(series, duration=float(duration)).stalled_s


@given(st.lists(st.integers(min_value=0, max_value=2), min_size=2, max_size=30))
def test_a_report_covering_two_seconds_counts_both(series):
    """A live report that arrives late, covering two seconds with no transaction, adds 2 (as two reports would)."""
    n = len(series)
    assert stalled_seconds(2.0, 2.0, 0, duration_s=n) == 2
    assert stalled_seconds(2.0, 2.0, 1, duration_s=n) == 0
    assert stalled_seconds(float(n + 1), 1.0, 0, duration_s=n) == 0  # past the plan


def test_a_real_sysbench_stall_read_from_its_report_lines():
    """sysbench 1.0.20's output of a 5 s oltp_update_index run whose table was write-locked from
    1.5 s for 6 s (tests/unit/fixtures/sysbench): its 0-tps report lines are the stalled seconds
    (the two past --time=5 are the overrun's), and the 7.57 s it took is the overrun."""
    from pathlib import Path

    from services.common.results import sysbench_output as so

    text = (Path(__file__).parent / "fixtures" / "sysbench" / "oltp_update_index_stall.txt").read_text()
    report = so.parse_final(text)
    series = so.with_last_second(so.series(so.intervals(text)), so.totals(report), report.total_time_s)
    # The 3 transactions the lock held finish in the 8th second, which sysbench leaves unreported.
    assert series.transactions == [822, 784, 0, 0, 0, 0, 0, 3]
    r = assess(series.transactions, warmup_s=0, duration_s=5, wall_s=report.total_time_s)
    assert (r.stalled_s, r.longest_stall_s, r.longest_stall_at_s) == (3, 3, 2)
    assert r.overrun_s == pytest.approx(2.5692) and r.flags == ["stall", "overrun"]
    assert report.latency_max_ms == 6089.31
