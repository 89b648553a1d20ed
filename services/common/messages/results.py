"""What a run measured: totals, per-second series, latency, the server's side, quality and quiesce."""

from __future__ import annotations

import functools
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from services.common.messages.base import RESULT_SCHEMA, Count, Int64, NonNegative, _Message
from services.common.messages.parts import PartReport
from services.common.messages.pool import PoolSeries
from services.common.messages.runs import Cell
from services.common.messages.server_work import ServerWork, server_work
from services.common.spec.campaign import MAX_RUNS
from services.common.spec.server_options import hide_secrets
from services.common.spec.targets import ServerOptionValue


class Totals(_Message):
    """Counts over the measured interval only (warm-up never counted)."""

    transactions: Count = 0
    reads: Count = 0
    writes: Count = 0
    other: Count = 0
    errors: Count = 0
    ignored_errors: Count = 0
    reconnects: Count = 0

    @property
    def queries(self) -> int:
        return self.reads + self.writes + self.other


class Series(_Message):
    """Per-second counts over the measured interval; index i is second i after warm-up."""

    transactions: list[Count] = Field(default_factory=list)
    queries: list[Count] = Field(default_factory=list)
    errors: list[Count] = Field(default_factory=list)
    #: Open-loop runs only: transactions due but not started at the end of each second.
    queue: list[Count] = Field(default_factory=list)
    #: Errors of the ignore list (transactions restarted) and reconnects, per second, as
    #: sysbench's err/s and reconn/s; empty in results stored before they were recorded.
    ignored_errors: list[Count] = Field(default_factory=list)
    reconnects: list[Count] = Field(default_factory=list)


#: Why a latency figure is None: reports print it beside their n/a.
NO_LATENCY = "no transaction completed"
#: Why a latency figure of a run that completed transactions is None: it was read from sysbench's
#: output (`collector import-sysbench`, the sysbench driver), which gives one percentile
#: (--percentile, 95 by default) and the others only with --histogram.
NOT_PRINTED = "not printed by sysbench (it prints one percentile, and the others only with --histogram)"


def no_latency_reason(transactions: int | None) -> str:
    """Why a successful run has no latency figure: nothing completed, or sysbench did not print it."""
    return NOT_PRINTED if transactions else NO_LATENCY


class Latency(_Message):
    """Transaction latency in milliseconds, from the merged histogram. A figure is None when no
    transaction completed (``NO_LATENCY``): an empty histogram has no percentile, never 0."""

    p50_ms: NonNegative | None = None
    p95_ms: NonNegative | None = None
    p99_ms: NonNegative | None = None
    max_ms: NonNegative | None = None
    histogram: dict[str, Any] = Field(default_factory=dict)
    #: Statement latency per kind (read, write, other), each with the fields above, when the
    #: campaign asked for it (spec ``latency_by_kind``).
    by_kind: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _empty_is_missing(cls, data: Any) -> Any:
        # Results stored before figures could be None wrote 0.0 beside an empty histogram: a
        # histogram without a sample has no percentile, so those zeros read as missing.
        if isinstance(data, dict) and _empty_histogram(data.get("histogram")):
            data = {**data, **{k: None for k in ("p50_ms", "p95_ms", "p99_ms") if not data.get(k)}}
            if not data.get("max_ms"):
                data["max_ms"] = None
        return data


def _empty_histogram(wire: Any) -> bool:
    """Whether a histogram's wire form holds no sample (an absent histogram is not known empty)."""
    return isinstance(wire, dict) and bool(wire) and not any((wire.get("buckets") or {}).values())


class ServerCount(_Message):
    """The server's own count of the measured window's transactions (``server.count`` of a
    result): the SHOW GLOBAL STATUS counters it sums, read on a connection opened before the
    load (pool-of-threads: the server's extra_port), or why there is none (``reason``)."""

    #: The counters summed (Com_commit + Com_rollback for BEGIN/COMMIT workloads, the statement
    #: counter otherwise), and how many counts one transaction adds (statements per transaction).
    counter: list[str] = Field(default_factory=list)
    per_transaction: Annotated[int, Field(ge=1)] = 1
    #: None when the server's count is n/a; ``reason`` then says why.
    server_transactions: Count | None = None
    reason: str | None = None


class Window(_Message):
    """Who completed what in the measured window, per connection, and what was still running at
    its end (the native driver; None from sysbench, which reports no per-connection counts)."""

    #: Connections of the run (of the part, before load_hosts parts are merged).
    connections: Count = 0
    #: The fewest and the median transactions one connection completed in the window.
    completed_per_connection_min: Count = 0
    completed_per_connection_median: NonNegative = 0.0
    #: Connections that completed no transaction in the window.
    starved_connections: Count = 0
    #: Transactions in flight at the window's end (begun before it, completed after or never).
    in_flight_at_end: Count = 0
    #: The age at the window's end of the oldest of them (window end - its start); 0 when none.
    oldest_in_flight_s: NonNegative = 0.0


class ServerReport(_Message):
    """What the server did during a run's measured interval, and what it was (``server`` of a
    result). Managed-target fields stay None for dsn targets; CPU seconds need the server's
    process on the worker's host, so dsn targets have no server CPU."""

    kind: Literal["dsn", "managed"] | None = None
    #: What answered: ``SELECT VERSION(), @@version_comment``.
    version: str | None = None
    version_comment: str | None = None
    #: The effective value of every option the spec set (``SHOW GLOBAL VARIABLES``).
    variables: dict[str, str | None] = Field(default_factory=dict)
    identity_error: str | None = None
    #: Managed targets: the binary, the spec's options, the pinning, the start (template copy
    #: to ready, or reuse of the previous run's server).
    binary: str | None = None
    #: The registered build that ran ("system": the worker's own server), what its binary's
    #: `--version` says, and the sha256 of the binary that was started.
    build: str | None = None
    build_version: str | None = None
    server_sha256: str | None = None
    #: The allocator found loaded in the server's /proc/PID/maps (glibc: none preloaded).
    malloc: str | None = None
    options: dict[str, ServerOptionValue] = Field(default_factory=dict)
    server_cpus: str | None = None
    client_cpus: str | None = None
    reused: bool | None = None
    start_s: float | None = None
    pid: int | None = None
    port: int | None = None
    #: SHOW GLOBAL STATUS over the measured interval: counter deltas, gauges at its end.
    status_deltas: dict[str, Int64] = Field(default_factory=dict)
    status_end: dict[str, Int64] = Field(default_factory=dict)
    status_samples: Count = 0
    threads_running_peak: int | None = None
    status_error: str | None = None
    #: CPU seconds over the measured interval (server: from /proc, managed targets only).
    server_cpu_s: float | None = None
    client_cpu_s: float | None = None
    server_cpu_us_per_query: float | None = None
    client_cpu_us_per_query: float | None = None
    #: Context switches (voluntary + involuntary) over the measured interval: the server's
    #: threads (managed targets, /proc/PID/task/*/status) and the load processes (getrusage).
    server_ctxt_switches: Count | None = None
    client_ctxt_switches: Count | None = None
    server_ctxt_switches_per_query: NonNegative | None = None
    client_ctxt_switches_per_query: NonNegative | None = None
    #: Bytes the server process read from and wrote to storage over the measured interval
    #: (managed targets: read_bytes and write_bytes of /proc/PID/io).
    disk_read_bytes: Count | None = None
    disk_write_bytes: Count | None = None
    disk_read_kb_per_transaction: NonNegative | None = None
    disk_write_kb_per_transaction: NonNegative | None = None
    #: 1 - Key_reads/Key_read_requests and 1 - Innodb_buffer_pool_reads/
    #: Innodb_buffer_pool_read_requests from the status deltas; None when nothing was requested.
    key_cache_hit_ratio: Annotated[float, Field(ge=0, le=1)] | None = None
    buffer_pool_hit_ratio: Annotated[float, Field(ge=0, le=1)] | None = None
    #: The server's count of the measured window's transactions; None in results stored before it.
    count: ServerCount | None = None
    #: The monitor's per-second thread and pool figures (warm-up included); None in results
    #: stored before it and where the monitor could not sample.
    pool: PoolSeries | None = None

    @field_validator("options", "variables")
    @classmethod
    def _hidden_secrets(cls, v: dict[str, Any]) -> dict[str, Any]:
        # Results are stored, exported and shared like reports: a password-like option's value
        # (wsrep_sst_auth's user:password) is never kept, also when an older worker sent it.
        return hide_secrets(v)

    def public(self) -> "ServerReport":
        """This report with secret-named options and variables hidden (model_copy skips the
        validators, so copies made with it need this)."""
        return self.model_copy(update={"options": hide_secrets(self.options), "variables": hide_secrets(self.variables)})


QualityFlag = Literal["stall", "overrun", "short", "behind"]
QUALITY_VERSION = 2


class ServerAgreement(_Message):
    """Whether the client's and the server's counts of a measured window agree: they may differ by
    ``tolerance`` (max(2 %, in-flight / server count)) of the server's count; rules in
    ``services.common.results.agreement``."""

    client_transactions: Count
    server_transactions: Count
    #: Transactions begun but not finished at the window's end (``window.in_flight_at_end``; 0 without a window).
    in_flight: Count = 0
    #: |client - server| / server, and the largest share allowed.
    off: NonNegative
    tolerance: NonNegative
    agrees: bool


class FellBehind(_Message):
    """An open-loop run whose connections fell so far behind the offered rate that a load
    process held ``due`` arrivals due and not started: the run ended there, ``after_s`` into its
    measurement. A finding about the server (or the client) at that rate, not a failure to retry."""

    due: Count
    #: The rate the spec offered, transactions per second over the whole run.
    rate: NonNegative
    after_s: NonNegative


class RunQuality(_Message):
    """Whether a run's numbers hide a stall: measured seconds with no completed transaction, wall
    time past the plan (warm-up + duration), and a window too short to measure. ``flags`` is what
    reports mark; the rules are in ``services.common.results.stalls``. History of ``version``:
    1 = first version; 2 = ``completed_per_connection`` and the "short" flag."""

    version: Literal[1, 2] = QUALITY_VERSION
    #: Warm-up plus duration as the run spec planned them, and the wall time the run took.
    planned_s: Annotated[float, Field(ge=0)]
    wall_s: Annotated[float, Field(ge=0)]
    #: Wall time past the plan (0 when the run ended on time or early).
    overrun_s: Annotated[float, Field(ge=0)]
    #: Whole measured seconds, within the planned duration, in which no transaction completed.
    stalled_s: Annotated[int, Field(ge=0)] = 0
    #: The longest run of consecutive such seconds, and the second (from 0, after warm-up) it began.
    longest_stall_s: Annotated[int, Field(ge=0)] = 0
    longest_stall_at_s: Annotated[int, Field(ge=0)] | None = None
    #: False when an empty second says nothing (an open-loop rate too low to expect a
    #: transaction every second): stalled_s is then 0 by rule, not by measurement.
    stalls_checked: bool = True
    #: Transactions completed in the window per connection (closed loop; by Little's law the
    #: window over the mean response time); None for open-loop runs and version 1.
    completed_per_connection: NonNegative | None = None
    flags: list[QualityFlag] = Field(default_factory=list)
    #: The client's count against the server's (additive, no version change); None where the
    #: server's count is n/a (``server.count.reason``) or for results stored before it.
    server_agreement: ServerAgreement | None = None
    #: Set with the "behind" flag (additive, no version change): how far an open-loop run fell
    #: behind its rate when it ended; None for every other run and for results stored before it.
    behind: FellBehind | None = None


class QuiesceReport(_Message):
    """How long the worker waited before the warm-up for the target to settle from what ran
    before (``quiesce`` of a result), and what it saw at its last look."""

    waited_s: float
    settled: bool
    #: Looks at the target's status (one every half second or so).
    polls: int = 0
    #: Connections of an earlier run the worker ended (KILL) before waiting, after a failed run.
    ended_connections: int = 0
    #: At the last look: InnoDB dirty pages in percent of the buffer pool, the history list
    #: length, and pending InnoDB reads + writes + fsyncs.
    dirty_pct: float | None = None
    history_length: int | None = None
    pending_io: int | None = None
    #: What had not settled when the worker gave up (empty when settled).
    unsettled: list[str] = Field(default_factory=list)
    #: What the worker could not read, so did not wait for (e.g. no history list length).
    unknown: list[str] = Field(default_factory=list)
    #: A managed target that did not settle: whether its server was restarted.
    restarted: bool | None = None


class RunResult(_Message):
    """What one run measured. ``status`` is ok, failed (with ``error``) or cancelled."""

    schema_: Literal["benchfleet.result/1"] = Field(RESULT_SCHEMA, alias="schema")
    run_id: Annotated[str, Field(max_length=255)]
    campaign_id: Annotated[str, Field(max_length=128)]
    cell: Cell
    repetition: Annotated[int, Field(ge=1, le=MAX_RUNS)]
    status: Literal["ok", "failed", "cancelled"]
    error: str | None = None
    error_code: Int64 | None = None
    worker: Annotated[str, Field(max_length=128)]
    host: Annotated[str, Field(max_length=255)]
    attempt: Annotated[int, Field(ge=1, le=MAX_RUNS)] = 1
    started_at: float
    ended_at: float
    warmup_s: NonNegative = 0.0
    measured_s: NonNegative = 0.0
    totals: Totals = Totals()
    errors_by_code: dict[str, Count] = Field(default_factory=dict)
    series: Series = Series()
    latency: Latency = Latency()
    #: Per-connection completions and what was in flight at the window's end; None from sysbench
    #: and in results stored before the window was recorded.
    window: Window | None = None
    server: ServerReport = ServerReport()
    #: The wait for the target to settle before the warm-up; None when the target's quiesce is off.
    quiesce: QuiesceReport | None = None
    versions: dict[str, str] = Field(default_factory=dict)
    #: Stalls and overrun of a finished run; None for failed or cancelled runs and for results
    #: stored before runs were assessed.
    quality: RunQuality | None = None
    #: A part's result (merged by the collector, never stored alone), and a merged result's parts.
    part: PartReport | None = None
    parts: list[PartReport] | None = None

    def encode(self) -> bytes:
        return self.model_dump_json(by_alias=True, exclude_none=True).encode()

    @property
    def qps(self) -> float:
        return self.totals.queries / self.measured_s if self.measured_s > 0 else 0.0

    def mismatch(self, campaign_id: str, cell: Cell, repetition: int) -> str | None:
        """What of this result disagrees with the run it names (that run's campaign, cell and
        repetition, as planned), or None: a result is stored only under the run it measured."""
        if self.campaign_id != campaign_id:
            return f"campaign_id: {self.campaign_id!r} is not the campaign of run {self.run_id!r} ({campaign_id!r})"
        for name in ("target", "workload", "threads"):
            if getattr(self.cell, name) != getattr(cell, name):
                return (f"cell.{name}: {getattr(self.cell, name)!r} is not the {name} of run {self.run_id!r} "
                        f"({getattr(cell, name)!r})")
        if self.repetition != repetition:
            return f"repetition: {self.repetition} is not the repetition of run {self.run_id!r} ({repetition})"
        return None

    @property
    def tps(self) -> float:
        return self.totals.transactions / self.measured_s if self.measured_s > 0 else 0.0

    @functools.cached_property
    def work(self) -> ServerWork:
        """What the server and the load processes did per query and per transaction, derived
        from the raw counts this result holds (figures it did not record are None). Cached: a
        report reads it once per metric."""
        s = self.server
        return server_work(queries=self.totals.queries, transactions=self.totals.transactions,
                           status_deltas=s.status_deltas, server_cpu_s=s.server_cpu_s, client_cpu_s=s.client_cpu_s,
                           server_ctxt_switches=s.server_ctxt_switches, client_ctxt_switches=s.client_ctxt_switches,
                           disk_read_bytes=s.disk_read_bytes, disk_write_bytes=s.disk_write_bytes)

