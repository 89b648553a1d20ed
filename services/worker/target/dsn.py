"""Reaching a DSN target: connection parameters from the spec plus the worker's own secrets, and
mysql.connector's form of them."""

from __future__ import annotations

import os
import re
import ssl
from typing import Any, Mapping

import mysql.connector

from services.common.config import Settings
from services.common.errors import TargetError
from services.worker.target.account_policy import AccountPolicy
from services.worker.target.connect_params import ConnectParams
from services.worker.target.destinations import Where
from services.worker.target.secret_policy import SecretPolicy, resolve_password

try:
    from mysql.connector.connection_cext import CMySQLConnection
except ImportError:  # the C extension did not load; assert_c_extension says so by name
    CMySQLConnection = None  # type: ignore[assignment,misc]

from services.common.spec.targets import DsnTarget


def system_ca_bundle() -> str | None:
    """The worker's CA bundle (Debian: /etc/ssl/certs/ca-certificates.crt), for tls: verify
    without an ssl_ca of the target's own."""
    paths = ssl.get_default_verify_paths()
    for candidate in (paths.cafile, paths.openssl_cafile, "/etc/ssl/certs/ca-certificates.crt"):
        if candidate and os.path.isfile(candidate):
            return candidate
    return None


def connect_params(target: DsnTarget, environ: Mapping[str, str] = os.environ,
                   policy: SecretPolicy | None = None, accounts: AccountPolicy | None = None) -> ConnectParams:
    """How to reach ``target``, with its password resolved here under the worker's secret policy
    (``policy``, else the one ``environ`` configures) for the target's address, and its socket
    and authentication under the account policy (``accounts``, likewise). TargetError, naming
    the spec field, before anything is connected."""
    where = f"targets.{target.name}"
    # The scheduler refuses this too; a worker never prepares tables in the results DB.
    if target.database.lower() == environ.get("BENCHFLEET_DB_NAME", Settings.db_name).lower():
        raise TargetError(f"{where}.database", f"{target.database} is the results DB's database")
    try:
        policy = policy or SecretPolicy.from_environ(environ)
        accounts = accounts or AccountPolicy.from_environ(environ)
    except ValueError as e:  # SettingsError: the worker checked it at start; the environment changed
        raise TargetError(where, f"the worker's secret policy is unusable: {e}") from None
    if target.socket:
        problem = accounts.socket_problem(target.socket)
        if problem:
            raise TargetError(f"{where}.socket", problem)
    # Resolved, as the socket directory check above and the password bindings (secret_policy.py) are.
    address = Where(target.host, target.port, os.path.realpath(target.socket) if target.socket else None)
    password = resolve_password(where, target.password_env, target.password_file, environ, policy, address)
    tls: dict[str, Any] = {}
    mode = target.tls_mode
    if mode == "disabled":
        tls = {"ssl_disabled": True}
    elif mode == "verify":
        # Certificate and host name, so a password never goes to whoever answers on the way.
        ca = target.ssl_ca or system_ca_bundle()
        if ca is None:
            raise TargetError(f"{where}.tls", "verify needs ssl_ca (this worker has no CA bundle); or set "
                                              "tls: preferred to accept an unverified connection")
        tls = {"ssl_ca": ca, "ssl_verify_cert": True, "ssl_verify_identity": True}
    return ConnectParams(host=target.host, port=target.port, unix_socket=target.socket or None, user=target.user,
                         password=password, database=target.database, allow_cleartext=accounts.allow_cleartext, **tls)


def connector_kwargs(params: ConnectParams, database: bool = True) -> dict[str, Any]:
    """mysql.connector's keyword arguments for ``params`` (unset ones left to the connector);
    ``database=False`` leaves the schema unselected (to create it)."""
    kwargs: dict[str, Any] = {"user": params.user, "password": params.password}
    for name in ("host", "port", "unix_socket", "ssl_ca"):
        value = getattr(params, name)
        if value is not None:
            kwargs[name] = value
    for name in ("ssl_disabled", "ssl_verify_cert", "ssl_verify_identity"):
        if getattr(params, name):
            kwargs[name] = True
    if database and params.database:
        kwargs["database"] = params.database
    return kwargs


def connect(params: ConnectParams, database: bool = True, **options: Any) -> Any:
    """Open a C-extension connection; ``database=False`` connects without selecting the database
    (to create it); ``options`` are further mysql.connector options (local infile)."""
    kwargs = connector_kwargs(params, database)
    kwargs.update(options)
    # autocommit=True matches the mysql CLI and sysbench: without it the connector runs every
    # statement in one long implicit transaction, holding a read view for the whole run.
    kwargs.setdefault("autocommit", True)
    conn = mysql.connector.connect(use_pure=False, **kwargs)
    assert_c_extension(conn)
    return conn


def assert_c_extension(conn: object) -> None:
    """Refuse a pure-Python connection: it costs about twice the client CPU per query, which
    would make the client, not the server, the thing being measured."""
    if CMySQLConnection is None or not isinstance(conn, CMySQLConnection):
        raise TargetError(
            "driver",
            f"mysql-connector-python returned {type(conn).__name__}, not CMySQLConnection: "
            "its C extension did not load on this worker",
        )


_PLACEHOLDER = re.compile(r"%[-.0-9]*[sdu]")


def mysql_message(code: int, fallback: str = "unknown error") -> str:
    """The client library's text for ``code``, without printf placeholders (``fallback`` when
    the library has none)."""
    try:
        from mysql.connector.locales import get_client_error

        text = get_client_error(code) or ""
    except Exception:  # an unknown code or a missing locale must not hide the code itself
        text = ""
    return _PLACEHOLDER.sub("?", text) if text else fallback
