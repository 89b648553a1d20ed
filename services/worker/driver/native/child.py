"""One load process: open its connections, wait for the go, drive them (loop.py) and report.

Its control thread samples the connections' counters once a measured second and sends them to
the parent as a Tick, the way sysbench's --report-interval samples its per-thread counters, so
memory does not grow with threads x seconds; at the end it sends everything it measured as Done.
"""

from __future__ import annotations

import multiprocessing.connection
import os
import random
import resource
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from services.common.messages.results import Series
from services.worker.driver.contract import Counts
from services.worker.driver.native.arrivals import Schedule
from services.worker.driver.native.client import IDLE, Client
from services.worker.driver.native.libmariadb import ClientLibraryError, DbError
from services.worker.driver.native.loop import DRAIN_GRACE_S, drive_clients
from services.worker.driver.native.protocol import (
    Done,
    Failed,
    Fatal,
    Go,
    Job,
    Ready,
    Stop,
    Tick,
    merged_kinds,
)
from services.worker.target.connect_params import ConnectParams
from services.worker.driver.native.sinks import counted, latency_of, share_histogram


def main(pipe: multiprocessing.connection.Connection, job: Job) -> None:
    """Entry point of a load process; it ends quietly when its worker is gone."""
    try:
        _run(pipe, job)
    except (EOFError, BrokenPipeError, ConnectionResetError):
        # The worker died (SIGKILL, crash): nobody is left to report to, and a traceback in
        # the worker's log would only look like a second failure.
        os._exit(0)


def _open_clients(job: Job) -> list[Client]:
    with ThreadPoolExecutor(max_workers=min(16, len(job.thread_ids))) as pool:
        budgets = job.budgets or (None,) * len(job.thread_ids)
        futures = [pool.submit(Client, job, tid, b) for tid, b in zip(job.thread_ids, budgets)]
        clients, first_error = [], None
        for f in futures:
            try:
                clients.append(f.result())
            except BaseException as e:  # noqa: BLE001 - reported to the parent below
                first_error = first_error or e
    if first_error is not None:
        for c in clients:
            c.close()
        raise first_error
    share_histogram(c.sink for c in clients)
    return clients


def _failed(e: BaseException, params: ConnectParams) -> Failed:
    if isinstance(e, DbError):
        return Failed(e.errno, f"cannot open a connection to {params.where} as {params.user}, or prepare "
                               f"the workload's statements: {e.msg} (error {e.errno})")
    if isinstance(e, ClientLibraryError):
        return Failed(None, str(e))
    return Failed(None, f"{type(e).__name__}: {e}")


class _Seconds:
    """The process's per-second series, closed one measured second at a time."""

    def __init__(self, clients: list[Client], schedule: Schedule | None, t_end: float):
        self.clients, self.schedule, self.t_end = clients, schedule, t_end
        self.transactions: list[int] = []
        self.queries: list[int] = []
        self.errors: list[int] = []
        self.ignored_errors: list[int] = []
        self.reconnects: list[int] = []
        self.queue: list[int] = []
        self.previous = Counts()

    def close(self) -> Tick:
        """End the current second: the Tick to send (counts since measurement began)."""
        queue = None
        if self.schedule is not None:
            # Sampled at the second's end, as sysbench's --rate report prints it; the last
            # (partial) second at the deadline, not after the connections drained.
            queue = self.schedule.queue(min(time.monotonic(), self.t_end))
            self.queue.append(queue)
        now, before = counted(c.sink for c in self.clients), self.previous
        self.transactions.append(now.transactions - before.transactions)
        self.queries.append(now.queries - before.queries)
        self.errors.append(now.errors - before.errors)
        self.ignored_errors.append(now.ignored_errors - before.ignored_errors)
        self.reconnects.append(now.reconnects - before.reconnects)
        self.previous = now
        return Tick(len(self.transactions), now, queue, latency_of(c.sink for c in self.clients))

    def series(self) -> Series:
        return Series(transactions=self.transactions, queries=self.queries, errors=self.errors, queue=self.queue,
                      ignored_errors=self.ignored_errors, reconnects=self.reconnects)


def _switches() -> int:
    """Voluntary + involuntary context switches of this process so far, every thread included."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_nvcsw + usage.ru_nivcsw


def _stop(deadline: list[float]) -> None:
    """End the window now: nothing completing from here on counts, and no transaction begins."""
    now = time.monotonic()
    deadline[0] = min(deadline[0], now)
    deadline[1] = min(deadline[1], now)


def _in_flight_ages(clients: list[Client], window_end: float, *, stuck: bool) -> tuple[float, ...]:
    """How long each transaction in flight at the window's end had been running then: those that
    completed after it, and those still running when the loop gave up (``stuck``: its thread is
    still inside a blocking call)."""
    starts = []
    for c in clients:
        began = c.in_flight_from
        if not began and c.t_start and (c.stage != IDLE or (stuck and c.blocking and not c.done)):
            began = c.t_start
        if began and began < window_end:
            starts.append(window_end - began)
    return tuple(starts)


def _run(pipe: multiprocessing.connection.Connection, job: Job) -> None:
    """Open the connections, report ready, run on Go, report done."""
    try:
        if job.cpus:
            os.sched_setaffinity(0, job.cpus)
        clients = _open_clients(job)
    except BaseException as e:  # noqa: BLE001 - every failure goes to the parent as data
        pipe.send(_failed(e, job.params))
        return
    pipe.send(Ready())
    go = pipe.recv()
    if not isinstance(go, Go):
        for c in clients:
            c.close()
        return
    t0, t_measure, t_end = go.t0, go.t_measure, go.t_end
    deadline = [t_measure, t_end]
    schedule = (Schedule(job.rate, t0, random.Random(f"{job.seed}:arrivals:{job.index}"))
                if job.rate > 0 else None)

    fatal: list[Fatal] = []

    def backlog_check() -> None:
        # The connections fell so far behind the rate that the queue would grow without bound: the
        # run ends here saying so, as a statement error would end it, not with the worker's memory.
        if schedule is not None and schedule.exceeded is not None and not fatal:
            fatal.append(Fatal(None, f"the open-loop backlog passed {schedule.exceeded:,} transactions due and not "
                                     f"started in one load process (rate {job.rate:g}/s there): its connections "
                                     "fell that far behind the rate (the server, or the client, cannot keep it); "
                                     "a lower rate or more connections measure it"))
            _stop(deadline)

    def drive() -> None:
        while time.monotonic() < t0:
            time.sleep(max(0.0, t0 - time.monotonic()))
        ended_by = drive_clients(clients, deadline, by_kind=job.by_kind, schedule=schedule,
                                 ignore_errors=job.ignore_errors)
        if ended_by is not None:
            fatal.append(ended_by)

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    seconds = _Seconds(clients, schedule, t_end)

    # Client CPU over the measured interval tells whether the client, not the server, was
    # the limit; waiting here also keeps the control thread off the CPU during warm-up.
    while time.monotonic() < min(t_measure, deadline[1]):
        if pipe.poll(max(0.0, t_measure - time.monotonic())) and isinstance(pipe.recv(), Stop):
            _stop(deadline)
    cpu0, switches0 = time.process_time(), _switches()
    second = 1
    while driver.is_alive():
        boundary = t_measure + second
        timeout = max(0.0, min(boundary, deadline[1]) - time.monotonic())
        if pipe.poll(timeout):
            if isinstance(pipe.recv(), Stop):
                _stop(deadline)
            continue
        now_t = time.monotonic()
        if now_t >= boundary and boundary < deadline[1]:
            pipe.send(seconds.close())
            backlog_check()
            second += 1
        elif now_t >= deadline[1]:
            break
    driver.join(max(0.1, deadline[1] + DRAIN_GRACE_S - time.monotonic()) if deadline[1] else DRAIN_GRACE_S)
    last = seconds.close()  # the last (partial) second, with transactions that drained after it
    cpu_s, switches = time.process_time() - cpu0, _switches() - switches0
    pipe.send(last)

    failure = next((c.failure for c in clients if c.failure is not None), None)
    window_end = deadline[1]
    pipe.send(Done(
        counts=last.counts,
        series=seconds.series(),
        hist=latency_of(c.sink for c in clients),
        kinds=merged_kinds(c.sink.kinds for c in clients),
        last_end=max((c.last_end for c in clients), default=t_measure),
        cpu_s=cpu_s,
        ctxt_switches=switches,
        failure=None if failure is None else f"{type(failure).__name__}: {failure}",
        fatal=fatal[0] if fatal else None,
        completed=tuple(c.sink.counts["transactions"] for c in clients),
        in_flight_ages=_in_flight_ages(clients, window_end, stuck=driver.is_alive()),
        window_end=window_end,
    ))
    if driver.is_alive():
        # A connection stuck past the grace period, maybe inside a blocking call: closing it
        # under that call would free what it uses. The process exits next; the kernel closes it.
        return
    for c in clients:
        c.close()
