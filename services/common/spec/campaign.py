"""The campaign spec: what a user writes in spec.yaml, validated before anything runs.

The targets are in spec/targets.py, the workloads and data shape in spec/workloads.py and the
shared field types in spec/fields.py; this module holds the campaign and its cross-checks.

Version history of the spec format (``spec_version``):
  1: dsn targets, data shape, workloads with options, threads, duration/warmup/repeat/seed.
     managed targets (kind: managed) joined version 1: specs without them read as before.
     a target's ``quiesce`` joined version 1 (optional; on for managed targets, off for dsn).
     Managed targets name a registered ``build`` (and a ``malloc``); their ``binary`` and
     ``basedir`` paths were removed (a spec names no path on a worker).
     ``load_hosts`` joined version 1 (optional; 1, one worker per run, by default).
     ``duration_by_threads`` joined version 1 (optional; every run measures ``duration`` without it);
     ``warmup_by_threads``, and a workload's own ``duration_by_threads`` and ``warmup_by_threads``,
     too (optional; without them every workload's runs keep the campaign's).
     ``events`` and ``percentile`` joined version 1 (sysbench's --events, --percentile); a workload's
     ``script``, ``tables`` and ``table_size``, and the options rand_spec_*, rand_pareto_h,
     rand_zipfian_exp, db_ps_mode and mysql_compression too; ``data.engine`` takes any engine name.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Field,
    Strict,
    ValidationInfo,
    field_validator,
    model_validator,
)

from services.common.spec import costs, server_options
from services.common.spec.ignore_errors import DEFAULT as IGNORE_DEFAULT
from services.common.spec.ignore_errors import IgnoreErrors
from services.common.spec.load_hosts import check_load_hosts
from services.common.spec.problems import FieldProblems, Problem, closest, did_you_mean
from services.common.spec.fields import (
    STORED,
    Frozen,
    Int,
    Name,
    Number,
    is_stored,
)
from services.common.spec.targets import PRIVATE_TARGET_FIELDS, DsnTarget, ManagedTarget, Target
from services.common.spec.windows import (MAX_THREAD_COUNTS, MAX_THREADS, Duration, DurationByThreads, Warmup,
                                          WarmupByThreads, at_threads)
from services.common.spec.workloads import DataShape, WorkloadSpec
from services.common.terminal import first_control
from services.workload.registry import WORKLOADS

SPEC_VERSION = 1

# -- bounds: every number a spec holds is finite and bounded, so nothing downstream (planning,
# the open-loop schedule, statement builders, timeouts) can loop, hang or allocate without end.
# A target's own bounds are in spec/targets.py.

#: The most runs one campaign may expand to (targets x workloads x threads x repeat, times
#: load_hosts: each part is a delivery and a result of its own): at a few seconds each that is
#: days of measuring; the scheduler publishes them in one transaction.
MAX_RUNS = 100_000
MAX_TARGETS = 64
#: Worker pools (platforms) one campaign may compare: each multiplies the runs.
MAX_POOLS = 8
MAX_WORKLOADS = 128
#: Open-loop arrivals per second for a whole run: far above what one worker can drive. Without
#: a bound, `.inf` made the arrival schedule loop for ever and a huge rate grew it without end.
MAX_RATE = 1_000_000
MAX_SEED = 2**63 - 1
#: Transactions one run may be told to measure (sysbench's --events): far more than any window holds.
MAX_EVENTS = 2**40
#: sysbench's default --percentile.
DEFAULT_PERCENTILE = 95
MAX_DESCRIPTION = 2_000



def _printable(v: str) -> str:
    # Text a report prints must not move the cursor, recolour the terminal or reorder what is
    # shown: C0/C1 controls, DEL, Unicode format controls (bidi overrides, zero-width characters)
    # and line separators are refused; a tab and a newline lay out a description.
    ch = first_control(v)
    if ch is not None:
        raise ValueError(f"holds the control character U+{ord(ch):04X}; reports print this text")
    return v


PoolName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")]


class CampaignSpec(Frozen):
    """A whole campaign: targets x workloads x threads x repetitions, compared to a baseline."""

    spec_version: Literal[1] = SPEC_VERSION
    name: Name
    description: Annotated[str, Field(max_length=MAX_DESCRIPTION), AfterValidator(_printable)] = ""
    pool: PoolName = "default"
    #: Several worker pools (platforms, e.g. two OSes on like hosts): every cell runs on every
    #: pool, and the report compares each cell's ratio between pools. Instead of ``pool``.
    pools: Annotated[list[PoolName], Field(min_length=2, max_length=MAX_POOLS)] | None = None
    #: native: benchfleet's load processes; sysbench: the sysbench 1.0 binary on the worker.
    driver: Literal["native", "sysbench"] = "native"
    targets: Annotated[list[Target], Field(min_length=1, max_length=MAX_TARGETS)]
    baseline: Name | None = None
    workloads: Annotated[list[WorkloadSpec], Field(min_length=1, max_length=MAX_WORKLOADS)]
    data: DataShape = DataShape()
    threads: Annotated[list[Annotated[Int, Field(gt=0, le=MAX_THREADS)]],
                       Field(min_length=1, max_length=MAX_THREAD_COUNTS)]
    duration: Duration
    #: sysbench's --events: a run measures this many transactions, or ``duration`` if that ends
    #: first (sysbench's --events=N --time=T); 0: no limit but the duration.
    events: Annotated[Int, Field(ge=0, le=MAX_EVENTS)] = 0
    #: sysbench's --percentile (1 to 100): the latency percentile sysbench's reports print, per
    #: second on the live dashboard; the stored histograms keep every percentile either way.
    percentile: Annotated[Int, Field(ge=1, le=100)] = DEFAULT_PERCENTILE
    #: Longer windows for higher thread counts: {from this many threads: measured time}; a run
    #: measures the duration of the highest key at or below its threads, ``duration`` below
    #: every key (a run must hold enough transactions per connection to measure its response time).
    duration_by_threads: DurationByThreads = {}
    warmup: Warmup = 0.0
    #: Longer warm-ups for higher thread counts, read as ``duration_by_threads`` is: every
    #: connection logs in and completes a transaction or two before the window opens.
    warmup_by_threads: WarmupByThreads = {}
    repeat: Annotated[Int, Field(ge=1, le=1000)] = 1
    seed: Annotated[Int, Field(ge=0, le=MAX_SEED)] = 0
    #: Open loop: transactions/s for the whole run, arriving as a Poisson stream (sysbench's
    #: --rate); latency counts from each intended start. 0: closed loop.
    rate: Annotated[Number, Field(ge=0, le=MAX_RATE)] = 0.0
    #: Also record latency per statement kind (read/write/other) besides per transaction; it
    #: costs a clock read per statement in the load loop, so it is off unless asked for.
    latency_by_kind: Annotated[bool, Strict()] = False
    #: MySQL error codes a run survives (sysbench's --mysql-ignore-errors): a list or "all". Any
    #: other error fails the run with its code, as it ends a sysbench run.
    ignore_errors: IgnoreErrors = IGNORE_DEFAULT
    #: Each run's connections split over this many workers of the pool, started at one barrier
    #: and merged into one result (services/common/messages/parts.py); 1: one worker drives the run.
    load_hosts: Annotated[Int, Field(ge=1, le=16)] = 1

    @field_validator("pools")
    @classmethod
    def _distinct_pools(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and len(set(v)) != len(v):
            raise ValueError(f"pool names must be distinct, repeated: {', '.join(sorted({p for p in v if v.count(p) > 1}))}")
        return v

    @property
    def pool_names(self) -> tuple[str, ...]:
        """Every pool the campaign runs on: ``pools``, or the one ``pool``."""
        return tuple(self.pools) if self.pools else (self.pool,)

    @property
    def run_count(self) -> int:
        """The runs the campaign publishes: every cell's repetitions on every pool."""
        return len(self.targets) * len(self.workloads) * len(self.threads) * self.repeat * len(self.pool_names)

    @field_validator("threads")
    @classmethod
    def _distinct_threads(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError("thread counts must be distinct")
        return v

    @model_validator(mode="after")
    def _cross_checks(self, info: ValidationInfo) -> "CampaignSpec":
        # Every problem at once, one line each: a user fixes them all before running validate again.
        problems = self._name_problems() + self._pool_problems() + self._shape_problems() + ([] if is_stored(info) else self._cost_problems())
        if self.driver == "sysbench":
            problems += self._sysbench_problems()
        else:
            problems += self._native_problems()
        if problems:
            raise FieldProblems(problems)
        return self

    def _name_problems(self) -> list[Problem]:
        out = []
        names = [t.name for t in self.targets]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            out.append(Problem("targets", f"names must be distinct, repeated: {', '.join(dup)}"))
        if self.baseline is not None and self.baseline not in names:
            near = closest(self.baseline, names)
            out.append(Problem("baseline", f"{self.baseline!r} is not a target{did_you_mean(near)} "
                                           f"(targets: {', '.join(names)})", near))
        keys = [w.key for w in self.workloads]
        dup = sorted({k for k in keys if keys.count(k) > 1})
        if dup:
            out.append(Problem("workloads", f"repeated {', '.join(dup)}; give each a distinct label"))
        clash = run_id_clash(names, keys)
        if clash:
            (t1, w1), (t2, w2) = clash
            out.append(Problem("targets", f"target {t1!r} with workload {w1!r} and target {t2!r} with workload "
                                          f"{w2!r} give the same run ids ({t1}.{w1}); rename one so the names do "
                                          "not join the same way with '.'"))
        return out

    def _pool_problems(self) -> list[Problem]:
        # Which of the two a user meant cannot be guessed; ``pool: default`` beside ``pools`` is the
        # field's default, not a choice (a stored spec holds both).
        if self.pools and self.pool != "default":
            return [Problem("pools", f"give either pool ({self.pool}) or pools ({', '.join(self.pools)}), not both")]
        return []

    def _cost_problems(self) -> list[Problem]:
        """What a new campaign may ask of the fleet: deliveries (parts included), the bytes their
        messages carry, and rows loaded."""
        out = []
        runs = self.run_count
        deliveries = costs.messages(runs, self.load_hosts)
        if deliveries > MAX_RUNS:
            parts = f" x {self.load_hosts} load hosts" if self.load_hosts > 1 else ""
            pools = f" x {len(self.pools)} pools" if self.pools else ""
            out.append(Problem("repeat", f"{len(self.targets)} targets x {len(self.workloads)} workloads x "
                                         f"{len(self.threads)} thread counts x {self.repeat} repetitions{pools}{parts} = "
                                         f"{deliveries:,} runs; a campaign may have at most {MAX_RUNS:,} (a run split "
                                         "over load hosts counts once per host)"))
        size = costs.message_bytes([len(t.model_dump_json()) for t in self.targets],
                                   [len(w.model_dump_json()) for w in self.workloads],
                                   len(self.threads) * self.repeat * self.load_hosts)
        if size > costs.MAX_MESSAGE_BYTES:
            out.append(Problem("workloads", f"the campaign's messages would carry {size >> 20:,} MiB of targets and "
                                            f"workloads (each run order holds its whole workload, each target goes "
                                            f"out once); a campaign may publish at most "
                                            f"{costs.MAX_MESSAGE_BYTES >> 20} MiB: fewer workload options, runs or "
                                            "repetitions"))
        rows = costs.rows_prepared(self.workloads, self.data, self.repeat) * len(self.targets)
        if rows > costs.MAX_ROWS_PREPARED:
            out.append(Problem("data", f"{len(self.targets)} targets would load {rows:,} rows in all (each "
                                       "workload's tables x table_size, again whenever a workload runs on another "
                                       f"shape, layout or auto_inc than the one before it); a campaign may load at "
                                       f"most {costs.MAX_ROWS_PREPARED:,}"))
        return out

    def _shape_problems(self) -> list[Problem]:
        out = []
        for w in self.workloads:
            most = None if w.script is not None else WORKLOADS[w.name].max_tables
            tables = w.data_for(self.data).tables
            if most is not None and tables > most:
                named = w.key if w.key == w.name else f"{w.key} ({w.name})"
                whose = "its tables" if w.tables is not None else "data.tables"
                out.append(Problem("workloads", f"{named}: runs on at most {most} table(s), as its sysbench script "
                                                f"does (it refuses --tables > 1); {whose} is {tables}"))
        if self.events and self.load_hosts > 1:
            out.append(Problem("events", "a run split over load hosts cannot share one count of transactions; "
                                         "use load_hosts: 1 with events"))
        managed = [t.name for t in self.targets if isinstance(t, ManagedTarget)]
        fresh = [w.key for w in self.workloads if w.script is None and WORKLOADS[w.name].tables.fresh]
        try:
            check_load_hosts(self.load_hosts, min(self.threads), self.driver, managed, fresh)
        except ValueError as e:
            out.append(Problem("", str(e)))  # its message starts with "load_hosts: "
        return out

    def _native_problems(self) -> list[Problem]:
        out = []
        for i, w in enumerate(self.workloads):
            if w.script is not None:
                out.append(Problem(f"workloads[{i}].script", f"{w.script}: a Lua script runs only with driver: "
                                                             "sysbench (the native driver runs registered workloads)"))
        return out

    def _sysbench_problems(self) -> list[Problem]:
        out = []
        old = sorted({w.key for w in self.workloads if w.script is None and WORKLOADS[w.name].sysbench_test is None})
        if old:
            out.append(Problem("workloads", f"{', '.join(old)}: sysbench 1.0.20 has no script running what "
                                            "sysbench 0.5 ran under these 2010 names (docs/workloads.md); use "
                                            "driver: native"))
        zipf = sorted({w.key for w in self.workloads
                       if w.option("rand_type") == "zipfian" or "rand_zipfian_exp" in w.options})
        if zipf:
            out.append(Problem("workloads", f"{', '.join(zipf)}: rand_type zipfian needs sysbench 1.1 (so does "
                                            "rand_zipfian_exp); the sysbench driver runs 1.0.20 (use driver: native)"))
        if self.latency_by_kind:
            out.append(Problem("latency_by_kind", "sysbench reports latency per event only; use driver: native"))
        for i, t in enumerate(self.targets):
            if isinstance(t, DsnTarget) and t.tls_mode == "verify":
                out.append(Problem(f"targets[{i}].tls", "sysbench 1.0.20 cannot verify the server's certificate, "
                                                        "and a password would cross the network; use driver: "
                                                        "native, or tls: preferred to accept an unverified "
                                                        "connection"))
        return out

    @property
    def baseline_name(self) -> str:
        return self.baseline or self.targets[0].name

    def target(self, name: str) -> DsnTarget | ManagedTarget:
        for t in self.targets:
            if t.name == name:
                return t
        raise KeyError(name)

    def workload(self, key: str) -> WorkloadSpec:
        for w in self.workloads:
            if w.key == key:
                return w
        raise KeyError(key)

    def duration_for(self, threads: int, workload: str | None = None) -> float:
        """The measured time of a run at ``threads`` (of ``workload``, whose own windows by thread
        count replace the campaign's from their lowest count on)."""
        own = self.workload(workload).duration_by_threads if workload is not None else None
        return at_threads(threads, self.duration, self.duration_by_threads, own)

    def warmup_for(self, threads: int, workload: str | None = None) -> float:
        """The warm-up of a run at ``threads`` (of ``workload``), read as ``duration_for`` reads
        windows."""
        own = self.workload(workload).warmup_by_threads if workload is not None else None
        return at_threads(threads, self.warmup, self.warmup_by_threads, own)

    @property
    def total_runs(self) -> int:
        return len(self.targets) * len(self.workloads) * len(self.threads) * self.repeat

    def public_dump(self) -> dict[str, Any]:
        """The spec as plain data for reports and exports: without where passwords are kept
        (password_env, password_file), which says where to look on a worker, and with the values
        of password-like server options hidden."""
        data = self.model_dump(mode="json", exclude_none=True)
        targets = []
        for target in self.targets:
            # The default TLS of a remote target depends on whether it sends a password: keep the
            # mode the runs used, so the public spec (and a campaign imported from it) says the same.
            if isinstance(target, DsnTarget) and target.tls is None and target.tls_mode == "verify" \
                    and target.ssl_ca is None:
                target = target.model_copy(update={"tls": "verify"})
            t = target.model_dump(mode="json", exclude_none=True)
            for key in PRIVATE_TARGET_FIELDS:
                t.pop(key, None)
            if isinstance(target, ManagedTarget) and t.get("options"):
                t["options"] = server_options.hide_secrets(t["options"])
            targets.append(t)
        data["targets"] = targets
        return data

    def public(self) -> "CampaignSpec":
        """The spec without where passwords are kept (see public_dump): what an export carries."""
        return CampaignSpec.model_validate(self.public_dump(), context=STORED)


def run_id_clash(targets: list[str], workloads: list[str]) -> tuple[tuple[str, str], tuple[str, str]] | None:
    """Two (target, workload) pairs whose run ids would be equal: run ids join the names with
    '.', so target `a` with workload `b.c` and target `a.b` with workload `c` would collide."""
    seen: dict[str, tuple[str, str]] = {}
    for t in targets:
        for w in workloads:
            joined = f"{t}.{w}"
            if joined in seen and seen[joined] != (t, w):
                return seen[joined], (t, w)
            seen[joined] = (t, w)
    return None
