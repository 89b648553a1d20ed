"""What the native driver's parent and its load processes say to each other over their pipes.

Every message is a frozen, picklable dataclass (the pipes pickle them). The exchange, per load
process:

    parent -> child   Job (first, once the process started)
    child  -> parent  Ready, or Failed (it could not open its connections)
    parent -> child   Go, or Stop (cancelled before the start)
    child  -> parent  Tick once a measured second, the last one for the partial second
    parent -> child   Stop, at any time (ends the window at once)
    child  -> parent  Done
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from services.common.results.histogram import Histogram
from services.common.spec.ignore_policy import DEFAULT as IGNORE_DEFAULT
from services.common.spec.ignore_policy import Policy
from services.worker.driver.counts import Counts
from services.worker.target.connect_params import ConnectParams
from services.workload.program import Program


@dataclass(frozen=True)
class Job:
    """Everything a load process needs; the parent sends it first, down the process's pipe."""

    params: ConnectParams
    #: The transaction programs of the process's connections, each distinct one once (the parent
    #: draws them from the workload, so a load process needs neither the spec nor its parser).
    programs: tuple[Program, ...]
    #: Per connection (in thread_ids' order), the index of its program in ``programs``.
    program_of: tuple[int, ...]
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
    #: The MySQL errors the run survives; any other one ends it (sysbench's --mysql-ignore-errors).
    ignore_errors: Policy = IGNORE_DEFAULT
    #: Event loops (OS threads) the process drives its connections with (parent.loops_for).
    loops: int = 1
    #: Open loop: arrivals this process may hold due and not started, its share of the run's bound
    #: (arrivals.backlog_share), so a run over many processes or load hosts holds no more in all;
    #: None: the whole bound (arrivals.MAX_BACKLOG).
    backlog_limit: int | None = None
    #: The compressed protocol, if the server agrees (the workload's mysql_compression).
    compress: bool = False


@dataclass(frozen=True)
class Ready:
    """Every connection is open and every statement prepared."""


@dataclass(frozen=True)
class Failed:
    """The load process could not open its connections; ``code`` is the MySQL error code, if any."""

    code: int | None
    message: str


@dataclass(frozen=True)
class Fatal:
    """A statement failed with an error outside the run's ignore list: the run ends with it, as
    sysbench ends a run on its FATAL "returned error NNNN"; ``code`` None: not a server error
    (an open-loop backlog past its bound)."""

    code: int | None
    message: str
    #: The backlog (arrivals due and not started) when it passed its bound; None for a statement's error.
    behind: int | None = None


@dataclass(frozen=True)
class Go:
    """Start at ``t0``, measure from ``t_measure``, stop at ``t_end`` (the parent's monotonic
    clock, which every process of the host shares)."""

    t0: float
    t_measure: float
    t_end: float


@dataclass(frozen=True)
class Stop:
    """End now: transactions in flight finish, no new ones start."""


@dataclass(frozen=True)
class Tick:
    """The process's counts since measurement began, at the end of measured second ``second``."""

    second: int
    counts: Counts
    #: Open loop: transactions due but not started at the end of the second; None when closed.
    queue: int | None = None
    #: Transaction latency of the process since measurement began (for the live histogram).
    latency: Histogram | None = None


@dataclass(frozen=True)
class Seconds:
    """A process's counts per measured second, the result's Series fields (which the parent makes,
    adding the processes' seconds up)."""

    transactions: list[int]
    queries: list[int]
    errors: list[int]
    queue: list[int]
    ignored_errors: list[int]
    reconnects: list[int]


@dataclass(frozen=True)
class Done:
    """Everything the process measured; the parent merges these into one LoadOutcome."""

    counts: Counts
    #: Per measured second of this process (the parent adds the processes' seconds up).
    series: Seconds
    hist: Histogram
    #: Statement latency per kind, empty unless the job asked for it.
    kinds: Mapping[str, Histogram] = field(default_factory=dict)
    #: When the last transaction ended (monotonic clock).
    last_end: float = 0.0
    cpu_s: float = 0.0
    #: Context switches of the process (all its threads) over the measured interval.
    ctxt_switches: int = 0
    #: A bug in the load loop ("TypeError: ..."); the run fails with it.
    failure: str | None = None
    #: The first error outside the ignore list; the run fails with its code and message.
    fatal: Fatal | None = None
    #: Transactions each connection completed in the measured window, connection by connection.
    completed: tuple[int, ...] = ()
    #: Per transaction in flight at the window's end, its age then (window end - its start).
    in_flight_ages: tuple[float, ...] = ()
    #: Where the window ended (monotonic clock): the planned end, or the instant of a Stop.
    window_end: float = 0.0
    #: When the process's load loop ended (monotonic clock): after the last completion, or when it
    #: gave up on transactions still running past the drain grace; 0.0: not recorded.
    loop_end: float = 0.0


def merged_kinds(parts: Iterable[Mapping[str, Histogram]]) -> dict[str, Histogram]:
    """Per-kind histograms of several connections or processes, added kind by kind (new objects)."""
    out: dict[str, Histogram] = {}
    for part in parts:
        for kind, h in part.items():
            out.setdefault(kind, Histogram()).merge(h)
    return out
