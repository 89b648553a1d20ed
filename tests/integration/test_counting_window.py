"""The native driver counts a transaction in the window it completes in, against the real MariaDB.

Another connection holds ``LOCK TABLES sbtest1 WRITE`` on this test's own database from before
the start, so every connection's first UPDATE, begun in the warm-up, waits; the lock is let go
half a second into a window shorter than that wait, then taken again at once (the waiting
UPDATEs go first) until past the window's end, so the next UPDATEs are in flight at the end.
Counting at the start counted nothing begun in the warm-up; counting at completion counts each
connection's first transaction, longer than the whole window, in the window."""

from __future__ import annotations

import threading
import time

import pytest

from services.common.spec.workloads import DataShape, WorkloadSpec
from services.worker import prepare
from services.worker.driver.contract import LoadRequest, Progress
from services.worker.driver.native.parent import run_load
from services.worker.target.connect_params import ConnectParams
from services.worker.target.dsn import connect

# Serial (run alone after the parallel pass): it releases a lock at set instants inside a short window: other load shifts them.
pytestmark = [pytest.mark.integration, pytest.mark.serial]

DB = "bf_test_counting_window"
SHAPE = DataShape(tables=1, table_size=1000)
#: A 3 s warm-up and a 2 s window: the lock goes 3.5 s after the start (0.5 s into the window).
WARMUP_S, DURATION_S, RELEASE_AFTER_S, HOLD_AGAIN_S = 3.0, 2.0, 3.5, 1.8
THREADS = 4


@pytest.fixture(scope="module")
def params(mariadb_params) -> ConnectParams:
    params = ConnectParams(**mariadb_params, database=DB)
    prepare.ensure_tables(params, SHAPE)
    return params


class Lock:
    """LOCK TABLES sbtest1 WRITE from before the run; ``release_at`` lets it go at an instant of
    the monotonic clock, takes it again at once and holds it HOLD_AGAIN_S."""

    def __init__(self, params: ConnectParams):
        self.conn = connect(params)
        self.cur = self.conn.cursor()
        self.cur.execute("LOCK TABLES sbtest1 WRITE")
        self.thread: threading.Thread | None = None

    def release_at(self, when: float) -> None:
        if self.thread is None:
            self.thread = threading.Thread(target=self._cycle, args=(when,), daemon=True)
            self.thread.start()

    def _cycle(self, when: float) -> None:
        time.sleep(max(0.0, when - time.monotonic()))
        self.cur.execute("UNLOCK TABLES")
        self.cur.execute("LOCK TABLES sbtest1 WRITE")
        time.sleep(HOLD_AGAIN_S)
        self.cur.execute("UNLOCK TABLES")

    def close(self) -> None:
        if self.thread is not None:
            self.thread.join(30)
        else:
            self.cur.execute("UNLOCK TABLES")
        self.conn.close()


@pytest.mark.parametrize("processes", [1, THREADS], ids=["epoll-loop", "one-blocking-connection-each"])
def test_transactions_begun_in_the_warmup_count_in_the_window_they_complete_in(params, processes):
    """Every connection's first transaction (begun in the warm-up, longer than the 2 s window)
    completes in the window and is counted; the next ones, in flight at its end, are recorded as
    such, not counted."""
    lock = Lock(params)

    def note(progress: Progress) -> None:
        # The first warm-up note comes 1 s after the start, by the driver's own clock.
        if progress.phase == "warmup" and progress.elapsed_s == 1.0:
            lock.release_at(time.monotonic() + RELEASE_AFTER_S - 1.0)

    try:
        out = run_load(LoadRequest(params, WorkloadSpec(name="oltp_update_index"), SHAPE, threads=THREADS,
                                   warmup=WARMUP_S, duration=DURATION_S, seed=11, on_progress=note),
                       processes=processes)
    finally:
        lock.close()
    w = out.window
    assert w is not None and w.connections == THREADS
    assert out.totals.transactions >= THREADS, "the transactions begun in the warm-up were not counted"
    # A counted transaction began in the warm-up: its latency, from its own start, exceeds the
    # whole window; counting at the start could count none longer than the window plus the drain.
    assert out.latency.max_ms >= (RELEASE_AFTER_S - 0.2) * 1000 > DURATION_S * 1000
    assert w.completed_per_connection_min >= 1 and w.starved_connections == 0
    assert w.in_flight_at_end >= 1 and 0 < w.oldest_in_flight_s < DURATION_S
    assert out.measured_s == pytest.approx(DURATION_S, abs=0.05)
