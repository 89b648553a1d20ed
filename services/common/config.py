"""Settings for every service, from one place: flags, then BENCHFLEET_* variables, then defaults."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from dataclasses import dataclass, field, fields, replace
from typing import Mapping, MutableMapping
from urllib.parse import quote, urlsplit, urlunsplit

from services.common.errors import SettingsError

#: A run is delivered at most this often: the runs queue's x-delivery-limit (bus.DELIVERY_LIMIT).
MAX_RUN_ATTEMPTS = 5
#: Seconds between a running worker's announcements of its /metrics endpoint and builds, which
#: keep them fresh under announce_ttl_s (they are also announced at every connect).
ANNOUNCE_EVERY_S = 60



@dataclass(frozen=True)
class Settings:
    """Connection settings shared by scheduler, worker and collector."""

    #: AMQP URL of the broker; the password in it is never logged (see ``redacted_amqp_url``).
    amqp_url: str = "amqp://guest:guest@127.0.0.1:5672/%2F"
    #: RabbitMQ's management HTTP API, which the collector asks whether a run's taker still consumes
    #: (services/common/bus/management.py); empty: http on the broker's host, port 15672.
    amqp_management_url: str = ""
    #: Results DB (MariaDB) where campaigns, runs and results are kept.
    db_host: str = "127.0.0.1"
    db_port: int = 3306
    db_user: str = "root"
    #: Never in repr (tracebacks, debug logs); see __repr__ for the AMQP URL's password.
    db_password: str = field(default="", repr=False)
    db_name: str = "benchfleet"
    db_socket: str = ""
    #: Seconds to wait for the results DB to accept a connection and greet, and for each read or
    #: write of a statement (0: wait for ever). A peer that takes the connection and never answers
    #: then costs a bounded wait and counts as the DB being away, not a hung collector or scheduler.
    #: Reads are per packet: a long result set streams; a statement the server works on longer
    #: than the read timeout counts as lost (migrations run without it).
    db_connect_timeout_s: int = 10
    db_read_timeout_s: int = 120
    db_write_timeout_s: int = 120
    #: Seconds between AMQP heartbeats; runs go on off the I/O thread so heartbeats keep flowing.
    heartbeat: int = 30
    #: Prefix of every exchange and queue, so separate fleets (or test runs) share one broker.
    namespace: str = "benchfleet"
    log_level: str = "info"
    #: Where /metrics is served; port 0 picks a free port, announced through sd_dir and (workers)
    #: on the bus for the collector's HTTP service discovery. A fixed port suits several hosts.
    metrics_addr: str = "127.0.0.1"
    metrics_port: int = 0
    #: The host name or address other hosts reach /metrics at (NAT, several interfaces);
    #: empty: metrics_addr, or this host's name when that is a wildcard (0.0.0.0, ::).
    metrics_announce: str = ""
    #: Prometheus file-SD directory (deploy/prometheus/targets); empty: announce nothing.
    sd_dir: str = ""
    #: How many times a worker tries a run that fails (target down, lost connections) before
    #: it is marked failed and its run spec dead-lettered with the reason.
    run_attempts: int = 3
    #: Seconds a part of a run split over load hosts (spec load_hosts) waits for the other parts'
    #: workers, beyond one run's warm-up + duration; then it gives up (the run is tried again).
    part_join_s: int = 60
    #: The longest run (warm-up + measurement) the scheduler accepts, in seconds. The broker's
    #: consumer_timeout (deploy/ sets 3 h) must stay above it, or a run's ack would come too late.
    max_run_s: int = 7200
    #: The broker's consumer_timeout in ms, as deploy/ensure-services configures it (the same
    #: variable): a run's delivery, server start and prepare included, must end well within it.
    consumer_timeout_ms: int = 10_800_000
    #: Seconds past a run's warm-up + duration after which the collector fails a run still
    #: marked running (its worker is gone and nobody took the run again). Generous: it also
    #: covers preparing the tables and starting a managed server before the warm-up.
    reap_grace_s: int = 900
    #: Seconds after which a worker's build and endpoint announcements that were not refreshed
    #: are ignored: `scheduler validate` no longer counts that host's builds and the collector's
    #: HTTP service discovery drops the endpoint (a decommissioned host, a worker gone for good).
    #: Running workers announce every ANNOUNCE_EVERY_S. 0: announcements never expire.
    announce_ttl_s: int = 900
    #: Seconds between the collector's looks for campaigns cancelled in the results DB, which it
    #: then tells the workers of (`scheduler cancel` waits 15 s for it).
    cancel_check_s: int = 1
    #: TLS for AMQP (used when set, or with an amqps:// URL) and for the results DB.
    amqp_tls_ca: str = ""
    amqp_tls_cert: str = ""
    amqp_tls_key: str = ""
    db_tls_ca: str = ""
    db_tls_cert: str = ""
    db_tls_key: str = ""

    def redacted_amqp_url(self) -> str:
        return redact_url(self.amqp_url)

    def __repr__(self) -> str:
        # Settings reach logs and tracebacks; the passwords (the DB's, and the broker's inside
        # its URL) never do.
        shown = ", ".join(
            f"{f.name}={redact_url(self.amqp_url)!r}" if f.name == "amqp_url" else f"{f.name}={getattr(self, f.name)!r}"
            for f in fields(self) if f.repr)
        return f"Settings({shown}, db_password={'***' if self.db_password else ''!r})"

    def db_params(self) -> dict[str, object]:
        params: dict[str, object] = {"host": self.db_host, "port": self.db_port, "user": self.db_user,
                                     "password": self.db_password, "database": self.db_name}
        if self.db_socket:
            params["unix_socket"] = self.db_socket
        for key, value in (("connection_timeout", self.db_connect_timeout_s), ("read_timeout", self.db_read_timeout_s),
                           ("write_timeout", self.db_write_timeout_s)):
            if value > 0:  # the client library's None is "no timeout"; 0 would be refused
                params[key] = value
        if self.db_tls_ca:
            params.update(ssl_ca=self.db_tls_ca, ssl_verify_cert=True)
        if self.db_tls_cert:
            params.update(ssl_cert=self.db_tls_cert, ssl_key=self.db_tls_key or None)
        return params


def redact_url(url: str) -> str:
    """The URL with its password replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{quote(parts.username or '')}:***@{parts.hostname or ''}"
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def with_password(url: str, password: str) -> str:
    """The URL with its password set (percent-encoded)."""
    parts = urlsplit(url)
    netloc = f"{quote(parts.username or '', safe='')}:{quote(password, safe='')}@{parts.hostname or ''}"
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def _env_name(field: str) -> str:
    return f"BENCHFLEET_{field.upper()}"


#: What each setting is for, shown by ``--help`` beside its variable and default.
_HELP: dict[str, str] = {
    "amqp_url": "RabbitMQ URL; its password from BENCHFLEET_AMQP_PASSWORD_FILE",
    "amqp_management_url": "RabbitMQ management API the collector asks who holds runs (empty: http://BROKER-HOST:15672)",
    "db_host": "results DB host",
    "db_port": "results DB port",
    "db_user": "results DB user",
    "db_name": "results DB database",
    "db_socket": "results DB unix socket (instead of host and port)",
    "db_connect_timeout_s": "seconds to wait for the results DB to accept a connection (0: no limit)",
    "db_read_timeout_s": "seconds to wait for each answer of the results DB (0: no limit)",
    "db_write_timeout_s": "seconds to wait for each write to the results DB (0: no limit)",
    "heartbeat": "seconds between AMQP heartbeats",
    "namespace": "prefix of every exchange and queue (separate fleets on one broker)",
    "log_level": "debug, info, warning or error",
    "metrics_addr": "address /metrics is served on",
    "metrics_port": "port /metrics is served on (0: a free one)",
    "sd_dir": "Prometheus file-discovery directory to announce /metrics in",
    "run_attempts": f"tries of a failing run before it is marked failed (1 to {MAX_RUN_ATTEMPTS})",
    "max_run_s": "longest run (server stop and start, prepare, quiesce, warm-up, measurement) accepted, in seconds",
    "consumer_timeout_ms": "the broker's consumer_timeout in ms (deploy/ensure-services sets it from this variable)",
    "announce_ttl_s": f"seconds after which workers' build and /metrics announcements not refreshed are ignored "
                      f"(0: never; running workers announce every {ANNOUNCE_EVERY_S} s)",
    "part_join_s": "seconds a part of a load_hosts run waits for the other parts, beyond the run's length",
    "amqp_tls_ca": "CA bundle verifying the broker's certificate",
    "amqp_tls_cert": "client certificate for the broker",
    "amqp_tls_key": "client key for the broker",
    "db_tls_ca": "CA bundle verifying the results DB's certificate",
    "db_tls_cert": "client certificate for the results DB",
    "db_tls_key": "client key for the results DB",
}

_METAVARS = {"max_run_s": "SECONDS", "consumer_timeout_ms": "MS", "announce_ttl_s": "SECONDS", "part_join_s": "SECONDS", "heartbeat": "SECONDS", "run_attempts": "N", "db_connect_timeout_s": "SECONDS",
             "db_read_timeout_s": "SECONDS", "db_write_timeout_s": "SECONDS"}

#: The settings of a command that talks to the broker.
AMQP = ("amqp_url", "heartbeat", "namespace", "amqp_tls_ca", "amqp_tls_cert", "amqp_tls_key")
#: The settings of a command that reads or writes the results DB (db_password: a file or variable).
DB = ("db_host", "db_port", "db_user", "db_password", "db_name", "db_socket", "db_tls_ca", "db_tls_cert", "db_tls_key",
      "db_connect_timeout_s", "db_read_timeout_s", "db_write_timeout_s")
#: The settings of a long-running service that serves /metrics.
METRICS = ("metrics_addr", "metrics_port", "sd_dir")


def add_settings_flags(parser: argparse.ArgumentParser, *groups: tuple[str, ...]) -> None:
    """Add one flag per setting a command uses (``--amqp-url``, ``--db-host`` ...: the names in
    ``groups``, and ``--log-level`` always); each also reads its env variable. No group: all."""
    wanted = {n for g in groups for n in g} | {"log_level"} if groups else {f.name for f in fields(Settings)}
    group = parser.add_argument_group("settings (flags, else BENCHFLEET_* variables, else the settings file)")
    for f in fields(Settings):
        if f.name not in wanted:
            continue
        if f.name == "db_password":
            # A password on the command line shows in `ps`; only the environment or a file.
            group.add_argument("--db-password-file", dest="db_password_file", default=None, metavar="FILE",
                               help="file holding the results DB password (env BENCHFLEET_DB_PASSWORD_FILE, "
                                    "or the password itself in BENCHFLEET_DB_PASSWORD)")
            continue
        shown_default = "" if f.name == "amqp_url" else f", default {f.default!r}"
        group.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name, default=None,
                           metavar=_METAVARS.get(f.name, f.name.split("_")[-1].upper()),
                           type=int if f.type in (int, "int") else str,
                           help=f"{_HELP.get(f.name, f.name)} (env {_env_name(f.name)}{shown_default})")


def settings_from(args: argparse.Namespace | None = None, env: Mapping[str, str] | None = None, *,
                  secrets: bool = True) -> Settings:
    """Resolve settings: a flag wins over its environment variable, which wins over the default.
    ``secrets=False`` reads no password file (a command that connects nowhere needs none)."""
    env = os.environ if env is None else env
    values: dict[str, object] = {}
    for f in fields(Settings):
        flag = getattr(args, f.name, None) if args is not None else None
        raw = flag if flag is not None else env.get(_env_name(f.name))
        if raw is None:
            continue
        if f.type in (int, "int"):
            try:
                values[f.name] = int(raw)
            except ValueError:
                raise SettingsError(f"{_source(f.name, flag)}: {raw!r} is not a whole number") from None
        else:
            values[f.name] = raw
    flag_file = getattr(args, "db_password_file", None) if args is not None else None
    pw_file = flag_file or env.get("BENCHFLEET_DB_PASSWORD_FILE")
    if pw_file and secrets:
        values["db_password"] = _read_secret(pw_file, "--db-password-file" if flag_file else "BENCHFLEET_DB_PASSWORD_FILE")
    # The broker password stays out of the URL in env files and `ps`: a file or its own variable.
    amqp_pw_file = env.get("BENCHFLEET_AMQP_PASSWORD_FILE")
    amqp_pw = env.get("BENCHFLEET_AMQP_PASSWORD")
    if amqp_pw_file and secrets:
        amqp_pw = _read_secret(amqp_pw_file, "BENCHFLEET_AMQP_PASSWORD_FILE")
    if amqp_pw and secrets:
        values["amqp_url"] = with_password(str(values.get("amqp_url", Settings.amqp_url)), amqp_pw)
    for name in ("db_connect_timeout_s", "db_read_timeout_s", "db_write_timeout_s"):
        if int(values.get(name, 0)) < 0:  # type: ignore[call-overload]
            raise SettingsError(f"{_source(name, getattr(args, name, None))}: must be 0 (no limit) or more seconds")
    ttl = int(values.get("announce_ttl_s", Settings.announce_ttl_s))  # type: ignore[call-overload]
    if ttl != 0 and ttl < 2 * ANNOUNCE_EVERY_S:
        raise SettingsError(f"{_source('announce_ttl_s', getattr(args, 'announce_ttl_s', None))}: must be 0 (never "
                            f"expire) or at least {2 * ANNOUNCE_EVERY_S} s (workers announce every {ANNOUNCE_EVERY_S} s)")
    attempts = int(values.get("run_attempts", Settings.run_attempts))  # type: ignore[call-overload]
    if not 1 <= attempts <= MAX_RUN_ATTEMPTS:
        raise SettingsError(f"{_source('run_attempts', getattr(args, 'run_attempts', None))}: must be 1 to "
                            f"{MAX_RUN_ATTEMPTS} (the runs queue dead-letters a run delivered more often)")
    return Settings(**values)  # type: ignore[arg-type]


def with_db_password(settings: Settings, env: Mapping[str, str] | None = None) -> Settings:
    """``settings`` with the results-DB password read now, for a command that started without
    secrets and needs the DB for one optional check; SettingsError when it cannot be read."""
    env = os.environ if env is None else env
    path = env.get("BENCHFLEET_DB_PASSWORD_FILE")
    if settings.db_password or not path:
        return settings
    return replace(settings, db_password=_read_secret(path, "BENCHFLEET_DB_PASSWORD_FILE"))


def _read_secret(path: str, source: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip()
    except (OSError, UnicodeDecodeError) as e:
        raise SettingsError(f"{source}: cannot read {path}: {getattr(e, 'strerror', None) or e}") from None


def _source(field: str, flag: object) -> str:
    return f"--{field.replace('_', '-')}" if flag is not None else _env_name(field)


#: Names the settings file (empty: none); without it the CLIs read the first of SETTINGS_FILES.
CONFIG_VAR = "BENCHFLEET_CONFIG"
#: Where deploy/ensure-services writes the fleet's settings: a user's own, then the host's (root).
SETTINGS_FILES = ("~/.config/benchfleet/settings.env", "/etc/benchfleet/settings.env")
#: Variables that belong together: a user and the password file of another user never mix, so
#: when the environment sets one of a group, the file gives none of it.
_TOGETHER = (
    ("BENCHFLEET_AMQP_URL", "BENCHFLEET_AMQP_PASSWORD_FILE", "BENCHFLEET_AMQP_PASSWORD"),
    ("BENCHFLEET_DB_USER", "BENCHFLEET_DB_PASSWORD_FILE", "BENCHFLEET_DB_PASSWORD"),
)
#: Roles with broker users of their own in the file (BENCHFLEET_WORKER_AMQP_URL, ...).
_ROLE_KEYS = ("AMQP_URL", "AMQP_PASSWORD_FILE")


def settings_file_path(env: Mapping[str, str]) -> Path | None:
    """The settings file in force: the one BENCHFLEET_CONFIG names (empty: none), else the first
    of SETTINGS_FILES that exists, else None."""
    if CONFIG_VAR in env:
        return Path(env[CONFIG_VAR]).expanduser() if env[CONFIG_VAR] else None
    for candidate in SETTINGS_FILES:
        path = Path(candidate).expanduser()
        if path.is_file():
            return path
    return None


def parse_settings_file(text: str, name: str) -> dict[str, str]:
    """``KEY=VALUE`` lines (``#`` comments, blank lines); a later line wins, as when sourced."""
    values: dict[str, str] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        key = key.strip().removeprefix("export ").strip()
        if not sep or not key.startswith("BENCHFLEET_") or not key.replace("_", "").isalnum():
            raise SettingsError(f"{name}:{lineno}: not a BENCHFLEET_NAME=value line: {line[:60]!r}")
        values[key] = value.strip().strip("\"'")
    return values


def file_settings(values: Mapping[str, str], env: Mapping[str, str], role: str = "") -> dict[str, str]:
    """The file's variables that the environment leaves unset, with ``role``'s own broker user
    (BENCHFLEET_WORKER_AMQP_URL for the worker) as the broker user."""
    chosen = dict(values)
    prefix = f"BENCHFLEET_{role.upper()}_"
    if role and f"{prefix}AMQP_URL" in chosen:
        chosen.pop("BENCHFLEET_AMQP_PASSWORD_FILE", None)
        for key in _ROLE_KEYS:
            if f"{prefix}{key}" in chosen:
                chosen[f"BENCHFLEET_{key}"] = chosen[f"{prefix}{key}"]
    out = {k: v for k, v in chosen.items() if k not in env}
    for group in _TOGETHER:
        if any(k in env for k in group):
            for k in group:
                out.pop(k, None)
    return out


def load_settings_file(env: MutableMapping[str, str], role: str = "") -> Path | None:
    """Fill ``env`` (os.environ) with the settings file's variables it does not set; the file read."""
    path = settings_file_path(env)
    if path is None:
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if CONFIG_VAR in env:
            raise SettingsError(f"{CONFIG_VAR}: no settings file {path}") from None
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise SettingsError(f"settings file {path}: {getattr(e, 'strerror', None) or e}") from None
    env.update(file_settings(parse_settings_file(text, str(path)), env, role))
    return path
