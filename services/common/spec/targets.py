"""The spec's targets: an existing server (dsn) or one the worker starts (managed), and the
quiesce block both carry; part of spec_version (history in spec.py)."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, BaseModel, BeforeValidator, Discriminator, Field, Strict, Tag, WithJsonSchema
from pydantic import ValidationInfo, field_validator, model_validator

from services.common.spec import server_allowed, server_options
from services.common.spec.problems import FieldProblems, Problem
from services.common.spec.server_options import CPU_LIST_PATTERN
from services.common.spec.fields import (
    IDENT_PATTERN,
    Frozen,
    Int,
    Name,
    Number,
    Seconds,
    is_stored,
    number_as_name,
    shown,
)

# -- bounds of a target's numbers (the campaign's, and why, are in spec.py).

#: start_timeout and stop_timeout of a managed server.
MAX_TIMEOUT_S = 3_600
#: The highest CPU number in a CPU list (Linux's largest NR_CPUS is 8192).
MAX_CPU = 8_191
MAX_SERVER_OPTIONS = 200
#: The largest InnoDB history list length a quiesce may accept: purge caught up means far below.
MAX_HISTORY = 1_000_000_000

#: Schemas a target's database may never be: the server's own. Prepare creates and drops
#: tables in the target database. The results DB's name is refused too, by the scheduler and
#: the worker, which know it from their settings.
SYSTEM_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})


def _cpus_in_range(v: str) -> str:
    cpus = server_options.parse_cpus(v)  # ValueError names a range that goes backwards
    if cpus and cpus[-1] > MAX_CPU:
        raise ValueError(f"CPU {cpus[-1]} is above {MAX_CPU}")
    return v


def _not_system_schema(v: str) -> str:
    if v.lower() in SYSTEM_SCHEMAS:
        raise ValueError(f"{v} is a system schema of the server; prepare would create and drop tables in it")
    return v


#: A target's database: an identifier that is not one of the server's own schemas.
Database = Annotated[str, Field(pattern=IDENT_PATTERN), AfterValidator(_not_system_schema)]
CpuList = Annotated[str, BeforeValidator(number_as_name), Field(max_length=255, pattern=CPU_LIST_PATTERN),
                    AfterValidator(_cpus_in_range),
                    # `server_cpus: 0` is a CPU list that YAML reads as a number.
                    WithJsonSchema({"anyOf": [{"type": "string", "maxLength": 255, "pattern": CPU_LIST_PATTERN},
                                              {"type": "integer", "minimum": 0, "maximum": MAX_CPU}]})]
#: An absolute path without spaces or shell characters (sockets, CA files).
PATH_PATTERN = r"^/[A-Za-z0-9_.+/-]{1,255}$"
AbsolutePath = Annotated[str, Field(pattern=PATH_PATTERN)]
#: A password file as a worker finds it: a path that may start with ~ or hold ${VAR}s.
PASSWORD_FILE_PATTERN = r"^[A-Za-z0-9_.+/~${}-]{1,255}$"
#: Host names, IPv4 and IPv6 addresses: nothing that could be read as another argument.
HOST_PATTERN = r"^[A-Za-z0-9:][A-Za-z0-9_.:-]{0,252}$"
#: The one host name that means this machine; any other name may resolve anywhere.
LOCAL_HOST_NAME = "localhost"
#: The account a target names: a MySQL user name (no host part, quotes or spaces).
USER_PATTERN = r"^[A-Za-z0-9_.@-]{1,80}$"


def is_loopback(host: str) -> bool:
    """Whether ``host`` never leaves this machine: ``localhost`` or a loopback address (127.0.0.0/8,
    ::1). A name that merely begins like one (``127.0.0.1.example.com``) is a name, resolved anywhere."""
    if host.lower() == LOCAL_HOST_NAME:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _quiesce_shorthand(v: Any) -> Any:
    # `quiesce: true|false` is the short form of the block with its defaults.
    if isinstance(v, bool):
        return {"enabled": v}
    if v is not None and not isinstance(v, (dict, BaseModel)):
        raise ValueError("must be true, false or a mapping of enabled, timeout, max_dirty_pct, max_history")
    return v


class Quiesce(Frozen):
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


class DsnTarget(Frozen):
    """An existing server reached over TCP (or a socket); benchfleet never starts or stops it."""

    kind: Literal["dsn"] = "dsn"
    name: Name
    host: Annotated[str, Field(pattern=HOST_PATTERN)] = "127.0.0.1"
    port: Annotated[Int, Field(ge=1, le=65535)] = 3306
    socket: AbsolutePath | None = None
    #: The account the worker connects as. Required: no default, so no spec connects as root
    #: without saying so (a worker's MariaDB root is the whole server, other campaigns' data included).
    user: Annotated[str, Field(pattern=USER_PATTERN)]
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
        return self.socket is None and not is_loopback(self.host)

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


class ManagedTarget(Frozen):
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
    #: Passed as --name=value in this order by their full names; only options on the allow-list
    #: (server_allowed.ALLOWED) with values in its bounds, and names the build's `--help --verbose` lists.
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
    def _strict_options(cls, v: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        # A recorded campaign keeps the options it ran with: only their form is checked again.
        stored = is_stored(info)
        seen: dict[str, str] = {}
        problems = []
        for name, value in v.items():
            problem = (server_options.form_problem(name, value) if stored
                       else server_options.option_problem(name, value))
            if problem:
                # Every wrong option at once; a name that is no name is said in the message, not the path.
                named = re.fullmatch(server_options.OPTION_NAME_PATTERN, name)
                problems.append(Problem(name, problem) if named else Problem("", f"{shown(name)}: {problem}"))
                continue
            base = server_options.normalise(name) if stored else server_allowed.canonical(name, value)[0]
            if base in seen:
                problems.append(Problem(name, f"same option as {seen[base]}"))
            seen[base] = name
        if problems:
            raise FieldProblems(problems)
        return v


#: A target is an existing server (dsn, the default kind) or a managed one.
Target = Annotated[
    Union[Annotated[DsnTarget, Tag("dsn")], Annotated[ManagedTarget, Tag("managed")]],
    Discriminator(_target_kind),
]


#: Target fields that locate a secret on the workers: kept out of reports and exports.
PRIVATE_TARGET_FIELDS = ("password", "password_env", "password_file")
