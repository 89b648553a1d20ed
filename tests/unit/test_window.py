"""The counting rule (services/worker/driver/window.py) against a simulated server of fixed latency:
a transaction counts in the window it completes in, so the measured rate is the true one within
one transaction per connection, whatever the warm-up, and a warm-up never hides a completion."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from services.collector.part_merge import merge_windows
from services.common.messages.codec import decode
from services.common.messages.results import Window
from services.worker.driver.window import AFTER, MEASURED, WARMUP, Tally, measured_seconds, summarize, window_of

from tests.unit.test_parts import part_result


def simulate(connections: int, latency: float, first: list[float], warmup: float, window: float
             ) -> tuple[Tally, list[list[float]]]:
    """Closed-loop connections from t=0 on a server answering each transaction in ``latency``
    seconds, but connection i's first in ``first[i]`` (its phase); a connection begins no
    transaction at or after the window's end, as the loops do. The tally, and every completion."""
    deadline = (warmup, warmup + window)
    tally = Tally(connections, deadline)
    ends: list[list[float]] = []
    for i in range(connections):
        began, ended, mine = 0.0, first[i], []
        while True:
            tally.completed(i, began, ended)
            mine.append(ended)
            if ended >= deadline[1]:
                break
            began, ended = ended, ended + latency
        ends.append(mine)
    return tally, ends


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(connections=st.integers(1, 4096), latency=st.floats(1e-4, 10.0), lockstep=st.booleans(),
       phase_seed=st.integers(0, 2**32), warmup_l=st.floats(0.0, 20.0), window_l=st.floats(10.0, 60.0))
@example(connections=4096, latency=0.5, lockstep=True, phase_seed=0, warmup_l=0.5, window_l=10.0)
@example(connections=4096, latency=2.0, lockstep=False, phase_seed=1, warmup_l=19.99, window_l=50.0)
def test_the_measured_rate_is_the_true_rate_and_the_warmup_hides_no_completion(
        connections, latency, lockstep, phase_seed, warmup_l, window_l):
    """Within 10 % of connections / latency from a window of 10 latencies, 2 % from 50; every
    completion inside the window is counted, those of transactions begun in the warm-up too."""
    rng = random.Random(phase_seed)
    first = [latency if lockstep else latency * (1.0 - rng.random()) for _ in range(connections)]
    warmup, window = warmup_l * latency, window_l * latency
    tally, ends = simulate(connections, latency, first, warmup, window)
    d0, d1 = tally.deadline
    for i, mine in enumerate(ends):
        assert tally.measured[i] == sum(1 for e in mine if d0 <= e < d1)
        assert tally.warmup[i] == sum(1 for e in mine if e < d0)
    error = abs(tally.rate() / (connections / latency) - 1)
    assert error <= 0.10 + 1e-9
    if window_l >= 50:
        assert error <= 0.02 + 1e-9
    w = tally.window()
    # Every connection runs up to the window's end: one transaction each is in flight there.
    assert w.in_flight_at_end == connections and 0 < w.oldest_in_flight_s <= latency * (1 + 1e-9)
    assert w.starved_connections == 0
    assert math.floor(window_l) - 1 <= w.completed_per_connection_min <= w.completed_per_connection_median


def test_transactions_begun_in_the_warmup_count_when_they_complete_in_the_window():
    """A 5 s transaction, a 4 s warm-up and a 2 s window: every connection's first transaction
    completes at 5 s, inside the window, and is counted (counting at the start counted none)."""
    tally, _ = simulate(100, 5.0, [5.0] * 100, warmup=4.0, window=2.0)
    assert tally.transactions() == 100 and tally.rate() == 50.0
    w = tally.window()
    assert (w.completed_per_connection_min, w.completed_per_connection_median, w.starved_connections) == (1, 1.0, 0)
    # The second transactions began at 5 s and were in flight at the window's end (6 s).
    assert w.in_flight_at_end == 100 and w.oldest_in_flight_s == pytest.approx(1.0)


def test_a_transaction_longer_than_warmup_and_window_is_in_flight_not_lost():
    """Nothing completes in the window: zero, rightly, and every connection is recorded starved
    with a transaction in flight since the start."""
    tally, _ = simulate(8, 10.0, [10.0] * 8, warmup=1.0, window=2.0)
    w = tally.window()
    assert tally.transactions() == 0
    assert (w.starved_connections, w.in_flight_at_end, w.oldest_in_flight_s) == (8, 8, 3.0)


def test_the_window_is_half_open_and_a_completion_after_it_is_in_flight():
    d = (10.0, 20.0)
    assert [window_of(t, d) for t in (9.999, 10.0, 19.999, 20.0)] == [WARMUP, MEASURED, MEASURED, AFTER]
    tally = Tally(1, d)
    assert tally.completed(0, 19.0, 20.0) == AFTER
    assert tally.window().in_flight_at_end == 1 and tally.window().oldest_in_flight_s == 1.0


def test_the_measured_interval_ends_at_the_window_or_at_the_last_completion_before_it():
    assert measured_seconds(last_end=25.0, window_end=20.0, t_measure=10.0, in_flight=True) == 10.0
    assert measured_seconds(last_end=14.0, window_end=20.0, t_measure=10.0, in_flight=False) == 4.0
    assert measured_seconds(last_end=5.0, window_end=20.0, t_measure=10.0, in_flight=False) == 0.0
    # Transactions still in flight: the window ran to its end, whenever the last one completed.
    assert measured_seconds(last_end=14.0, window_end=20.0, t_measure=10.0, in_flight=True) == 10.0


def test_a_server_that_stops_answering_mid_window_lowers_the_rate_instead_of_shortening_the_window():
    """Connections answered every 10 ms until 8 s into a 10 s window, then never again (a server
    hung past the drain grace, as a pool of threads did on the thread-pool study): the rate is the
    completions over the whole window, and every connection is in flight since the hang."""
    deadline = (5.0, 15.0)
    tally = Tally(4, deadline)
    for c in range(4):
        t = 0.0
        while t + 0.01 <= 13.0:
            tally.completed(c, t, t + 0.01)
            t += 0.01
        tally.running(c, t)
    assert tally.transactions() == pytest.approx(4 * 800, abs=4)
    assert tally.rate() == pytest.approx(tally.transactions() / 10.0)
    w = tally.window()
    assert w.in_flight_at_end == 4 and w.oldest_in_flight_s == pytest.approx(2.0, abs=0.02)
    # A transaction the load gave up on that began after the window counts nowhere.
    late = Tally(1, deadline)
    late.running(0, 15.5)
    assert late.window().in_flight_at_end == 0


def test_summarize_counts_starved_connections_and_the_median():
    w = summarize([0, 3, 5, 0, 9], [0.5, 2.0])
    assert (w.connections, w.completed_per_connection_min, w.completed_per_connection_median) == (5, 0, 3.0)
    assert (w.starved_connections, w.in_flight_at_end, w.oldest_in_flight_s) == (2, 2, 2.0)
    assert summarize([], []) == Window()


def test_parts_windows_merge_min_of_mins_summed_in_flight_oldest_max_weighted_median():
    a = Window(connections=10, completed_per_connection_min=3, completed_per_connection_median=8.0,
               starved_connections=0, in_flight_at_end=10, oldest_in_flight_s=0.2)
    b = Window(connections=30, completed_per_connection_min=0, completed_per_connection_median=5.0,
               starved_connections=2, in_flight_at_end=28, oldest_in_flight_s=1.5)
    m = merge_windows([a, b])
    assert m == Window(connections=40, completed_per_connection_min=0, completed_per_connection_median=5.0,
                       starved_connections=2, in_flight_at_end=38, oldest_in_flight_s=1.5)
    assert merge_windows([a, None]) is None


def test_a_result_with_a_window_round_trips_and_one_without_still_decodes():
    old = part_result(0, 2, [1000.0]).model_copy(update={"part": None})
    assert old.window is None and decode(old.encode()).window is None
    new = old.model_copy(update={"window": summarize([1, 2, 3], [0.25])})
    assert decode(new.encode()).window == new.window
