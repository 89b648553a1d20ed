"""Messages on the bus: versioned JSON, defined once, decoded with errors that name the field.

Schema history (the ``schema`` field of each message):
  benchfleet.run/1         a run spec the scheduler publishes for a worker
  benchfleet.run-event/1   a worker's "started"/"progress" note about a run (run_event.py: /2 too)
  benchfleet.result/1      what a run measured (or why it failed)
  benchfleet.worker-builds/1  a worker's builds (host, pool), sent on the results exchange at
                           connect and when its registry changes; the collector keeps the last
  benchfleet.worker/1      a worker's /metrics address ("up"), or its withdrawal ("down"), for
                           the collector's Prometheus service discovery
  benchfleet.part/1        a barrier signal between the workers of one run's parts (parts.py)
Additive, optional fields (no version change): run ``rate``, ``latency_by_kind``,
``ignore_errors`` and ``part``; result ``part``, ``parts`` (spec ``load_hosts``), ``series.queue``,
``series.ignored_errors``, ``series.reconnects``, ``latency.by_kind``, ``quiesce``, and ``server.build``, ``server.build_version``,
``server.server_sha256``, ``server.malloc``; result ``server``: context switches
(``server_ctxt_switches``, ``client_ctxt_switches`` and per query), disk bytes (``disk_read_bytes``,
``disk_write_bytes`` and KB per transaction) and hit ratios (``key_cache_hit_ratio``,
``buffer_pool_hit_ratio``).
Result ``quality`` (stalls and overrun, ``RunQuality``) carries its own ``version`` (history in
its docstring); results without it were stored before runs were assessed.

Bounds (no version change: no message a valid spec and an honest worker make is refused): a body
of at most MAX_BODY_BYTES, JSON nested at most MAX_JSON_DEPTH levels, every number finite and every
whole number within 64 bits, counts non-negative, and a run spec whose run id, cell, target and
workload agree with each other.
"""

from __future__ import annotations

import functools
import json
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator

from services.common.builds import BuildInfo
from services.common.errors import DecodeError
from services.common.ignore_errors import DEFAULT as IGNORE_DEFAULT
from services.common.ignore_errors import IgnoreErrors
from services.common.parts import PART_SCHEMA, PartOf, PartReport, PartSignal
from services.common.run_event import EVENT_SCHEMA, EVENT_SCHEMA_V2, RunEvent
from services.common.server_options import hide_secrets
from services.common.server_work import ServerWork, server_work
from services.common.wire_checks import check_numbers as _check_numbers
from services.common.wire_checks import nested_deeper_than as _nested_deeper_than
from services.common.wire_checks import shown as _shown
from services.common.spec import MAX_DURATION_S, MAX_RATE, MAX_RUNS, MAX_THREADS
from services.common.spec_targets import ServerOptionValue, Target
from services.common.spec_workloads import DataShape, WorkloadSpec

RUN_SCHEMA = "benchfleet.run/1"
RESULT_SCHEMA = "benchfleet.result/1"
BUILDS_SCHEMA = "benchfleet.worker-builds/1"
WORKER_SCHEMA = "benchfleet.worker/1"
#: The largest run seed: sysbench's --rand-seed is a C int, and its 0 means "seed from the clock".
MAX_RUN_SEED = 2**31 - 1
#: The largest body a consumer decodes. A 2-hour run's result, five per-second series of 7,200
#: counts and a histogram, is about 130 kB; a worker refuses to send a bigger one than this
#: (services/worker/verdict.py).
MAX_BODY_BYTES = 32 * 2**20
#: How deeply a message's JSON may nest: a result nests 5 levels, and json.loads would raise
#: RecursionError (not ValueError) on a body nested a few thousand levels deep.
MAX_JSON_DEPTH = 32
#: Whole numbers anywhere in a message fit a signed 64-bit integer (the results DB's BIGINT), so
#: storing never overflows and q/s never meets an int too big for a float.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

#: A count: non-negative, below 2^63.
Count = Annotated[int, Field(ge=0, le=INT64_MAX)]
Int64 = Annotated[int, Field(ge=INT64_MIN, le=INT64_MAX)]
#: Seconds and milliseconds measured: non-negative (finite, as every float of a message).
NonNegative = Annotated[float, Field(ge=0)]


def run_id_of(campaign_id: str, cell: "Cell", repetition: int) -> str:
    """The run id of a campaign's cell and repetition: deterministic, so a redelivered run
    replaces its result instead of adding one."""
    return f"{campaign_id}.{cell.target}.{cell.workload}.t{cell.threads}.r{repetition}"


class _Message(BaseModel):
    # No NaN or infinity in any float field: JSON has no such numbers, and SQL refuses them.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    def encode(self) -> bytes:
        return self.model_dump_json(exclude_none=True).encode()


class Cell(_Message):
    """(target, workload, threads): the unit a comparison table compares."""

    #: The results DB's columns hold 64 characters (spec names are shorter still).
    target: Annotated[str, Field(min_length=1, max_length=64)]
    workload: Annotated[str, Field(min_length=1, max_length=64)]
    threads: Annotated[int, Field(gt=0, le=MAX_THREADS)]


class RunSpec(_Message):
    """One run for a worker: everything it needs, so workers share no state with the scheduler."""

    schema_: Literal["benchfleet.run/1"] = Field(RUN_SCHEMA, alias="schema")
    run_id: Annotated[str, Field(max_length=255)]
    campaign_id: Annotated[str, Field(max_length=128)]
    campaign_name: str
    seq: Annotated[int, Field(ge=0, le=MAX_RUNS)]
    total_runs: Annotated[int, Field(ge=1, le=MAX_RUNS)]
    cell: Cell
    repetition: Annotated[int, Field(ge=1, le=MAX_RUNS)]
    target: Target
    workload: WorkloadSpec
    data: DataShape
    driver: str = "native"
    #: Bounded as in the spec, so a worker refuses a message no valid spec could have made.
    duration: Annotated[float, Field(gt=0, le=MAX_DURATION_S, allow_inf_nan=False)]
    warmup: Annotated[float, Field(ge=0, le=MAX_DURATION_S, allow_inf_nan=False)]
    seed: Annotated[int, Field(ge=0, le=MAX_RUN_SEED)]
    published_at: float
    #: Open loop: transactions/s for the whole run (Poisson arrivals). None (left out of the
    #: JSON, so workers that predate it still accept the message): closed loop.
    rate: Annotated[float, Field(ge=0, le=MAX_RATE, allow_inf_nan=False)] | None = None
    #: Also time each statement, per kind; None (left out of the message) when not asked.
    latency_by_kind: bool | None = None
    #: The MySQL errors the run survives; None (left out): sysbench's default list.
    ignore_errors: IgnoreErrors | None = None
    #: One part of a run spread over several load hosts (spec ``load_hosts``); None: the whole run.
    part: PartOf | None = None

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    @model_validator(mode="after")
    def _agrees_with_its_cell(self) -> "RunSpec":
        # A worker measures ``target`` with ``workload`` and files the result under ``cell`` and
        # ``run_id``: a spec where they disagree would store one target's numbers as another's.
        if self.cell.target != self.target.name:
            raise ValueError(f"cell.target: {self.cell.target!r} is not the run's target {self.target.name!r}")
        if self.cell.workload != self.workload.key:
            raise ValueError(f"cell.workload: {self.cell.workload!r} is not the run's workload {self.workload.key!r}")
        expected = run_id_of(self.campaign_id, self.cell, self.repetition)
        if self.run_id != expected:
            raise ValueError(f"run_id: {self.run_id!r} is not the id of its campaign, cell and repetition ({expected!r})")
        return self

    def encode(self) -> bytes:
        return self.model_dump_json(by_alias=True, exclude_none=True).encode()

    @property
    def ignored_errors(self) -> IgnoreErrors:
        """The errors this run survives, sysbench's default list when the message names none."""
        return IGNORE_DEFAULT if self.ignore_errors is None else self.ignore_errors


class WorkerAnnouncement(_Message):
    """Where a worker serves /metrics, sent on the results queue at every (re)connect ("up") and
    at a clean stop ("down"): the collector lists the workers that are up to Prometheus."""

    schema_: Literal["benchfleet.worker/1"] = Field(WORKER_SCHEMA, alias="schema")
    worker: Annotated[str, Field(min_length=1, max_length=128)]
    pool: Annotated[str, Field(min_length=1, max_length=64)]
    state: Literal["up", "down"]
    #: What Prometheus scrapes: ``host:port`` or ``[v6]:port``.
    address: Annotated[str, Field(min_length=3, max_length=255, pattern=r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):[0-9]{1,5}$")]
    at: float

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    def encode(self) -> bytes:
        return self.model_dump_json(by_alias=True, exclude_none=True).encode()


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


class Latency(_Message):
    """Transaction latency in milliseconds, from the merged histogram."""

    p50_ms: NonNegative = 0.0
    p95_ms: NonNegative = 0.0
    p99_ms: NonNegative = 0.0
    max_ms: NonNegative = 0.0
    histogram: dict[str, Any] = Field(default_factory=dict)
    #: Statement latency per kind (read, write, other), each with the fields above, when the
    #: campaign asked for it (spec ``latency_by_kind``).
    by_kind: dict[str, dict[str, Any]] = Field(default_factory=dict)


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


QualityFlag = Literal["stall", "overrun"]
QUALITY_VERSION = 1


class RunQuality(_Message):
    """Whether a run's numbers hide a stall: measured seconds with no completed transaction, and
    wall time past the plan (warm-up + duration). ``flags`` is what reports mark; the rules are
    in ``services.common.stalls``. History of ``version``: 1 = first version."""

    version: Literal[1] = QUALITY_VERSION
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
    flags: list[QualityFlag] = Field(default_factory=list)


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

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

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


class WorkerBuilds(_Message):
    """A worker's announcement of the builds registered on its host, for the scheduler to check
    specs against (stored by the collector, one row per host and pool, the last one wins)."""

    schema_: Literal["benchfleet.worker-builds/1"] = Field(BUILDS_SCHEMA, alias="schema")
    worker: str
    host: str
    pool: str
    builds: list[BuildInfo] = Field(default_factory=list)
    at: float

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    def encode(self) -> bytes:
        return self.model_dump_json(by_alias=True, exclude_none=True).encode()

    def names(self) -> list[str]:
        return [b.name for b in self.builds]


Message = Union[RunSpec, RunEvent, RunResult, WorkerBuilds, WorkerAnnouncement, PartSignal]
_BY_SCHEMA: dict[str, type[BaseModel]] = {RUN_SCHEMA: RunSpec, EVENT_SCHEMA: RunEvent, RESULT_SCHEMA: RunResult,
                                          BUILDS_SCHEMA: WorkerBuilds, WORKER_SCHEMA: WorkerAnnouncement,
                                          PART_SCHEMA: PartSignal}
_BY_SCHEMA[EVENT_SCHEMA_V2] = RunEvent  # "measuring" (run_event.py)
_ADAPTERS = {k: TypeAdapter(v) for k, v in _BY_SCHEMA.items()}


def decode(body: bytes | str, expect: tuple[type[BaseModel], ...] | None = None) -> Any:
    """Decode a message by its ``schema``; raise DecodeError naming the wrong field, whatever
    the body holds (never RecursionError, OverflowError or a bare ValueError)."""
    raw = body.encode() if isinstance(body, str) else body
    if len(raw) > MAX_BODY_BYTES:
        raise DecodeError("", f"body of {len(raw):,} bytes is above the {MAX_BODY_BYTES:,}-byte limit")
    if _nested_deeper_than(raw, MAX_JSON_DEPTH):
        raise DecodeError("", f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise DecodeError("", f"not JSON: {e}") from e
    if not isinstance(data, dict):
        raise DecodeError("", "not a JSON object")
    _check_numbers(data, "")
    schema = data.get("schema")
    if schema not in _BY_SCHEMA:
        known = ", ".join(sorted(_BY_SCHEMA))
        raise DecodeError("schema", f"unknown or missing schema {_shown(schema)} (known: {known})")
    cls = _BY_SCHEMA[schema]
    if expect is not None and cls not in expect:
        raise DecodeError("schema", f"{schema} is not expected on this queue")
    try:
        return _ADAPTERS[schema].validate_python(data)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise DecodeError(field, err["msg"].removeprefix("Value error, ")) from e
    except (TypeError, ArithmeticError, RecursionError) as e:  # a validator tripped by a hostile value
        raise DecodeError("", f"cannot decode: {type(e).__name__}: {e}") from e
