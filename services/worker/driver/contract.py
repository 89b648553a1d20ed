"""What every load driver offers the runner, whichever drives the load (benchfleet's own load
processes or the sysbench binary): one call taking a LoadRequest (Driver), a typed Progress
about once a second while it runs, and a LoadOutcome, or a LoadError, at the end."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable, Literal, Protocol

from services.common.errors import LoadError
from services.common.results.histogram import Histogram
from services.common.spec.ignore_errors import DEFAULT as IGNORE_DEFAULT
from services.common.spec.ignore_errors import IgnoreErrors
from services.common.messages.results import Latency, Series, Totals, Window
from services.common.spec.workloads import DataShape, WorkloadSpec
from services.worker.driver.counts import Counts
from services.worker.target.connect_params import ConnectParams
from services.worker.target.local_server import LocalServer

__all__ = ["ConnectParams", "Counts", "Driver", "IntervalPercentile", "LoadError", "LoadOutcome", "LoadRequest",
           "Phase", "Progress", "ProgressCallback", "totals"]

Phase = Literal["warmup", "measure"]


def totals(counts: Counts) -> Totals:
    """The same counts as the result message carries them (error codes go beside them)."""
    c = counts
    return Totals(transactions=c.transactions, reads=c.reads, writes=c.writes, other=c.other,
                  errors=c.errors, ignored_errors=c.ignored_errors, reconnects=c.reconnects)


@dataclass(frozen=True)
class IntervalPercentile:
    """One report interval's latency percentile as sysbench prints it (``lat (ms,95%)``): a figure
    of that interval alone, which no later report adds to (hence a gauge, not a histogram)."""

    percentile: float
    ms: float


@dataclass(frozen=True)
class Progress:
    """A live report of a running load, about once a second. Counts are cumulative since the
    phase began (not per second), so a report lost or merged late loses nothing."""

    phase: Phase
    #: Seconds since the phase began.
    elapsed_s: float
    #: Everything done since the phase began; the native driver's warm-up reports carry none.
    counts: Counts = field(default_factory=Counts)
    #: Open loop only: transactions due by ``elapsed_s`` that had not started; None when closed.
    queue: int | None = None
    #: Transaction latency since the phase began, when the driver has it (the native driver's
    #: load processes' histograms, merged).
    latency: Histogram | None = None
    #: The last interval's latency percentile, when the driver reports only that (sysbench's
    #: report lines); None for an interval without a completed transaction.
    interval_percentile: IntervalPercentile | None = None


ProgressCallback = Callable[[Progress], None]


@dataclass(frozen=True)
class LoadRequest:
    """One run as a driver gets it: where to connect, what to run and for how long. The driver
    warms up for ``warmup`` seconds, then measures for ``duration`` (or ``events``
    transactions); with ``start_gate``, called once every connection is open, the warm-up starts
    at the wall-clock instant it returns (one run's parts start together); a part drives the
    run's thread ids ``first_thread`` onwards of ``run_threads`` (their table slices)."""

    params: ConnectParams
    workload: WorkloadSpec
    data: DataShape
    threads: int
    warmup: float
    #: None: no time limit, which needs ``events``.
    duration: float | None
    seed: int
    #: Measure exactly this many transactions (sysbench's --events), or until ``duration``.
    events: int | None = None
    #: Open loop: transactions arrive as a Poisson stream of this many per second (sysbench's --rate).
    rate: float | None = None
    #: Also time each statement, into one histogram per kind (read, write, other).
    latency_by_kind: bool = False
    #: A statement failing with an error outside it ends the run with a LoadError (sysbench's FATAL).
    ignore_errors: IgnoreErrors = IGNORE_DEFAULT
    #: The CPUs the load runs on; None: wherever this process may run.
    client_cpus: tuple[int, ...] | None = None
    #: The target's server is known not to run on ``client_cpus`` (a managed server pinned to other
    #: CPUs, a server on another host); False: it may share them.
    server_apart: bool = False
    #: The target's server where it runs on this host and may share ``client_cpus`` (a managed
    #: server not pinned apart): its CPU time there is not another process's.
    local_server: LocalServer | None = None
    stop: threading.Event | None = None
    on_progress: ProgressCallback | None = None
    start_gate: Callable[[], float] | None = None
    #: Called with the measured window's wall-clock start and end as soon as the driver has
    #: fixed them (the native driver), so the server's counters are read at those instants.
    on_window: Callable[[float, float], None] | None = None
    #: Reads the server's counters now and waits for it, returning the reading's wall-clock
    #: instant (None when it could not): the sysbench driver calls it between its processes,
    #: when none of the run's transactions is running, to fix the server's window there.
    read_server: Callable[[], float | None] | None = None
    first_thread: int = 0
    run_threads: int | None = None
    #: The latency percentile sysbench's reports print (its --percentile, never 0).
    percentile: int = 95


class Driver(Protocol):
    """How the runner drives a load, whichever driver does it (the registry maps the spec's
    ``driver`` names to implementations)."""

    def __call__(self, request: LoadRequest) -> LoadOutcome:
        """Run ``request``; LoadError when the load cannot run at all, or when a statement fails
        with an error outside its ``ignore_errors`` (sysbench's FATAL), with its MySQL code."""
        ...


@dataclass(frozen=True)
class LoadOutcome:
    """What one run measured, over the measured interval only."""

    totals: Totals
    series: Series
    latency: Latency
    errors_by_code: dict[str, int]
    warmup_s: float
    measured_s: float
    started_at: float
    ended_at: float
    #: CPU seconds the load processes used during the measured interval (user + system).
    client_cpu_s: float = 0.0
    #: Context switches (voluntary + involuntary) of the load processes over the measured
    #: interval; None when the driver could not count them.
    client_ctxt_switches: int | None = None
    #: Per-connection completions in the window and what was in flight at its end; None when the
    #: driver cannot tell (sysbench).
    window: Window | None = None
    #: Wall-clock instants at which the server's counters were read with none of the run's
    #: transactions running, before and after the measured ones (sysbench); None: the server's
    #: count is taken at the window's edges.
    server_window: tuple[float, float] | None = None
    #: Open loop: the arrivals due and not started when the backlog passed its bound and ended
    #: the run (the measurement up to there is kept); None when it did not.
    behind: int | None = None

    @property
    def client_cpu_us_per_query(self) -> float:
        return 1e6 * self.client_cpu_s / self.totals.queries if self.totals.queries else 0.0
