"""The open-loop arrival schedule: intended start times shared by a load process's connections."""

import random

from services.worker.driver.native.arrivals import Schedule


def test_take_returns_increasing_times_and_none_at_the_deadline():
    """Times come out in order; one at or past ``before`` is left for later, not lost."""
    s = Schedule(100.0, 10.0, random.Random(1))
    first = s.take(1e9)
    second = s.take(1e9)
    assert 10.0 < first < second
    assert s.take(second) is None  # the next one is after ``second``
    assert s.take(1e9) > second


def test_queue_counts_due_arrivals_not_yet_taken():
    """The queue is what is due by now minus what connections took."""
    s = Schedule(1000.0, 0.0, random.Random(2))
    due = s.queue(1.0)
    assert 900 < due < 1100  # Poisson: 1000 expected in one second
    for _ in range(10):
        s.take(1e9)
    assert s.queue(1.0) == due - 10
    assert s.queue(0.0) == 0


def test_arrivals_average_the_rate():
    """Mean inter-arrival time is 1/rate."""
    s = Schedule(50.0, 0.0, random.Random(3))
    times = [s.take(1e9) for _ in range(20_000)]
    assert abs(times[-1] / len(times) - 1 / 50.0) < 0.001
