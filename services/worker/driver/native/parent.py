"""The native driver: N client connections spread over P pinned load processes.

The parent starts the load processes (child.py, through load_process.py), waits until every one has its connections
open and its statements prepared, then sends them all one "go" with a start time a little
ahead, so they start together. While they run it merges their per-second Ticks into one
Progress; at the end it merges what they measured exactly (counts summed, histograms added,
never percentiles averaged) into one LoadOutcome.
"""

from __future__ import annotations

import dataclasses
import math
import random
import multiprocessing.connection
import os
import threading
import time
from typing import Callable, Mapping

from services.common import logs
from services.common.errors import LoadError
from services.common.results.histogram import Histogram, summary_ms
from services.common.messages.results import Latency, Series
from services.common.spec.workloads import DataShape, WorkloadSpec
from services.worker.driver.contract import (
    Counts,
    LoadOutcome,
    LoadRequest,
    Progress,
    ProgressCallback,
    totals,
)
from services.worker.driver.native import contention
from services.worker.driver.native.arrivals import backlog_share
from services.worker.driver.native.child import DRAIN_GRACE_S
from services.worker.driver.native.load_process import LoadProcess
from services.worker.driver.window import measured_seconds, summarize
from services.worker.driver.native.protocol import (
    Done,
    Failed,
    Go,
    Job,
    Stop,
    Tick,
    merged_kinds,
)
from services.workload.program import Program
from services.workload.statements import Generator

log = logs.get(__name__)

#: Seconds the parent gives the load processes to open every connection, per connection.
CONNECT_BUDGET_S = 0.05
#: How long before the start the "go" is sent, so every process sees it in time.
START_MARGIN_S = 0.1
#: Time limit of a fixed-event run given no duration (sysbench's --time=0 means none at all).
MAX_EVENTS_RUN_S = 24 * 3600.0


#: Up to this many connections per client CPU, each gets a load process of its own, driving it
#: with blocking calls (loop.py): at low concurrency a reply rarely finds another waiting, so
#: epoll saves no wake-up, and N processes get N shares of a busy CPU where one loop gets one,
#: as sysbench's N threads do. Above it, one load process drives them all with event loops.
OWN_PROCESS_MAX_PER_CPU = 4
#: Event loops (OS threads, each with its own epoll set) per client CPU above that, on quiet client
#: CPUs the target's server may share (a server on this host that is not pinned apart): its busy
#: threads are runnable beside the loops, and each loop is one share of the CPU.
LOOPS_PER_CPU = 4
#: On quiet client CPUs the server is known not to use (a managed server pinned to other CPUs, a
#: server on another host): one loop per CPU, which finds the most replies waiting per poll and
#: spends the least client CPU per query (docs/drivers.md, "One loop per CPU").
LOOPS_PER_CPU_APART = 1
#: Connections each loop drives at least there, so a loop still finds replies waiting when it
#: polls (fewer would add empty polls and sleeps per query on a quiet CPU).
MIN_CONNECTIONS_PER_LOOP = 4
#: Client CPUs that other processes kept busy this share of the time just before the run are
#: shared: a shared CPU gives each runnable thread one share, so 4 loops beside one CPU hog get
#: 4/5 of it where sysbench's 16 threads get 16/17, and the client, not the server, is measured.
SHARED_CPU_BUSY = 0.25
#: There each connection gets a loop of its own, as each gets a thread in sysbench, up to this
#: many loops per CPU (32 get 32/33 beside one hog; thousands of threads would cost their stacks).
SHARED_LOOPS_PER_CPU = 32


def loops_for(connections: int, cpus: int, shared: bool = False, server_apart: bool = False) -> int:
    """How many event loops a load process of ``connections`` connections pinned to ``cpus``
    CPUs runs: LOOPS_PER_CPU per CPU (LOOPS_PER_CPU_APART when ``server_apart``), each with
    MIN_CONNECTIONS_PER_LOOP connections or more; on ``shared`` CPUs one per connection, up to
    SHARED_LOOPS_PER_CPU per CPU."""
    if shared:
        return max(1, min(SHARED_LOOPS_PER_CPU * max(1, cpus), connections))
    per_cpu = LOOPS_PER_CPU_APART if server_apart else LOOPS_PER_CPU
    return max(1, min(per_cpu * max(1, cpus), connections // MIN_CONNECTIONS_PER_LOOP))


def part_ids(thread_ids: tuple[int, ...], threads: int, first_thread: int,
             run_threads: int | None) -> tuple[tuple[int, ...], int]:
    """A load process's thread ids and thread count as a part of a split run: the run's ids
    (``first_thread`` onwards) and the run's thread count, so each thread reads its table slice of
    the whole run, as in the unsplit run; unchanged for a run that is not split."""
    if run_threads is None:
        return thread_ids, threads
    return tuple(first_thread + t for t in thread_ids), run_threads


def programs_for(workload: WorkloadSpec, data: DataShape, thread_ids: tuple[int, ...], threads: int,
                 seed: int) -> tuple[tuple[Program, ...], tuple[int, ...]]:
    """The distinct transaction programs of ``thread_ids``' connections, and each connection's
    index among them (equal programs are sent and compiled once)."""
    distinct: dict[Program, int] = {}
    program_of = []
    for tid in thread_ids:
        g = Generator(workload, data, thread_id=tid, threads=threads, seed_rng=random.Random(f"{seed}:{tid}:unique"))
        program_of.append(distinct.setdefault(g.program(), len(distinct)))
    return tuple(distinct), tuple(program_of)


def _plan(threads: int, cpus: list[int], processes: int | None) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(thread ids, cpus) per load process: threads dealt round-robin, cpus split evenly
    (shared round-robin when there are more processes than cpus). Above OWN_PROCESS_MAX_PER_CPU
    connections per CPU one process takes them all: its loops spread over the CPUs as threads,
    and each process more would cost its own interpreter's memory (tens of MiB)."""
    if processes is None:
        processes = threads if threads <= OWN_PROCESS_MAX_PER_CPU * len(cpus) else 1
    p = max(1, min(threads, processes))
    plan = []
    for j in range(p):
        tids = tuple(range(j, threads, p))
        mine = tuple(cpus[j::p]) if len(cpus) >= p else (cpus[j % len(cpus)],)
        plan.append((tids, mine))
    return plan


def plan_jobs(r: LoadRequest, cpus: list[int], processes: int | None = None, shared: bool = False) -> list[Job]:
    """The load processes' jobs for request ``r``: each its connections, CPUs, loops (``shared``:
    the client CPUs are busy with other processes), part of the events and of the rate, and its
    share of the run's open-loop backlog bound (a part of a run split over load hosts: its share
    of the whole run's)."""
    threads, events = r.threads, r.events
    jobs = []
    for tids, mine in _plan(threads, cpus, processes):
        ids, of_run = part_ids(tids, threads, r.first_thread, r.run_threads)
        programs, program_of = programs_for(r.workload, r.data, ids, of_run, r.seed)
        jobs.append(Job(r.params, programs, program_of, ids, of_run, r.seed, mine,
                        None if not events else tuple(events // threads + (t < events % threads) for t in tids),
                        rate=(r.rate or 0.0) * len(tids) / threads, index=len(jobs), by_kind=r.latency_by_kind,
                        ignore_errors=r.ignore_errors,
                        loops=loops_for(len(tids), len(mine), shared, r.server_apart),
                        backlog_limit=backlog_share(len(tids), max(threads, r.run_threads or threads)),
                        compress=bool(r.workload.option("mysql_compression"))))
    return jobs


def run_load(request: LoadRequest, *, processes: int | None = None) -> LoadOutcome:
    """Run the request's workload with ``threads`` connections: warm up, then measure for
    ``duration`` seconds; raise LoadError if it cannot start. With ``events`` (sysbench's
    --events), the measurement ends after exactly that many transactions, or at ``duration`` if
    sooner (None: no time limit). With ``rate`` > 0 (sysbench's --rate), transactions arrive as
    a Poisson stream of that many per second for the whole run (open loop) instead of each
    connection starting its next one as soon as the last ends. ``latency_by_kind`` also times
    every statement, into one histogram per kind (read, write, other). A statement failing with
    an error outside ``ignore_errors`` ends the run with a LoadError carrying its code, as it
    ends a sysbench run; an ignored one restarts its transaction. ``start_gate``, called once
    every connection is open, returns the wall-clock instant the warm-up starts at (the barrier
    of a run split over load hosts; it raises LoadError when the barrier is not met).
    ``processes`` fixes the number of load processes (default: planned from threads and CPUs)."""
    r = request
    threads, events, rate, duration = r.threads, r.events, r.rate, r.duration
    if rate is not None and rate < 0:
        raise LoadError("rate must be >= 0")
    if threads < 1:
        raise LoadError("threads must be at least 1")
    if duration is None:
        if not events:
            raise LoadError("a run needs a duration or a number of events")
        duration = MAX_EVENTS_RUN_S
    cpus = sorted(r.client_cpus) if r.client_cpus else sorted(os.sched_getaffinity(0))
    # Only a process driving several connections chooses its loops; one with a single connection
    # is one thread, as in sysbench, so no run pays the sample's wait for nothing.
    busy = (contention.sample_busy_share(tuple(cpus), server=r.local_server)
            if any(len(tids) > 1 for tids, _ in _plan(threads, cpus, processes)) else 0.0)
    jobs = plan_jobs(r, cpus, processes, shared=busy >= SHARED_CPU_BUSY)
    log.info("load_planned", threads=threads, client_cpus=cpus, client_cpus_busy=round(busy, 2),
             server_apart=r.server_apart, processes=len(jobs), loops=sum(j.loops for j in jobs))
    procs: list[LoadProcess] = []
    try:
        for job in jobs:
            procs.append(LoadProcess(job))
        pipes = [p.pipe for p in procs]
        if not _await_ready(pipes, procs, r.stop, 30.0 + CONNECT_BUDGET_S * threads):
            return _empty(time.time())
        start_wall = r.start_gate() if r.start_gate is not None else None
        return _drive(pipes, procs, r.warmup, duration, r.stop, r.on_progress, start_wall, r.on_window)
    finally:
        for proc in procs:
            _stop(proc.pipe)
        for proc in procs:
            proc.end(5.0)


def _stop(pipe: multiprocessing.connection.Connection) -> None:
    """Tell a load process to end; one that has ended already (its own error ended its load as
    well) is told nothing, and its Done or its exit is read from the pipe as usual."""
    try:
        pipe.send(Stop())
    except (OSError, ValueError):
        pass


def _await_ready(pipes: list, procs: list[LoadProcess], stop: threading.Event | None, budget: float) -> bool:
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
            if isinstance(msg, Failed):
                raise LoadError(msg.message, msg.code)
            pending.discard(i)
    return True


def _drive(pipes: list, procs: list[LoadProcess], warmup: float, duration: float,
           stop: threading.Event | None, on_progress: ProgressCallback | None,
           start_wall: float | None = None,
           on_window: Callable[[float, float], None] | None = None) -> LoadOutcome:
    mono, wall = time.monotonic(), time.time()
    # An agreed start (wall clock) is kept on the monotonic clock from here on; one already past
    # starts at once.
    delay = START_MARGIN_S if start_wall is None else max(START_MARGIN_S, start_wall - wall)
    t0 = mono + delay
    wall0 = wall + delay
    t_measure, t_end = t0 + warmup, t0 + warmup + duration
    for pipe in pipes:
        pipe.send(Go(t0, t_measure, t_end))
    if on_window is not None:
        on_window(wall0 + warmup, wall0 + warmup + duration)
    ticks: dict[int, list[Tick]] = {}
    done: dict[int, Done] = {}
    stopped = False
    next_warm_note = 1
    give_up = t_end + DRAIN_GRACE_S + 30.0
    while len(done) < len(pipes):
        if stop is not None and stop.is_set() and not stopped:
            stopped = True
            for pipe in pipes:
                _stop(pipe)
        now = time.monotonic()
        if now > give_up:
            raise LoadError("load processes did not finish within the grace period after the deadline")
        if on_progress is not None and not stopped and now < t_measure and now - t0 >= next_warm_note:
            # The load processes count nothing while warming up; the note only moves progress.
            on_progress(Progress("warmup", float(next_warm_note)))
            next_warm_note += 1
        live = [p for i, p in enumerate(pipes) if i not in done]
        for pipe in multiprocessing.connection.wait(live, timeout=0.2):
            i = pipes.index(pipe)
            try:
                msg = pipe.recv()
            except EOFError:
                raise LoadError(f"load process {i} died during the run (exit code {procs[i].exitcode})") from None
            if isinstance(msg, Tick):
                if on_progress is None:
                    continue
                ticks.setdefault(msg.second, []).append(msg)
                if len(ticks[msg.second]) == len(pipes):
                    on_progress(_progress(ticks.pop(msg.second)))
            elif isinstance(msg, Done):
                done[i] = msg
                if msg.fatal is not None and not stopped:
                    # One connection's fatal error ends every process's load, as it ends sysbench.
                    stopped = True
                    for j, other in enumerate(pipes):
                        if j not in done:
                            _stop(other)
    failure = next((d.failure for d in done.values() if d.failure), None)
    if failure:
        raise LoadError(f"a load thread failed: {failure}")
    fatal = next((d.fatal for d in done.values() if d.fatal), None)
    if fatal is not None and fatal.behind is None:
        raise LoadError(fatal.message, fatal.code)
    outcome = _merge(list(done.values()), t0, wall0, t_measure)
    if fatal is not None:
        # The server fell behind the offered rate: what was measured up to there is the finding,
        # kept with how far behind (every process's backlog past its bound, summed).
        outcome = dataclasses.replace(outcome, behind=sum(d.fatal.behind or 0 for d in done.values() if d.fatal))
    return outcome


def _progress(ticks: list[Tick]) -> Progress:
    """One Progress from every process's Tick of the same second."""
    queues = [t.queue for t in ticks if t.queue is not None]
    hists = [t.latency for t in ticks if t.latency is not None]
    return Progress("measure", float(ticks[0].second), sum((t.counts for t in ticks), Counts()),
                    queue=sum(queues) if queues else None, latency=Histogram.merged(hists) if hists else None)


def _sum_series(parts: list[list[int]]) -> list[int]:
    out = [0] * max((len(p) for p in parts), default=0)
    for p in parts:
        for i, v in enumerate(p):
            out[i] += v
    return out


def _merge(parts: list[Done], t0: float, wall0: float, t_measure: float) -> LoadOutcome:
    counts = sum((p.counts for p in parts), Counts())
    last_end = max(p.last_end for p in parts)
    in_flight = [a for p in parts for a in p.in_flight_ages]
    measured = measured_seconds(last_end, max(p.window_end for p in parts), t_measure, in_flight=bool(in_flight))
    # The load ended when its last loop did: with transactions stuck past the drain grace that is
    # well after the last completion, and the run's wall time (its overrun) must show it.
    ended = max([last_end, *(p.loop_end for p in parts)])
    # Drop trailing empty seconds of a run cancelled during warm-up or at a boundary.
    n = math.ceil(measured) if measured > 0 else 0
    series = Series(
        transactions=_sum_series([p.series.transactions for p in parts])[:n],
        queries=_sum_series([p.series.queries for p in parts])[:n],
        errors=_sum_series([p.series.errors for p in parts])[:n],
        queue=_sum_series([p.series.queue for p in parts])[:n],
        ignored_errors=_sum_series([p.series.ignored_errors for p in parts])[:n],
        reconnects=_sum_series([p.series.reconnects for p in parts])[:n],
    )
    return LoadOutcome(
        totals=totals(counts),
        series=series,
        latency=_latency(Histogram.merged(p.hist for p in parts), merged_kinds(p.kinds for p in parts)),
        errors_by_code=dict(counts.errors_by_code),
        warmup_s=max(0.0, min(last_end, t_measure) - t0),
        measured_s=measured,
        started_at=wall0,
        ended_at=wall0 + (ended - t0),
        client_cpu_s=sum(p.cpu_s for p in parts),
        client_ctxt_switches=sum(p.ctxt_switches for p in parts),
        window=summarize([n for p in parts for n in p.completed], in_flight),
    )


def _latency(hist: Histogram, kinds: Mapping[str, Histogram]) -> Latency:
    return Latency(**summary_ms(hist), by_kind={k: summary_ms(h) for k, h in sorted(kinds.items())})


def _empty(now: float) -> LoadOutcome:
    return LoadOutcome(totals(Counts()), Series(), Latency(), {}, 0.0, 0.0, now, now)
