"""Reaching a DSN target: connection parameters from the spec plus the worker's own secrets."""

from __future__ import annotations

import os
import re
from typing import Any, Mapping

import mysql.connector

from services.common.errors import TargetError

try:
    from mysql.connector.connection_cext import CMySQLConnection
except ImportError:  # the C extension did not load; assert_c_extension says so by name
    CMySQLConnection = None  # type: ignore[assignment,misc]

from services.common.spec import DsnTarget


def _expand(text: str, environ: Mapping[str, str]) -> str:
    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: environ.get(m.group(1), m.group(0)), text)


def connect_params(target: DsnTarget, environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """mysql.connector keyword arguments for ``target``, with its password resolved here."""
    where = f"targets.{target.name}"
    params: dict[str, Any] = {"host": target.host, "port": target.port, "user": target.user,
                              "database": target.database}
    if target.socket:
        params["unix_socket"] = target.socket
    if target.password_env is not None:
        if target.password_env not in environ:
            raise TargetError(f"{where}.password_env",
                              f"environment variable {target.password_env} is not set on this worker")
        params["password"] = environ[target.password_env]
    elif target.password_file is not None:
        # ${VAR} and ~ are expanded on the worker, so one spec serves hosts that keep the file
        # in different places (e.g. password_file: ${BENCHFLEET_SECRETS}/db_password).
        path = os.path.expanduser(_expand(target.password_file, environ))
        try:
            with open(path, encoding="utf-8") as f:
                params["password"] = f.read().strip()
        except OSError as e:
            raise TargetError(f"{where}.password_file",
                              f"cannot read {path} on this worker: {e.strerror}") from e
    else:
        params["password"] = ""
    if target.ssl_disabled:
        params["ssl_disabled"] = True
    elif target.ssl_ca:
        params["ssl_ca"] = target.ssl_ca
        params["ssl_verify_cert"] = True
    return params


def connect(params: Mapping[str, Any], database: bool = True) -> Any:
    """Open a C-extension connection; ``database=False`` connects without selecting the database
    (to create it)."""
    kwargs = dict(params)
    if not database:
        kwargs.pop("database", None)
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
