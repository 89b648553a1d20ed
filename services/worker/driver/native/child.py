"""One load process: open its connections in the compiled load core (core.py), wait for the go,
let the core drive them and report.

Its control thread samples the connections' counters once a measured second and sends them to
the parent as a Tick, the way sysbench's --report-interval samples its per-thread counters, so
memory does not grow with threads x seconds; at the end it sends everything it measured as Done.
"""

from __future__ import annotations

import multiprocessing.connection
import os
import resource
import threading
import time

from services.worker.driver.counts import Counts
from services.worker.driver.native.core import LoadCore
from services.common.errors import ClientLibraryError, DbError
from services.worker.driver.native.protocol import Done, Failed, Fatal, Go, Job, Ready, Seconds, Stop, Tick
from services.worker.target.connect_params import ConnectParams

#: Seconds after the deadline a stuck connection may hold up the end of a run (the core's
#: DRAIN_GRACE_S, csrc/loop.c).
DRAIN_GRACE_S = 30.0


def main(pipe: multiprocessing.connection.Connection, job: Job) -> None:
    """Entry point of a load process; it ends quietly when its worker is gone."""
    try:
        _run(pipe, job)
    except (EOFError, BrokenPipeError, ConnectionResetError):
        # The worker died (SIGKILL, crash): nobody is left to report to, and a traceback in
        # the worker's log would only look like a second failure.
        os._exit(0)


def _failed(e: BaseException, params: ConnectParams) -> Failed:
    if isinstance(e, DbError):
        return Failed(e.errno, f"cannot open a connection to {params.where} as {params.user}, or prepare "
                               f"the workload's statements: {e.msg} (error {e.errno})")
    if isinstance(e, ClientLibraryError):
        return Failed(None, str(e))
    return Failed(None, f"{type(e).__name__}: {e}")


class _Seconds:
    """The process's per-second series, closed one measured second at a time."""

    def __init__(self, core: LoadCore, t_end: float):
        self.core, self.t_end = core, t_end
        self.transactions: list[int] = []
        self.queries: list[int] = []
        self.errors: list[int] = []
        self.ignored_errors: list[int] = []
        self.reconnects: list[int] = []
        self.queue: list[int] = []
        self.previous = Counts()

    def close(self) -> Tick:
        """End the current second: the Tick to send (counts since measurement began)."""
        # Sampled at the second's end, as sysbench's --rate report prints it; the last (partial)
        # second at the deadline, not after the connections drained. None in closed loop.
        queue = self.core.queue(min(time.monotonic(), self.t_end))
        if queue is not None:
            self.queue.append(queue)
        now, before = self.core.counts(), self.previous
        self.transactions.append(now.transactions - before.transactions)
        self.queries.append(now.queries - before.queries)
        self.errors.append(now.errors - before.errors)
        self.ignored_errors.append(now.ignored_errors - before.ignored_errors)
        self.reconnects.append(now.reconnects - before.reconnects)
        self.previous = now
        return Tick(len(self.transactions), now, queue, self.core.latency())

    def series(self) -> Seconds:
        return Seconds(transactions=self.transactions, queries=self.queries, errors=self.errors, queue=self.queue,
                      ignored_errors=self.ignored_errors, reconnects=self.reconnects)


def _switches() -> int:
    """Voluntary + involuntary context switches of this process so far, every thread included."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_nvcsw + usage.ru_nivcsw


def _in_flight_ages(connections: list[tuple], window_end: float, *, blocking: bool, stuck: bool) -> tuple[float, ...]:
    """How long each transaction in flight at the window's end had been running then: those that
    completed after it, and those still running when the loop gave up (``stuck``: its thread is
    still inside a blocking call)."""
    starts = []
    for _, in_flight_from, t_start, busy, done, _ in connections:
        began = in_flight_from
        if not began and t_start and (busy or (stuck and blocking and not done)):
            began = t_start
        if began and began < window_end:
            starts.append(window_end - began)
    return tuple(starts)


def _run(pipe: multiprocessing.connection.Connection, job: Job) -> None:
    """Open the connections, report ready, run on Go, report done."""
    try:
        if job.cpus:
            os.sched_setaffinity(0, job.cpus)
        core = LoadCore(job)
        core.open()
    except BaseException as e:  # noqa: BLE001 - every failure goes to the parent as data
        pipe.send(_failed(e, job.params))
        return
    pipe.send(Ready())
    go = pipe.recv()
    if not isinstance(go, Go):
        core.core.close()
        return
    t0, t_measure, t_end = go.t0, go.t_measure, go.t_end
    core.core.go(t0, t_measure, t_end)
    failure: list[BaseException] = []

    def backlog_check() -> None:
        # The connections fell so far behind the rate that the queue would grow without bound: the
        # run ends here saying so (core.fatal() names it), as a statement error would end it, not
        # with the worker's memory.
        if core.core.backlog() is not None:
            core.core.stop()

    def drive() -> None:
        try:
            core.core.run(t0)
        except BaseException as e:  # noqa: BLE001 - reported to the parent as the run's failure
            failure.append(e)
            core.core.stop()

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    seconds = _Seconds(core, t_end)

    def end() -> float:
        return core.core.deadline()[1]

    # Client CPU over the measured interval tells whether the client, not the server, was
    # the limit; waiting here also keeps the control thread off the CPU during warm-up.
    while time.monotonic() < min(t_measure, end()):
        if pipe.poll(max(0.0, t_measure - time.monotonic())) and isinstance(pipe.recv(), Stop):
            core.core.stop()
    cpu0, switches0 = time.process_time(), _switches()
    second = 1
    while driver.is_alive():
        boundary = t_measure + second
        timeout = max(0.0, min(boundary, end()) - time.monotonic())
        if pipe.poll(timeout):
            if isinstance(pipe.recv(), Stop):
                core.core.stop()
            continue
        now_t = time.monotonic()
        if now_t >= boundary and boundary < end():
            pipe.send(seconds.close())
            backlog_check()
            second += 1
        elif now_t >= end():
            break
    window_end = end()
    driver.join(max(0.1, window_end + DRAIN_GRACE_S - time.monotonic()) if window_end else DRAIN_GRACE_S)
    loop_end = time.monotonic()
    last = seconds.close()  # the last (partial) second, with transactions that drained after it
    cpu_s, switches = time.process_time() - cpu0, _switches() - switches0
    pipe.send(last)

    stuck = driver.is_alive()
    connections = core.core.connections()
    bug = core.core.failure() or (f"{type(failure[0]).__name__}: {failure[0]}" if failure else None)
    fatal: Fatal | None = core.fatal()
    pipe.send(Done(
        counts=last.counts,
        series=seconds.series(),
        hist=core.latency(),
        kinds=core.kinds(),
        last_end=max((c[5] for c in connections), default=t_measure),
        cpu_s=cpu_s,
        ctxt_switches=switches,
        failure=bug,
        fatal=fatal,
        completed=tuple(c[0] for c in connections),
        in_flight_ages=_in_flight_ages(connections, window_end, blocking=core.blocking, stuck=stuck),
        window_end=window_end,
        loop_end=loop_end,
    ))
    if stuck:
        # A connection stuck past the grace period, maybe inside a blocking call: closing it
        # under that call would free what it uses. The process exits next; the kernel closes it.
        return
    core.core.close()
