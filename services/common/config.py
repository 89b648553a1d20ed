"""Settings for every service, from one place: flags, then BENCHFLEET_* variables, then defaults."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field, fields
from typing import Mapping
from urllib.parse import quote, urlsplit, urlunsplit

from services.common.errors import SettingsError

#: A run is delivered at most this often: the runs queue's x-delivery-limit (bus.DELIVERY_LIMIT).
MAX_RUN_ATTEMPTS = 5



@dataclass(frozen=True)
class Settings:
    """Connection settings shared by scheduler, worker and collector."""

    #: AMQP URL of the broker; the password in it is never logged (see ``redacted_amqp_url``).
    amqp_url: str = "amqp://guest:guest@127.0.0.1:5672/%2F"
    #: Results DB (MariaDB) where campaigns, runs and results are kept.
    db_host: str = "127.0.0.1"
    db_port: int = 3306
    db_user: str = "root"
    #: Never in repr (tracebacks, debug logs); see __repr__ for the AMQP URL's password.
    db_password: str = field(default="", repr=False)
    db_name: str = "benchfleet"
    db_socket: str = ""
    #: Seconds between AMQP heartbeats; runs go on off the I/O thread so heartbeats keep flowing.
    heartbeat: int = 30
    #: Prefix of every exchange and queue, so separate fleets (or test runs) share one broker.
    namespace: str = "benchfleet"
    log_level: str = "info"
    #: Where /metrics is served; port 0 picks a free port, announced through sd_dir.
    metrics_addr: str = "127.0.0.1"
    metrics_port: int = 0
    #: Prometheus file-SD directory (deploy/prometheus/targets); empty: announce nothing.
    sd_dir: str = ""
    #: How many times a worker tries a run that fails (target down, lost connections) before
    #: it is marked failed and its run spec dead-lettered with the reason.
    run_attempts: int = 3
    #: The longest run (warm-up + measurement) the scheduler accepts, in seconds. The broker's
    #: consumer_timeout (deploy/ sets 3 h) must stay above it, or a run's ack would come too late.
    max_run_s: int = 7200
    #: Seconds past a run's warm-up + duration after which the collector fails a run still
    #: marked running (its worker is gone and nobody took the run again). Generous: it also
    #: covers preparing the tables and starting a managed server before the warm-up.
    reap_grace_s: int = 900
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


def add_settings_flags(parser: argparse.ArgumentParser) -> None:
    """Add one flag per setting (``--amqp-url``, ``--db-host`` ...); each also reads its env var."""
    group = parser.add_argument_group("connections (flags, else BENCHFLEET_* environment variables)")
    for f in fields(Settings):
        if f.name == "db_password":
            # A password on the command line shows in `ps`; only the environment or a file.
            group.add_argument("--db-password-file", dest="db_password_file", default=None,
                               help="file holding the results DB password (else BENCHFLEET_DB_PASSWORD)")
            continue
        group.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name, default=None,
                           type=int if f.type in (int, "int") else str,
                           help=f"env {_env_name(f.name)}, default {f.default!r}" if f.name != "amqp_url"
                           else f"env {_env_name(f.name)}")


def settings_from(args: argparse.Namespace | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Resolve settings: a flag wins over its environment variable, which wins over the default."""
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
    if pw_file:
        values["db_password"] = _read_secret(pw_file, "--db-password-file" if flag_file else "BENCHFLEET_DB_PASSWORD_FILE")
    # The broker password stays out of the URL in env files and `ps`: a file or its own variable.
    amqp_pw_file = env.get("BENCHFLEET_AMQP_PASSWORD_FILE")
    amqp_pw = env.get("BENCHFLEET_AMQP_PASSWORD")
    if amqp_pw_file:
        amqp_pw = _read_secret(amqp_pw_file, "BENCHFLEET_AMQP_PASSWORD_FILE")
    if amqp_pw:
        values["amqp_url"] = with_password(str(values.get("amqp_url", Settings.amqp_url)), amqp_pw)
    attempts = int(values.get("run_attempts", Settings.run_attempts))  # type: ignore[call-overload]
    if not 1 <= attempts <= MAX_RUN_ATTEMPTS:
        raise SettingsError(f"{_source('run_attempts', getattr(args, 'run_attempts', None))}: must be 1 to "
                            f"{MAX_RUN_ATTEMPTS} (the runs queue dead-letters a run delivered more often)")
    return Settings(**values)  # type: ignore[arg-type]


def _read_secret(path: str, source: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip()
    except (OSError, UnicodeDecodeError) as e:
        raise SettingsError(f"{source}: cannot read {path}: {getattr(e, 'strerror', None) or e}") from None


def _source(field: str, flag: object) -> str:
    return f"--{field.replace('_', '-')}" if flag is not None else _env_name(field)
