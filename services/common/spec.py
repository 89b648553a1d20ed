"""The campaign spec: what a user writes in spec.yaml, validated before anything runs.

Version history of the spec format (``spec_version``):
  1: dsn targets, data shape, workloads with options, threads, duration/warmup/repeat/seed.
     managed targets (kind: managed) joined version 1: specs without them read as before.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PlainSerializer,
    Tag,
    field_validator,
    model_validator,
)

from services.common import server_options
from services.common.durations import format_duration, parse_duration
from services.common.server_options import CPU_LIST_PATTERN
from services.workload.registry import RAND_TYPES, WORKLOADS, canonical_name

SPEC_VERSION = 1

#: sysbench options that change the prepared schema, which the worker's prepare does not vary yet.
PREPARE_FIXED = frozenset({"secondary", "create_secondary"})

#: Names that end up in SQL identifiers, queue names and metric labels: strict on purpose,
#: so no SQL or routing key is ever built from arbitrary text.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
IDENT_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"

def _number_as_name(v: Any) -> Any:
    # The seeds name targets "8" and "32"; unquoted in YAML those are numbers.
    return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


Name = Annotated[str, BeforeValidator(_number_as_name), Field(pattern=NAME_PATTERN)]
Identifier = Annotated[str, Field(pattern=IDENT_PATTERN)]
Seconds = Annotated[
    float,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str),
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DsnTarget(_Frozen):
    """An existing server reached over TCP (or a socket); benchfleet never starts or stops it."""

    kind: Literal["dsn"] = "dsn"
    name: Name
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=1, le=65535)] = 3306
    socket: str | None = None
    user: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.@-]{1,80}$")] = "root"
    #: Only the empty password may be written in a spec: run messages travel through the
    #: broker and are logged, so a real password is named by password_env/password_file and
    #: read by the worker from its own environment.
    password: Literal[""] | None = None
    password_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    password_file: str | None = None
    database: Identifier = "sbtest"
    ssl_ca: str | None = None
    ssl_disabled: bool = False

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
        return self


def _target_kind(v: Any) -> str:
    if isinstance(v, dict):
        return str(v.get("kind", "dsn"))
    return getattr(v, "kind", "dsn")


#: An absolute path without spaces or shell characters (binaries and basedirs of builds).
PATH_PATTERN = r"^/[A-Za-z0-9_.+/-]{1,255}$"
ServerOptionValue = Union[bool, int, float, str, None]


class ManagedTarget(_Frozen):
    """A mariadbd (or mysqld) the worker starts itself with `--no-defaults` and ``options``,
    on its own datadir, port and socket, pinned to ``server_cpus`` (see services/worker/managed.py)."""

    kind: Literal["managed"]
    name: Name
    #: The server binary; default: the system's mariadbd. ``basedir`` names another build
    #: (its bin/ or sbin/ holds the server, its scripts/ the install script).
    binary: Annotated[str, Field(pattern=PATH_PATTERN)] | None = None
    basedir: Annotated[str, Field(pattern=PATH_PATTERN)] | None = None
    #: Passed as --name=value in this order; names are checked against `--help --verbose`.
    options: dict[str, ServerOptionValue] = Field(default_factory=dict)
    #: CPU lists like "0" or "2-3"; default: the worker splits its CPUs (server first half).
    server_cpus: Annotated[str, BeforeValidator(lambda v: str(v) if isinstance(v, int) else v),
                           Field(pattern=CPU_LIST_PATTERN)] | None = None
    client_cpus: Annotated[str, BeforeValidator(lambda v: str(v) if isinstance(v, int) else v),
                           Field(pattern=CPU_LIST_PATTERN)] | None = None
    database: Identifier = "sbtest"
    start_timeout: Seconds = 60.0
    stop_timeout: Seconds = 60.0

    @field_validator("options")
    @classmethod
    def _strict_options(cls, v: dict[str, Any]) -> dict[str, Any]:
        seen: dict[str, str] = {}
        for name, value in v.items():
            problem = server_options.name_problem(name) or server_options.value_problem(value)
            if problem:
                raise ValueError(f"{name}: {problem}")
            base = server_options.normalise(name)
            if base in seen:
                raise ValueError(f"{name}: same option as {seen[base]}")
            seen[base] = name
        return v

    @model_validator(mode="after")
    def _one_build(self) -> "ManagedTarget":
        if self.binary is not None and self.basedir is not None and not self.binary.startswith(self.basedir.rstrip("/") + "/"):
            raise ValueError("binary: must lie under basedir when both are given")
        return self


#: A target is an existing server (dsn, the default kind) or a managed one.
Target = Annotated[
    Union[Annotated[DsnTarget, Tag("dsn")], Annotated[ManagedTarget, Tag("managed")]],
    Discriminator(_target_kind),
]


class DataShape(_Frozen):
    """The sbtest tables a workload runs on (sysbench's --tables, --table-size, engine)."""

    tables: Annotated[int, Field(ge=1, le=1024)] = 1
    table_size: Annotated[int, Field(ge=1, le=2_000_000_000)] = 10_000
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

    name: str
    label: Annotated[str, Field(pattern=NAME_PATTERN)] | None = None
    options: dict[str, int | float | bool | str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, v: Any) -> Any:
        return {"name": v} if isinstance(v, str) else v

    @field_validator("name")
    @classmethod
    def _known(cls, v: str) -> str:
        if canonical_name(v) not in WORKLOADS:
            raise ValueError(f"unknown workload {v!r}; known: {', '.join(sorted(WORKLOADS))}")
        return v

    @model_validator(mode="after")
    def _options_known(self) -> "WorkloadSpec":
        accepted = WORKLOADS[canonical_name(self.name)].options
        for key, value in self.options.items():
            if key not in accepted:
                raise ValueError(f"options.{key}: not an option of {self.name} (accepted: {', '.join(sorted(accepted))})")
            default = accepted[key]
            if isinstance(default, bool) and not isinstance(value, bool):
                raise ValueError(f"options.{key}: must be true or false")
            if isinstance(default, int) and not isinstance(default, bool):
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise ValueError(f"options.{key}: must be a whole number >= 0")
            if key == "rand_type" and value not in RAND_TYPES:
                raise ValueError(f"options.rand_type: must be one of {', '.join(RAND_TYPES)}")
            if key in PREPARE_FIXED and value != default:
                # The worker prepares sysbench's default table shape only; refusing beats a run
                # that silently measures another schema than the one asked for.
                raise ValueError(f"options.{key}: only the sysbench default ({str(default).lower()}) is "
                                 "supported; the worker's prepare builds that table shape")
        return self

    @property
    def canonical(self) -> str:
        return canonical_name(self.name)

    @property
    def key(self) -> str:
        """The row name in tables and the workload part of run ids."""
        return self.label or self.name

    def option(self, key: str) -> Any:
        """The effective value of a sysbench option: the override, else sysbench's default."""
        return self.options.get(key, WORKLOADS[self.canonical].options[key])


class CampaignSpec(_Frozen):
    """A whole campaign: targets x workloads x threads x repetitions, compared to a baseline."""

    spec_version: Literal[1] = SPEC_VERSION
    name: Name
    description: str = ""
    pool: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")] = "default"
    #: native: benchfleet's load processes; sysbench: the sysbench 1.0 binary on the worker.
    driver: Literal["native", "sysbench"] = "native"
    targets: Annotated[list[Target], Field(min_length=1)]
    baseline: Annotated[str, BeforeValidator(_number_as_name)] | None = None
    workloads: Annotated[list[WorkloadSpec], Field(min_length=1)]
    data: DataShape = DataShape()
    threads: Annotated[list[Annotated[int, Field(gt=0, le=65535)]], Field(min_length=1)]
    duration: Seconds
    warmup: Seconds = 0.0
    repeat: Annotated[int, Field(ge=1, le=1000)] = 1
    seed: Annotated[int, Field(ge=0)] = 0
    #: Open loop: transactions/s for the whole run, arriving as a Poisson stream (sysbench's
    #: --rate); latency counts from each intended start. 0: closed loop.
    rate: Annotated[float, Field(ge=0)] = 0.0
    #: Also record latency per statement kind (read/write/other) besides per transaction; it
    #: costs a clock read per statement in the load loop, so it is off unless asked for.
    latency_by_kind: bool = False

    @field_validator("duration")
    @classmethod
    def _positive_duration(cls, v: float) -> float:
        if v <= 0:
            raise ValueError("must be > 0")
        return v

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
        if self.driver == "sysbench":
            zipf = sorted({w.key for w in self.workloads if w.option("rand_type") == "zipfian"})
            if zipf:
                raise ValueError(f"workloads: {', '.join(zipf)}: rand_type zipfian needs sysbench 1.1; "
                                 "the sysbench driver runs 1.0.20 (use driver: native)")
            if self.latency_by_kind:
                raise ValueError("latency_by_kind: sysbench reports latency per event only; use driver: native")
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
