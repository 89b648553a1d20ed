"""The campaign spec: what a user writes in spec.yaml, validated before anything runs.

Version history of the spec format (``spec_version``):
  1: dsn targets, data shape, workloads with options, threads, duration/warmup/repeat/seed.
     managed targets (kind: managed) joined version 1: specs without them read as before.
     a target's ``quiesce`` joined version 1 (optional; on for managed targets, off for dsn).
     Managed targets name a registered ``build`` (and a ``malloc``); their ``binary`` and
     ``basedir`` paths were removed (a spec names no path on a worker).
     ``load_hosts`` joined version 1 (optional; 1, one worker per run, by default).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PlainSerializer,
    Strict,
    Tag,
    field_validator,
    model_validator,
)

from services.common import server_options
from services.common.durations import format_duration, parse_duration
from services.common.ignore_errors import DEFAULT as IGNORE_DEFAULT
from services.common.ignore_errors import IgnoreErrors
from services.common.parts import check_load_hosts
from services.common.server_options import CPU_LIST_PATTERN
from services.workload.registry import OPTION_LIMITS, RAND_TYPES, WORKLOADS

SPEC_VERSION = 1

#: sysbench options that change the prepared schema, which the worker's prepare does not vary yet.
PREPARE_FIXED = frozenset({"secondary", "create_secondary"})

#: Names that end up in SQL identifiers, queue names and metric labels: strict on purpose,
#: so no SQL or routing key is ever built from arbitrary text.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
IDENT_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"

# -- bounds: every number a spec holds is finite and bounded, so nothing downstream (planning,
# the open-loop schedule, statement builders, timeouts) can loop, hang or allocate without end.

#: The most runs one campaign may expand to (targets x workloads x threads x repeat): at a few
#: seconds each that is days of measuring; the scheduler publishes them in one transaction.
MAX_RUNS = 100_000
#: Concurrent connections of one run (a client port range; the worker also needs the fds).
MAX_THREADS = 65_535
MAX_TARGETS = 64
MAX_WORKLOADS = 128
MAX_THREAD_COUNTS = 1024
#: The longest duration or warm-up a spec may ask for (a week). The scheduler also refuses runs
#: longer than its settings' max_run_s (2 h by default), where the settings are known.
MAX_DURATION_S = 7 * 86_400
#: start_timeout and stop_timeout of a managed server.
MAX_TIMEOUT_S = 3_600
#: Open-loop arrivals per second for a whole run: far above what one worker can drive. Without
#: a bound, `.inf` made the arrival schedule loop for ever and a huge rate grew it without end.
MAX_RATE = 1_000_000
MAX_SEED = 2**63 - 1
MAX_DESCRIPTION = 2_000
#: The highest CPU number in a CPU list (Linux's largest NR_CPUS is 8192).
MAX_CPU = 8_191
MAX_SERVER_OPTIONS = 200
#: The largest InnoDB history list length a quiesce may accept: purge caught up means far below.
MAX_HISTORY = 1_000_000_000

#: Schemas a target's database may never be: the server's own. Prepare creates and drops
#: tables in the target database. The results DB's name is refused too, by the scheduler and
#: the worker, which know it from their settings.
SYSTEM_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})

#: Text a report prints must not move the cursor, recolour the terminal or reorder what is
#: shown: C0/C1 control characters (tab and newline aside), DEL and Unicode bidi controls.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _number_as_name(v: Any) -> Any:
    # The seeds name targets "8" and "32", and `server_cpus: 0` is a CPU list; unquoted in YAML
    # those are numbers. Booleans stay booleans (and are refused).
    return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


def _cpus_in_range(v: str) -> str:
    cpus = server_options.parse_cpus(v)  # ValueError names a range that goes backwards
    if cpus and cpus[-1] > MAX_CPU:
        raise ValueError(f"CPU {cpus[-1]} is above {MAX_CPU}")
    return v


def _printable(v: str) -> str:
    m = _UNPRINTABLE.search(v)
    if m:
        raise ValueError(f"holds the control character U+{ord(m.group()):04X}; reports print this text")
    return v


def _not_system_schema(v: str) -> str:
    if v.lower() in SYSTEM_SCHEMAS:
        raise ValueError(f"{v} is a system schema of the server; prepare would create and drop tables in it")
    return v


Name = Annotated[str, BeforeValidator(_number_as_name), Field(pattern=NAME_PATTERN)]
Identifier = Annotated[str, Field(pattern=IDENT_PATTERN)]
#: A target's database: an identifier that is not one of the server's own schemas.
Database = Annotated[str, Field(pattern=IDENT_PATTERN), AfterValidator(_not_system_schema)]
#: Whole numbers are whole numbers: `true`, `5.0` and `"5"` are refused, not converted.
Int = Annotated[int, Strict()]
#: A finite number (an int is accepted); `.inf`, `.nan` and booleans are refused.
Number = Annotated[float, Strict(), Field(allow_inf_nan=False)]
Seconds = Annotated[
    float,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str),
]
CpuList = Annotated[str, BeforeValidator(_number_as_name), Field(max_length=255, pattern=CPU_LIST_PATTERN),
                    AfterValidator(_cpus_in_range)]
#: An absolute path without spaces or shell characters (sockets, CA files).
PATH_PATTERN = r"^/[A-Za-z0-9_.+/-]{1,255}$"
AbsolutePath = Annotated[str, Field(pattern=PATH_PATTERN)]
#: A password file as a worker finds it: a path that may start with ~ or hold ${VAR}s.
PASSWORD_FILE_PATTERN = r"^[A-Za-z0-9_.+/~${}-]{1,255}$"
#: Host names, IPv4 and IPv6 addresses: nothing that could be read as another argument.
HOST_PATTERN = r"^[A-Za-z0-9:][A-Za-z0-9_.:-]{0,252}$"
#: Hosts that never leave the machine: no TLS needed for a password to stay private.
LOCAL_HOSTS = frozenset({"localhost", "::1"})


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _quiesce_shorthand(v: Any) -> Any:
    # `quiesce: true|false` is the short form of the block with its defaults.
    if isinstance(v, bool):
        return {"enabled": v}
    if v is not None and not isinstance(v, (dict, BaseModel)):
        raise ValueError("must be true, false or a mapping of enabled, timeout, max_dirty_pct, max_history")
    return v


class Quiesce(_Frozen):
    """Waiting, before each run's warm-up, until the target has settled from what ran before it:
    dirty pages flushed, purge caught up, no pending I/O, no statement of an earlier run running
    (services/worker/target/quiesce.py). A target that does not settle within ``timeout`` fails
    the run naming what was still going on."""

    enabled: Annotated[bool, Strict()] = True
    timeout: Annotated[Seconds, Field(gt=0, le=MAX_TIMEOUT_S)] = 300.0
    #: InnoDB dirty pages, in percent of the buffer pool, at or below which flushing has caught up.
    max_dirty_pct: Annotated[Number, Field(ge=0, le=100)] = 1.0
    #: InnoDB history list length (undo logs not yet purged) at or below which purge has caught up.
    max_history: Annotated[Int, Field(ge=0, le=MAX_HISTORY)] = 1000


#: Managed targets settle by default (the worker owns the server); dsn targets when asked.
QUIESCE_ON = Quiesce()
QUIESCE_OFF = Quiesce(enabled=False)
QuiesceField = Annotated[Quiesce, BeforeValidator(_quiesce_shorthand, json_schema_input_type=Union[bool, Quiesce])]


class DsnTarget(_Frozen):
    """An existing server reached over TCP (or a socket); benchfleet never starts or stops it."""

    kind: Literal["dsn"] = "dsn"
    name: Name
    host: Annotated[str, Field(pattern=HOST_PATTERN)] = "127.0.0.1"
    port: Annotated[Int, Field(ge=1, le=65535)] = 3306
    socket: AbsolutePath | None = None
    user: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.@-]{1,80}$")] = "root"
    #: Only the empty password may be written in a spec: run messages travel through the
    #: broker and are logged, so a real password is named by password_env/password_file and
    #: read by the worker from its own environment. Which names a worker accepts is the
    #: worker operator's choice (BENCHFLEET_TARGET_PASSWORD_ENV / _DIRS), never the fleet's own.
    password: Literal[""] | None = None
    password_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")] | None = None
    password_file: Annotated[str, Field(pattern=PASSWORD_FILE_PATTERN)] | None = None
    database: Database = "sbtest"
    #: TLS towards the target: verify (certificate and host name, against ssl_ca or the
    #: worker's CA bundle), preferred (TLS when the server offers it, unverified) or disabled.
    #: Default: verify when ssl_ca is given or a password crosses the network (a remote host
    #: with password_env or password_file), else preferred. ``ssl_disabled: true`` is the older
    #: spelling of disabled.
    tls: Literal["verify", "preferred", "disabled"] | None = None
    ssl_ca: AbsolutePath | None = None
    ssl_disabled: Annotated[bool, Strict()] = False
    #: Off unless asked: the server is not the fleet's, and others may keep it busy.
    quiesce: QuiesceField = QUIESCE_OFF

    @field_validator("password", mode="before")
    @classmethod
    def _no_literal_password(cls, v: Any) -> Any:
        if v not in (None, ""):
            raise ValueError(
                "a password may not be written in the spec; put it in an environment "
                "variable on the workers and name it with password_env (or use password_file)"
            )
        return v

    @model_validator(mode="after")
    def _one_password_source(self) -> "DsnTarget":
        given = [f for f in ("password", "password_env", "password_file") if getattr(self, f) is not None]
        if len(given) > 1:
            raise ValueError(f"give only one of {', '.join(given)}")
        # Refused by every worker (services/worker/target/secret_policy.py): say so at validate.
        if self.password_env is not None and self.password_env.upper().startswith("BENCHFLEET_"):
            raise ValueError(f"password_env: {self.password_env} is one of the fleet's own variables; no worker "
                             "lets a spec name those")
        if self.password_file is not None and "${BENCHFLEET_SECRETS}" in self.password_file:
            raise ValueError("password_file: the fleet's secrets directory holds the fleet's own passwords; no "
                             "worker lets a spec name it")
        if self.ssl_disabled and self.tls not in (None, "disabled"):
            raise ValueError(f"tls: {self.tls} contradicts ssl_disabled: true")
        if self.tls in ("disabled", "preferred") and self.ssl_ca is not None:
            raise ValueError(f"ssl_ca: given with tls: {self.tls}; a CA is for tls: verify")
        return self

    @property
    def remote(self) -> bool:
        """Whether connections leave this machine (TCP to a host other than loopback)."""
        return self.socket is None and not (self.host in LOCAL_HOSTS or self.host.startswith("127."))

    @property
    def tls_mode(self) -> Literal["verify", "preferred", "disabled"]:
        """The TLS the worker uses: the spec's, else verify for a password sent to a remote host."""
        if self.tls is not None:
            return self.tls
        if self.ssl_disabled:
            return "disabled"
        if self.ssl_ca is not None:
            return "verify"
        sends_password = self.password_env is not None or self.password_file is not None
        return "verify" if self.remote and sends_password else "preferred"


def _target_kind(v: Any) -> str:
    if isinstance(v, dict):
        return str(v.get("kind", "dsn"))
    return getattr(v, "kind", "dsn")


ServerOptionValue = Union[bool, int, float, str, None]


class ManagedTarget(_Frozen):
    """A mariadbd (or mysqld) of a registered build the worker starts itself with `--no-defaults`
    and ``options``, on its own datadir, port and socket, pinned to ``server_cpus``."""

    kind: Literal["managed"]
    name: Name
    #: The server build: a name registered on the workers (`worker builds add`), never a path;
    #: default: the worker's system server. The scheduler checks the name against the builds the
    #: pool's workers announced; a worker without it refuses the run before starting anything.
    build: Name | None = None
    #: The allocator preloaded into the server: glibc's own, or Debian's libjemalloc2 /
    #: libtcmalloc-minimal4 (LD_PRELOAD, from the worker's library directories only).
    malloc: Literal["glibc", "jemalloc", "tcmalloc"] = "glibc"
    #: Passed as --name=value in this order; names are checked against `--help --verbose`.
    #: Options that name paths or load code are reserved (server_options.reserved_problem).
    options: Annotated[dict[str, ServerOptionValue], Field(max_length=MAX_SERVER_OPTIONS)] = Field(default_factory=dict)
    #: CPU lists like "0" or "2-3"; default: the worker splits its CPUs (server first half).
    server_cpus: CpuList | None = None
    client_cpus: CpuList | None = None
    database: Database = "sbtest"
    start_timeout: Annotated[Seconds, Field(gt=0, le=MAX_TIMEOUT_S)] = 60.0
    stop_timeout: Annotated[Seconds, Field(gt=0, le=MAX_TIMEOUT_S)] = 60.0
    quiesce: QuiesceField = QUIESCE_ON

    @model_validator(mode="before")
    @classmethod
    def _no_paths(cls, v: Any) -> Any:
        # Removed fields get their own message: the spec names a build, the worker knows its path.
        if isinstance(v, dict):
            for key in ("binary", "basedir"):
                if key in v:
                    raise ValueError(f"{key}: a spec names no path on a worker; register the server on the workers "
                                     "(worker builds add NAME ...) and name it with build: NAME")
        return v

    @field_validator("options")
    @classmethod
    def _strict_options(cls, v: dict[str, Any]) -> dict[str, Any]:
        seen: dict[str, str] = {}
        for name, value in v.items():
            problem = server_options.name_problem(name) or server_options.value_problem(value)
            if problem:
                raise ValueError(f"{shown(name)}: {problem}")
            base = server_options.normalise(name)
            if base in seen:
                raise ValueError(f"{name}: same option as {seen[base]}")
            seen[base] = name
        return v


#: A target is an existing server (dsn, the default kind) or a managed one.
Target = Annotated[
    Union[Annotated[DsnTarget, Tag("dsn")], Annotated[ManagedTarget, Tag("managed")]],
    Discriminator(_target_kind),
]


class DataShape(_Frozen):
    """The sbtest tables a workload runs on (sysbench's --tables, --table-size, engine)."""

    tables: Annotated[Int, Field(ge=1, le=1024)] = 1
    table_size: Annotated[Int, Field(ge=1, le=2_000_000_000)] = 10_000
    engine: Literal["InnoDB", "MyISAM", "Aria"] = "InnoDB"

    @field_validator("engine", mode="before")
    @classmethod
    def _engine_case(cls, v: Any) -> Any:
        known = {"innodb": "InnoDB", "myisam": "MyISAM", "aria": "Aria"}
        return known.get(str(v).lower(), v) if isinstance(v, str) else v

    def marker(self, auto_inc: bool = True) -> str:
        """A short string that identifies the shape, stored beside prepared tables. ``auto_inc``
        False (sysbench's --auto_inc=off: id without AUTO_INCREMENT) is another table shape."""
        return f"{self.tables}x{self.table_size}:{self.engine}" + ("" if auto_inc else ":noautoinc")


class WorkloadSpec(_Frozen):
    """One test of the campaign, with sysbench option overrides and a row label for tables."""

    name: Annotated[str, Field(max_length=64)]
    label: Annotated[str, Field(pattern=NAME_PATTERN)] | None = None
    options: dict[str, Annotated[int, Strict()] | Annotated[float, Strict()] | Annotated[bool, Strict()] | str] = Field(
        default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, v: Any) -> Any:
        return {"name": v} if isinstance(v, str) else v

    @field_validator("name")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in WORKLOADS:
            raise ValueError(f"unknown workload {shown(v)!r}; known: {', '.join(sorted(WORKLOADS))}")
        return v

    @model_validator(mode="after")
    def _options_known(self) -> "WorkloadSpec":
        accepted = WORKLOADS[self.name].options
        for key, value in self.options.items():
            if key not in accepted:
                raise ValueError(f"options.{shown(key)}: not an option of {self.name} "
                                 f"(accepted: {', '.join(sorted(accepted))})")
            default = accepted[key]
            if isinstance(default, bool) and not isinstance(value, bool):
                raise ValueError(f"options.{key}: must be true or false")
            if isinstance(default, int) and not isinstance(default, bool):
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise ValueError(f"options.{key}: must be a whole number >= 0")
                if value > OPTION_LIMITS[key]:
                    raise ValueError(f"options.{key}: must be <= {OPTION_LIMITS[key]:,}")
            if key == "rand_type" and value not in RAND_TYPES:
                raise ValueError(f"options.rand_type: must be one of {', '.join(RAND_TYPES)}")
            if key in PREPARE_FIXED and value != default:
                # The worker prepares sysbench's default table shape only; refusing beats a run
                # that silently measures another schema than the one asked for.
                raise ValueError(f"options.{key}: only the sysbench default ({str(default).lower()}) is "
                                 "supported; the worker's prepare builds that table shape")
        return self

    @property
    def key(self) -> str:
        """The row name in tables and the workload part of run ids."""
        return self.label or self.name

    def option(self, key: str) -> Any:
        """The effective value of a sysbench option: the override, else sysbench's default."""
        return self.options.get(key, WORKLOADS[self.name].options[key])


class CampaignSpec(_Frozen):
    """A whole campaign: targets x workloads x threads x repetitions, compared to a baseline."""

    spec_version: Literal[1] = SPEC_VERSION
    name: Name
    description: Annotated[str, Field(max_length=MAX_DESCRIPTION), AfterValidator(_printable)] = ""
    pool: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")] = "default"
    #: native: benchfleet's load processes; sysbench: the sysbench 1.0 binary on the worker.
    driver: Literal["native", "sysbench"] = "native"
    targets: Annotated[list[Target], Field(min_length=1, max_length=MAX_TARGETS)]
    baseline: Name | None = None
    workloads: Annotated[list[WorkloadSpec], Field(min_length=1, max_length=MAX_WORKLOADS)]
    data: DataShape = DataShape()
    threads: Annotated[list[Annotated[Int, Field(gt=0, le=MAX_THREADS)]],
                       Field(min_length=1, max_length=MAX_THREAD_COUNTS)]
    duration: Annotated[Seconds, Field(gt=0, le=MAX_DURATION_S)]
    warmup: Annotated[Seconds, Field(le=MAX_DURATION_S)] = 0.0
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
    #: and merged into one result (services/common/parts.py); 1: one worker drives the run.
    load_hosts: Annotated[Int, Field(ge=1, le=16)] = 1

    @field_validator("threads")
    @classmethod
    def _distinct_threads(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError("thread counts must be distinct")
        return v

    @model_validator(mode="after")
    def _cross_checks(self) -> "CampaignSpec":
        names = [t.name for t in self.targets]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"targets: names must be distinct, repeated: {', '.join(dup)}")
        if self.baseline is not None and self.baseline not in names:
            raise ValueError(f"baseline: {self.baseline!r} is not a target (targets: {', '.join(names)})")
        keys = [w.key for w in self.workloads]
        dup = sorted({k for k in keys if keys.count(k) > 1})
        if dup:
            raise ValueError(f"workloads: repeated {', '.join(dup)}; give each a distinct label")
        runs = len(self.targets) * len(self.workloads) * len(self.threads) * self.repeat
        if runs > MAX_RUNS:
            raise ValueError(f"repeat: {len(self.targets)} targets x {len(self.workloads)} workloads x "
                             f"{len(self.threads)} thread counts x {self.repeat} repetitions = {runs:,} runs; "
                             f"a campaign may have at most {MAX_RUNS:,}")
        clash = run_id_clash(names, keys)
        if clash:
            (t1, w1), (t2, w2) = clash
            raise ValueError(f"targets: target {t1!r} with workload {w1!r} and target {t2!r} with workload "
                             f"{w2!r} give the same run ids ({t1}.{w1}); rename one so the names do not "
                             "join the same way with '.'")
        for w in self.workloads:
            most = WORKLOADS[w.name].max_tables
            if most is not None and self.data.tables > most:
                named = w.key if w.key == w.name else f"{w.key} ({w.name})"
                raise ValueError(f"workloads: {named}: runs on at most {most} table(s), as its sysbench script does "
                                 f"(it refuses --tables > 1); data.tables is {self.data.tables}")
        managed = [t.name for t in self.targets if isinstance(t, ManagedTarget)]
        fresh = [w.key for w in self.workloads if WORKLOADS[w.name].tables.fresh]
        check_load_hosts(self.load_hosts, min(self.threads), self.driver, managed, fresh)
        if self.driver == "sysbench":
            old = sorted({w.key for w in self.workloads if WORKLOADS[w.name].sysbench_test is None})
            if old:
                raise ValueError(f"workloads: {', '.join(old)}: sysbench 1.0.20 has no script running what sysbench "
                                 "0.5 ran under these 2010 names (docs/workloads.md); use driver: native")
            zipf = sorted({w.key for w in self.workloads if w.option("rand_type") == "zipfian"})
            if zipf:
                raise ValueError(f"workloads: {', '.join(zipf)}: rand_type zipfian needs sysbench 1.1; "
                                 "the sysbench driver runs 1.0.20 (use driver: native)")
            if self.latency_by_kind:
                raise ValueError("latency_by_kind: sysbench reports latency per event only; use driver: native")
            for i, t in enumerate(self.targets):
                if isinstance(t, DsnTarget) and t.tls_mode == "verify":
                    raise ValueError(f"targets[{i}].tls: sysbench 1.0.20 cannot verify the server's certificate, "
                                     "and a password would cross the network; use driver: native, or tls: "
                                     "preferred to accept an unverified connection")
        return self

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

    @property
    def total_runs(self) -> int:
        return len(self.targets) * len(self.workloads) * len(self.threads) * self.repeat

    def public_dump(self) -> dict[str, Any]:
        """The spec as plain data for reports and exports: without where passwords are kept
        (password_env, password_file), which says where to look on a worker."""
        data = self.model_dump(mode="json", exclude_none=True)
        for t in data.get("targets", []):
            for key in PRIVATE_TARGET_FIELDS:
                t.pop(key, None)
        return data


#: Target fields that locate a secret on the workers: kept out of reports and exports.
PRIVATE_TARGET_FIELDS = ("password", "password_env", "password_file")


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


def shown(text: str, limit: int = 40) -> str:
    """``text`` cut to ``limit`` characters for an error message (a key may be a megabyte long)."""
    return text if len(text) <= limit else text[:limit] + "..."
