"""Executing one run spec: reach the target, prepare its tables, drive the load, build the result."""

from __future__ import annotations

import contextlib
import functools
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from services.common import logs
from services.common.results import agreement, stalls
from services.common.errors import DbError
from services.common.messages.results import FellBehind, RunResult
from services.common.messages.runs import RunSpec
from services.worker.parts.share import share_of
from services.worker import fdlimit, prepare
from services.worker.driver.contract import LoadError, LoadRequest, ProgressCallback
from services.worker.driver.registry import check_target, check_workload, driver_for
from services.worker.target import dsn as target
from services.worker.target import lifecycle as server_run
from services.worker.target.managed import ServerManager
from services.workload.server_counter import ServerCounter, counter_for

log = logs.get(__name__)

#: Drivers whose totals are their measured process's run totals (sysbench counts every event
#: of its run, which begins when its threads have started), not a window the worker timed.
WHOLE_PROCESS_DRIVERS = frozenset({"sysbench"})


@dataclass
class WorkerIdentity:
    """Who ran a run: stored with every result so a report can say where numbers came from."""

    worker_id: str
    host: str = field(default_factory=socket.gethostname)


@functools.cache
def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("benchfleet", "mysql-connector-python"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def execute(run: RunSpec, who: WorkerIdentity, *, servers: ServerManager | None = None, attempt: int = 1,
            client_cpus: list[int] | None = None, after_failure: bool = False,
            stop: threading.Event | None = None, on_progress: ProgressCallback | None = None,
            start_gate: Callable[[], float] | None = None,
            on_measuring: Callable[[float], None] | None = None) -> RunResult:
    """Run ``run`` to the end and return its result; failures become a failed result, never
    an exception, so the caller always has something to publish before it acks. ``on_progress``
    receives the driver's Progress, about once a second; ``on_measuring`` the moment the warm-up
    starts (after server start, quiesce and prepare). ``after_failure``: this is a retry, or
    the worker's previous run on this target failed, so the quiesce ends what that left running.
    A part of a run (``run.part``) drives its share of the connections, rate and seed, and
    starts at the barrier ``start_gate`` agrees (services/worker/parts/session.py)."""
    started = time.time()
    base = dict(run_id=run.run_id, campaign_id=run.campaign_id, cell=run.cell, repetition=run.repetition,
                worker=who.worker_id, host=who.host, attempt=attempt, versions=_versions())
    settling: server_run.Settling | None = None
    try:
        drive = driver_for(run.driver)
        check_target(run.driver, run.target)
        check_workload(run.driver, run.workload)
        # Before any connection: one open file per client, in this process and in the load
        # processes and sysbench it starts next, which inherit the limit.
        share = share_of(run.cell.threads, run.rate, run.seed, run.part)
        fdlimit.ensure(share.threads)
        # Managed targets start (or reuse) their server here and pin the clients apart from it.
        session = server_run.open_target(servers, run.target, run.data, client_cpus)
        params, client_cpus = session.params, session.client_cpus
        settling = server_run.settling_for(servers, session, run.target, after_failure=after_failure, stop=stop)
        if settling is not None:
            settling.before_prepare()
        if stop is None or not stop.is_set():
            # The parts of a split run prepare one at a time: the first loads, the others find it done.
            with prepare.prepare_lock(params) if run.part is not None else contextlib.nullcontext():
                prepare.ensure_workload_tables(params, run.data, run.workload)
        if settling is not None:
            # After prepare, which dirties pages too: the warm-up starts on a settled server.
            settling.settle()
            base["quiesce"] = settling.report
        if stop is not None and stop.is_set():
            # Cancelled while waiting or preparing: nothing was measured.
            return RunResult(status="cancelled", started_at=started, ended_at=time.time(), **base)
        # A part's warm-up starts at the barrier, inside the driver, when every part is ready:
        # it sends no "measuring" and the reaper keeps the whole start allowance for it.
        if on_measuring is not None and run.part is None:
            on_measuring(time.time())
        with server_run.sampling(session):
            outcome = drive(LoadRequest(
                params, run.workload, run.data, share.threads, run.warmup, run.duration, share.seed,
                rate=share.rate, latency_by_kind=bool(run.latency_by_kind), ignore_errors=run.ignored_errors,
                client_cpus=tuple(client_cpus) if client_cpus else None, server_apart=session.server_apart,
                local_server=session.local_server,
                stop=stop, on_progress=on_progress,
                start_gate=start_gate, first_thread=share.first_thread,
                run_threads=share.run_threads if run.part is not None else None,
                events=run.events, percentile=run.report_percentile,
                # The monitor reads the server's counters at the window's first and last instant.
                on_window=session.sampler.sample_at if session.sampler is not None else None,
                read_server=session.sampler.read_now if session.sampler is not None else None,
            ))
    except (target.TargetError, fdlimit.FdLimitError) as e:
        if settling is not None:
            base["quiesce"] = settling.report
        return RunResult(status="failed", error=str(e), started_at=started, ended_at=time.time(), **base)
    except LoadError as e:
        return RunResult(status="failed", error=str(e), error_code=e.code, started_at=started, ended_at=time.time(), **base)
    except DbError as e:
        return RunResult(status="failed", error=f"MySQL error {e.errno}: {e.msg}", error_code=e.errno,
                         started_at=started, ended_at=time.time(), **base)
    status = "cancelled" if stop is not None and stop.is_set() else "ok"
    # Only a finished run is judged: a cancelled one stopped early by request.
    # A run told to measure N events (sysbench's --events) may end before its duration: it is
    # judged on the time it measured.
    # So is an open-loop run its backlog ended (it fell behind the rate: the finding is how far).
    measured_for = min(run.duration, outcome.measured_s) if run.events or outcome.behind is not None else run.duration
    quality = stalls.assess(outcome.series.transactions, warmup_s=run.warmup, duration_s=measured_for,
                            wall_s=outcome.ended_at - outcome.started_at, rate=share.rate,
                            completed=outcome.totals.transactions, threads=share.threads) if status == "ok" else None
    server = server_run.report(session, outcome, _counter(run), to_end=run.driver in WHOLE_PROCESS_DRIVERS)
    # A run its backlog ended stopped mid-transaction on every connection: the server's count at the
    # planned window's end says nothing about the client's, so none is judged.
    if quality is not None and server.count is not None and outcome.behind is None:
        # sysbench reports no window: nothing known in flight, the 2 % alone applies.
        in_flight = outcome.window.in_flight_at_end if outcome.window is not None else 0
        quality = quality.model_copy(update={"server_agreement": agreement.assess(
            outcome.totals.transactions, server.count.server_transactions, in_flight=in_flight)})
    if quality is not None and outcome.behind is not None:
        # Stored and marked, not failed: another attempt at the same rate falls behind again.
        quality = quality.model_copy(update={"flags": [*quality.flags, "behind"], "behind": FellBehind(
            due=outcome.behind, rate=run.rate or 0.0, after_s=round(outcome.measured_s, 3))})
    return RunResult(
        status=status,
        started_at=outcome.started_at,
        ended_at=outcome.ended_at,
        warmup_s=outcome.warmup_s,
        measured_s=outcome.measured_s,
        totals=outcome.totals,
        errors_by_code=outcome.errors_by_code,
        series=outcome.series,
        latency=outcome.latency,
        window=outcome.window,
        server=server,
        quality=quality,
        **base,
    )


def _counter(run: RunSpec) -> ServerCounter:
    """The server counter of ``run``'s transactions, or why the server's count is n/a."""
    if run.part is not None:
        return ServerCounter((), reason="a part of a split run: the server counts every part's transactions")
    return counter_for(run.workload, run.data)
