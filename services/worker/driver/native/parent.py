"""Driving a workload: N client connections spread over P pinned load processes.

Each load process opens its connections and prepares every statement before the clock
starts, then drives all of them from one thread over epoll (drive_loop). The hot loop only executes statements and bumps in-memory counters and a
latency histogram; per-second figures are sampled from those counters by a control thread
in each process, the way sysbench's --report-interval samples its per-thread counters, so
memory does not grow with threads x seconds. Totals and histograms are merged exactly at the
end (counts summed, histograms added, never percentiles averaged).
"""

from __future__ import annotations

import bisect
import collections
import math
import multiprocessing
import multiprocessing.connection
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from services.common.errors import LoadError
from services.common.histogram import Histogram
from services.common.messages import Latency, Series, Totals
from services.common.spec import DataShape, WorkloadSpec
from services.worker.driver.contract import LoadOutcome
from services.worker.driver.native.libmariadb import ClientLibraryError, DbError
from services.worker.driver.native.loop import COUNTERS as _COUNTERS
from services.worker.driver.native.loop import DRAIN_GRACE_S, Client, drive_clients
from services.worker.driver.native.loop import kind_hist as _kind_hist

#: Seconds the parent gives the load processes to open every connection, per connection.
CONNECT_BUDGET_S = 0.05
#: How long before the start the "go" is sent, so every process sees it in time.
START_MARGIN_S = 0.1
#: Time limit of a fixed-event run given no duration (sysbench's --time=0 means none at all).
MAX_EVENTS_RUN_S = 24 * 3600.0






@dataclass(frozen=True)
class _Job:
    """Everything a load process needs; picklable, so it crosses the spawn boundary."""

    params: Mapping[str, Any]
    workload: WorkloadSpec
    data: DataShape
    thread_ids: tuple[int, ...]
    threads: int
    seed: int
    cpus: tuple[int, ...]
    #: Transactions each thread of thread_ids runs while measuring (fixed-event mode), else None.
    budgets: tuple[int, ...] | None = None
    #: Open loop: this process's share of the run's arrival rate (transactions/s); 0: closed loop.
    rate: float = 0.0
    #: Which load process this is, so each draws its own arrival stream.
    index: int = 0
    #: Also time each statement, into one histogram per kind (read/write/other).
    by_kind: bool = False


# ---------------------------------------------------------------- open-loop arrivals


class Schedule:
    """Poisson arrivals shared by the connections of one load process.

    A connection takes the next intended start time, waits until it (if it is in the future)
    and measures latency from it, so a server that stalls is charged for the transactions that
    queued meanwhile (coordinated omission corrected). The run's rate is split over the load
    processes in proportion to their connections; independent Poisson streams add up to one
    Poisson stream of the whole rate, so this is the same as one schedule for the whole run.
    """

    def __init__(self, rate: float, start: float, rng: random.Random):
        self._lock = threading.Lock()
        self._rate, self._rng = rate, rng
        #: Intended start times drawn and not yet taken, oldest first.
        self._pending: collections.deque[float] = collections.deque()
        self._last = start

    def _draw_until(self, t: float) -> None:
        while not self._pending or self._pending[-1] <= t:
            self._last += self._rng.expovariate(self._rate)
            self._pending.append(self._last)

    def take(self, before: float) -> float | None:
        """The next intended start time, or None (and nothing taken) if it is at or after ``before``."""
        with self._lock:
            if not self._pending:
                self._draw_until(self._last)
            t = self._pending[0]
            if t >= before:
                return None
            return self._pending.popleft()

    def queue(self, now: float) -> int:
        """Transactions due by ``now`` that no connection has started yet."""
        with self._lock:
            self._draw_until(now)
            return bisect.bisect_right(self._pending, now)


# ---------------------------------------------------------------- one load process


def _open_clients(job: _Job) -> list[Client]:
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
    return clients


def _error_message(e: BaseException, params: Mapping[str, Any]) -> tuple[int | None, str]:
    where = params.get("unix_socket") or f"{params.get('host')}:{params.get('port')}"
    if isinstance(e, DbError):
        return e.errno, f"cannot open a connection to {where} as {params.get('user')}, or prepare the workload's statements: {e.msg} (error {e.errno})"
    if isinstance(e, ClientLibraryError):
        return None, str(e)
    return None, f"{type(e).__name__}: {e}"


def _sample(clients: list[Client]) -> dict[str, int]:
    total = dict.fromkeys(_COUNTERS, 0)
    for c in clients:
        for k, v in c.sink.counts.items():
            total[k] += v
    return total


def _codes(clients: list[Client]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in clients:
        for k, v in list(c.sink.errors_by_code.items()):  # list(): a thread may add a code meanwhile
            out[k] = out.get(k, 0) + v
    return out


def _child_main(pipe: multiprocessing.connection.Connection, job: _Job) -> None:
    """Entry point of a load process; it ends quietly when its worker is gone."""
    try:
        _child_run(pipe, job)
    except (EOFError, BrokenPipeError, ConnectionResetError):
        # The worker died (SIGKILL, crash): nobody is left to report to, and a traceback in
        # the worker's log would only look like a second failure.
        os._exit(0)


def _child_run(pipe: multiprocessing.connection.Connection, job: _Job) -> None:
    """Open the connections, report ready, run on "go", report done."""
    try:
        if job.cpus:
            os.sched_setaffinity(0, job.cpus)
        clients = _open_clients(job)
    except BaseException as e:  # noqa: BLE001 - every failure goes to the parent as data
        pipe.send(("error",) + _error_message(e, job.params))
        return
    pipe.send(("ready",))
    msg = pipe.recv()
    if msg[0] != "go":
        for c in clients:
            c.close()
        return
    _, t0, t_measure, t_end = msg
    deadline = [t_measure, t_end]
    schedule = (Schedule(job.rate, t0, random.Random(f"{job.seed}:arrivals:{job.index}"))
                if job.rate > 0 else None)

    def drive() -> None:
        while time.monotonic() < t0:
            time.sleep(max(0.0, t0 - time.monotonic()))
        drive_clients(clients, deadline, by_kind=job.by_kind, schedule=schedule)

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()

    series: dict[str, list[int]] = {"transactions": [], "queries": [], "errors": [], "queue": []}
    previous = dict.fromkeys(_COUNTERS, 0)

    def close_second() -> dict[str, int]:
        nonlocal previous
        if schedule is not None:
            # Sampled at the second's end, as sysbench's --rate report prints it; the last
            # (partial) second at the deadline, not after the connections drained.
            series["queue"].append(schedule.queue(min(time.monotonic(), t_end)))
        now = _sample(clients)
        series["transactions"].append(now["transactions"] - previous["transactions"])
        series["queries"].append(sum(now[k] - previous[k] for k in ("read", "write", "other")))
        series["errors"].append(now["errors"] - previous["errors"])
        previous = now
        return now

    # Client CPU over the measured interval tells whether the client, not the server, was
    # the limit; waiting here also keeps the control thread off the CPU during warm-up.
    while time.monotonic() < t_measure and deadline[1]:
        if pipe.poll(max(0.0, t_measure - time.monotonic())) and pipe.recv()[0] == "stop":
            deadline[0] = deadline[1] = 0.0
    cpu0 = time.process_time()
    second = 1
    while driver.is_alive():
        boundary = t_measure + second
        timeout = max(0.0, min(boundary, deadline[1]) - time.monotonic())
        if pipe.poll(timeout):
            if pipe.recv()[0] == "stop":
                deadline[0] = deadline[1] = 0.0
            continue
        now_t = time.monotonic()
        if now_t >= boundary and boundary < deadline[1]:
            pipe.send(("tick", second, close_second(), _codes(clients)))
            second += 1
        elif now_t >= deadline[1]:
            break
    driver.join(max(0.1, deadline[1] + DRAIN_GRACE_S - time.monotonic()) if deadline[1] else DRAIN_GRACE_S)
    final = close_second()  # the last (partial) second, with transactions that drained after it
    cpu_s = time.process_time() - cpu0
    errors_by_code = _codes(clients)
    pipe.send(("tick", second, final, errors_by_code))

    hist = Histogram.merged(c.sink.hist for c in clients)
    kinds: dict[str, Histogram] = {}
    for c in clients:
        for kind, h in c.sink.kinds.items():
            _kind_hist(kinds, kind).merge(h)
    failure = next((c.failure for c in clients if c.failure is not None), None)
    pipe.send(("done", {
        "counts": final,
        "series": series,
        "hist": hist.to_wire(),
        "kinds": {k: h.to_wire() for k, h in kinds.items()},
        "errors_by_code": errors_by_code,
        "last_end": max((c.last_end for c in clients), default=t_measure),
        "cpu_s": cpu_s,
        "failure": None if failure is None else f"{type(failure).__name__}: {failure}",
    }))
    for c in clients:
        c.close()


# ---------------------------------------------------------------- the parent


def _plan(threads: int, cpus: list[int], processes: int | None) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(thread ids, cpus) per load process: threads dealt round-robin, cpus split evenly
    (shared round-robin when there are more processes than cpus)."""
    p = max(1, min(threads, processes or min(threads, len(cpus))))
    plan = []
    for j in range(p):
        tids = tuple(range(j, threads, p))
        mine = tuple(cpus[j::p]) if len(cpus) >= p else (cpus[j % len(cpus)],)
        plan.append((tids, mine))
    return plan


def run_load(
    params: Mapping[str, Any],
    workload: WorkloadSpec,
    data: DataShape,
    threads: int,
    warmup: float,
    duration: float | None,
    seed: int,
    *,
    client_cpus: list[int] | None = None,
    processes: int | None = None,
    stop: threading.Event | None = None,
    on_second: Callable[[dict[str, Any]], None] | None = None,
    events: int | None = None,
    rate: float | None = None,
    latency_by_kind: bool = False,
) -> LoadOutcome:
    """Run ``workload`` with ``threads`` connections: warm up, then measure for ``duration``
    seconds; raise LoadError if it cannot start. With ``events`` (sysbench's --events), the
    measurement ends after exactly that many transactions, or at ``duration`` if sooner
    (None: no time limit). With ``rate`` > 0 (sysbench's --rate), transactions arrive as a
    Poisson stream of that many per second for the whole run (open loop) instead of each
    connection starting its next one as soon as the last ends. ``latency_by_kind`` also times
    every statement, into one histogram per kind (read, write, other)."""
    if rate is not None and rate < 0:
        raise LoadError("rate must be >= 0")
    if threads < 1:
        raise LoadError("threads must be at least 1")
    if duration is None:
        if not events:
            raise LoadError("a run needs a duration or a number of events")
        duration = MAX_EVENTS_RUN_S
    cpus = sorted(client_cpus) if client_cpus else sorted(os.sched_getaffinity(0))
    ctx = multiprocessing.get_context("spawn")
    procs, pipes = [], []
    try:
        for tids, mine in _plan(threads, cpus, processes):
            parent_end, child_end = ctx.Pipe(duplex=True)
            budgets = None if not events else tuple(events // threads + (t < events % threads) for t in tids)
            job = _Job(dict(params), workload, data, tids, threads, seed, mine, budgets,
                       rate=(rate or 0.0) * len(tids) / threads, index=len(procs), by_kind=latency_by_kind)
            proc = ctx.Process(target=_child_main, args=(child_end, job), daemon=True,
                               name=f"benchfleet-load-{len(procs)}")
            proc.start()
            child_end.close()
            procs.append(proc)
            pipes.append(parent_end)
        if not _await_ready(pipes, procs, stop, 30.0 + CONNECT_BUDGET_S * threads):
            return _empty(time.time())
        return _drive(pipes, procs, warmup, duration, stop, on_second)
    finally:
        for pipe in pipes:
            try:
                pipe.send(("stop",))
            except (OSError, ValueError):
                pass
        for proc in procs:
            proc.join(5.0)
            if proc.is_alive():
                proc.kill()
                proc.join()
        for pipe in pipes:
            pipe.close()


def _await_ready(pipes: list, procs: list, stop: threading.Event | None, budget: float) -> bool:
    """Wait until every process has its connections open; False if cancelled meanwhile."""
    pending = set(range(len(pipes)))
    give_up = time.monotonic() + budget
    while pending:
        if stop is not None and stop.is_set():
            return False
        if time.monotonic() > give_up:
            raise LoadError(f"load processes did not open their connections within {budget:.0f} s")
        for pipe in multiprocessing.connection.wait([pipes[i] for i in pending], timeout=0.2):
            i = pipes.index(pipe)
            try:
                msg = pipe.recv()
            except EOFError:
                raise LoadError(f"load process {i} exited before it was ready "
                                f"(exit code {procs[i].exitcode})") from None
            if msg[0] == "error":
                raise LoadError(msg[2], msg[1])
            pending.discard(i)
    return True


def _drive(pipes: list, procs: list, warmup: float, duration: float,
           stop: threading.Event | None, on_second: Callable[[dict[str, Any]], None] | None) -> LoadOutcome:
    t0 = time.monotonic() + START_MARGIN_S
    wall0 = time.time() + START_MARGIN_S
    t_measure, t_end = t0 + warmup, t0 + warmup + duration
    for pipe in pipes:
        pipe.send(("go", t0, t_measure, t_end))
    ticks: dict[int, list[dict[str, int]]] = {}
    done: dict[int, dict[str, Any]] = {}
    stopped = False
    next_warm_note = 1
    give_up = t_end + DRAIN_GRACE_S + 30.0
    while len(done) < len(pipes):
        if stop is not None and stop.is_set() and not stopped:
            stopped = True
            for pipe in pipes:
                pipe.send(("stop",))
        now = time.monotonic()
        if now > give_up:
            raise LoadError("load processes did not finish within the grace period after the deadline")
        if on_second is not None and not stopped and now < t_measure and now - t0 >= next_warm_note:
            on_second({"phase": "warmup", "elapsed_s": float(next_warm_note), "warmup_s": warmup})
            next_warm_note += 1
        live = [p for i, p in enumerate(pipes) if i not in done]
        for pipe in multiprocessing.connection.wait(live, timeout=0.2):
            i = pipes.index(pipe)
            try:
                msg = pipe.recv()
            except EOFError:
                raise LoadError(f"load process {i} died during the run (exit code {procs[i].exitcode})") from None
            if msg[0] == "tick":
                _, second, counts, codes = msg
                if on_second is None:
                    continue
                ticks.setdefault(second, []).append((counts, codes))
                if len(ticks[second]) == len(pipes):
                    on_second(_progress(second, ticks.pop(second)))
            elif msg[0] == "done":
                done[i] = msg[1]
    failure = next((d["failure"] for d in done.values() if d["failure"]), None)
    if failure:
        raise LoadError(f"a load thread failed: {failure}")
    return _merge(list(done.values()), t0, wall0, t_measure)


def _progress(second: int, samples: list[tuple[dict[str, int], dict[str, int]]]) -> dict[str, Any]:
    total = dict.fromkeys(_COUNTERS, 0)
    codes: dict[str, int] = {}
    for counts, by_code in samples:
        for k, v in counts.items():
            total[k] += v
        for k, v in by_code.items():
            codes[k] = codes.get(k, 0) + v
    return {
        "phase": "measure",
        "elapsed_s": float(second),
        "transactions": total["transactions"],
        "queries": total["read"] + total["write"] + total["other"],
        "reads": total["read"],
        "writes": total["write"],
        "other": total["other"],
        "errors": total["errors"],
        "ignored_errors": total["ignored_errors"],
        "reconnects": total["reconnects"],
        "errors_by_code": codes,
    }


def _sum_series(parts: list[list[int]]) -> list[int]:
    out = [0] * max((len(p) for p in parts), default=0)
    for p in parts:
        for i, v in enumerate(p):
            out[i] += v
    return out


def _merge(parts: list[dict[str, Any]], t0: float, wall0: float, t_measure: float) -> LoadOutcome:
    counts = dict.fromkeys(_COUNTERS, 0)
    errors_by_code: dict[str, int] = {}
    for p in parts:
        for k, v in p["counts"].items():
            counts[k] += v
        for k, v in p["errors_by_code"].items():
            errors_by_code[k] = errors_by_code.get(k, 0) + v
    hist = Histogram.merged(Histogram.from_wire(p["hist"]) for p in parts)
    kinds: dict[str, Histogram] = {}
    for p in parts:
        for kind, wire in p.get("kinds", {}).items():
            _kind_hist(kinds, kind).merge(Histogram.from_wire(wire))
    last_end = max(p["last_end"] for p in parts)
    measured = max(0.0, last_end - t_measure)
    # Drop trailing empty seconds of a run cancelled during warm-up or at a boundary.
    n = math.ceil(measured) if measured > 0 else 0
    series = Series(
        transactions=_sum_series([p["series"]["transactions"] for p in parts])[:n],
        queries=_sum_series([p["series"]["queries"] for p in parts])[:n],
        errors=_sum_series([p["series"]["errors"] for p in parts])[:n],
        queue=_sum_series([p["series"]["queue"] for p in parts])[:n],
    )
    return LoadOutcome(
        totals=Totals(transactions=counts["transactions"], reads=counts["read"], writes=counts["write"],
                      other=counts["other"], errors=counts["errors"],
                      ignored_errors=counts["ignored_errors"], reconnects=counts["reconnects"]),
        series=series,
        latency=_latency(hist, kinds),
        errors_by_code=errors_by_code,
        warmup_s=max(0.0, min(last_end, t_measure) - t0),
        measured_s=measured,
        started_at=wall0,
        ended_at=wall0 + (last_end - t0),
        client_cpu_s=sum(p["cpu_s"] for p in parts),
    )


def _summary(hist: Histogram) -> dict[str, Any]:
    return {"p50_ms": hist.percentile(50) / 1000, "p95_ms": hist.percentile(95) / 1000,
            "p99_ms": hist.percentile(99) / 1000, "max_ms": hist.max_us / 1000, "histogram": hist.to_wire()}


def _latency(hist: Histogram, kinds: Mapping[str, Histogram] | None = None) -> Latency:
    return Latency(**_summary(hist), by_kind={k: _summary(h) for k, h in sorted((kinds or {}).items())})


def _empty(now: float) -> LoadOutcome:
    return LoadOutcome(Totals(), Series(), Latency(), {}, 0.0, 0.0, now, now)
