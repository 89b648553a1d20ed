"""What the load loop does when a statement fails: restart the transaction, reconnect, or end
the run, as sysbench's check_error and reconnect loop decide."""

from __future__ import annotations

import heapq
import time

from services.common.spec import ignore_errors as ignore
from services.common.spec.ignore_errors import RECONNECT_ON, IgnoreErrors
from services.worker.driver.native.client import IDLE, Client
from services.worker.driver.native.libmariadb import DbError
from services.worker.driver.native.protocol import Fatal
from services.worker.driver.native.sinks import Sink
from services.worker.driver.window import MEASURED, WARMUP, window_of


class FailureHandling:
    """The Loop's error handling, kept apart from its statement path; it uses the Loop's run state
    and (un)registers a reconnected client through the Loop's ``_register``/``_unregister``."""

    ignore_errors: IgnoreErrors
    fatal: Fatal | None
    warm: Sink
    deadline: list[float]
    active: int
    timers: list[tuple[float, int, Client]]
    retry: list[tuple[float, int, Client, float]]

    def _failed(self, c: Client, e: DbError) -> None:
        """A statement failed. As sysbench's check_error decides: an error of the ignore list
        restarts the transaction (a lost connection reconnects first); any other ends the run."""
        code = int(e.errno or 0)
        now = time.monotonic()
        sink = self._sink_at(c, now)
        if sink is None:
            # After the window: not counted in it, and the transaction was in flight at its end.
            sink = Sink()
            c.in_flight_from = c.in_flight_from or c.t_start
        key = str(code)
        sink.errors_by_code[key] = sink.errors_by_code.get(key, 0) + 1
        sql = c.ops[c.i][1] if c.i < len(c.ops) else ""
        c.stage = IDLE
        self.active -= 1
        if not ignore.ignores(self.ignore_errors, code):
            sink.counts["errors"] += 1
            self._fatal(c, code, e.msg, sql)
            return
        if code in RECONNECT_ON:
            self._lost(c, now, 0.05)
            return
        sink.counts["ignored_errors"] += 1
        # No ROLLBACK, as in sysbench: the server has rolled a deadlocked transaction back, and
        # the restarted transaction's BEGIN ends whatever else was left open.
        self._restart(c)

    def _sink_at(self, c: Client, now: float) -> Sink | None:
        """Where what happens at ``now`` counts: the warm-up's sink, the connection's, or none
        after the window (window.py's rule)."""
        where = window_of(now, self.deadline)
        return c.sink if where == MEASURED else self.warm if where == WARMUP else None

    def _restart(self, c: Client) -> None:
        # The same event again (sysbench's RESTART_EVENT): new statements, the event's start time
        # kept, so its latency includes the failed attempt and no new arrival is taken. Queued as
        # a timer due at once rather than started here, so a statement that fails at once again
        # (say with ignore_errors: all) loops in run(), not in ever deeper recursion.
        heapq.heappush(self.timers, (c.t_start, id(c), c))

    def _fatal(self, c: Client, code: int, message: str, sql: str) -> None:
        if self.fatal is None:
            self.fatal = Fatal(code, f"MySQL error {code}: {message}, for query '{sql}' (not in ignore_errors: "
                                     f"{ignore.describe(self.ignore_errors)})")
        # sysbench aborts the whole run: no connection starts another transaction.
        self.deadline[0] = self.deadline[1] = 0.0
        c.done = True

    def _lost(self, c: Client, now: float, pause: float) -> None:
        # Keeps trying until the end of the whole run, as sysbench's reconnect loop does, so a
        # restart of the server during warm-up still leaves a working connection for the measurement.
        self._unregister(c)
        c.close()
        if now >= self.deadline[-1]:
            c.done = True
            return
        try:
            c._open()
        except DbError:
            heapq.heappush(self.retry, (now + pause, id(c), c, min(1.0, pause * 2)))
            return
        sink = self._sink_at(c, time.monotonic())
        if sink is not None:
            sink.counts["reconnects"] += 1
        self._register(c)
        self._restart(c)
