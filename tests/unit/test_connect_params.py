"""One connection record for targets and drivers: its password never shows, it reaches the load
processes intact, and each client gets the same server from it."""

from __future__ import annotations

import io
import logging
import pickle

import pytest
import structlog

from services.common import logs
from services.common.errors import TargetError
from services.worker.driver.native.core import connect_tuple
from services.worker.driver.sysbench.driver import mysql_options
from services.worker.target.connect_params import ConnectParams
from services.worker.target.dsn import connector_kwargs

SECRET = "pw-7c1e-never-shown"
TCP = ConnectParams(host="db1", port=3307, user="bench", password=SECRET, database="sbtest",
                    ssl_ca="/etc/ca.pem", ssl_verify_cert=True, ssl_verify_identity=True)
SOCKET = ConnectParams(unix_socket="/run/m.sock", user="benchfleet", password=SECRET, database="sbtest")


def test_the_password_never_shows_in_repr_str_logs_or_errors():
    """Printing, logging or raising with the record shows where it connects, never the password."""
    for p in (TCP, SOCKET):
        assert SECRET not in repr(p) and SECRET not in str(p) and SECRET not in f"{p} {p!r} {[p]}"
        assert "password='***'" in repr(p) and "sbtest" in repr(p)
        assert SECRET not in str(TargetError("targets.a", f"cannot reach {p}"))
        with pytest.raises(TargetError) as caught:
            raise TargetError("targets.a", f"cannot reach {p!r}")
        assert SECRET not in str(caught.value) and SECRET not in repr(caught.value)
    text = io.StringIO()
    logs.configure("worker", level="info", stream=text)
    plain = logging.getLogger("connect-params-test")
    handler = logging.StreamHandler(text)
    plain.addHandler(handler)
    try:
        logs.get(__name__).info("connecting", params=TCP)
        plain.warning("connecting %s", SOCKET)
    finally:
        plain.removeHandler(handler)
        structlog.reset_defaults()
    assert text.getvalue().count("connecting") == 2 and "db1" in text.getvalue() and SECRET not in text.getvalue()
    assert "password='***'" not in repr(ConnectParams())


def test_it_pickles_for_the_load_processes_with_the_password():
    """The load processes (spawned) get the record whole, password included."""
    back = pickle.loads(pickle.dumps(TCP))
    assert back == TCP and back.password == SECRET


def test_each_client_gets_the_same_server_user_database_and_tls():
    """mysql.connector, libmariadb and sysbench are pointed at the same place from one record."""
    kw = connector_kwargs(TCP)
    assert {k: kw[k] for k in ("host", "port", "user", "password", "database", "ssl_ca")} == {
        "host": "db1", "port": 3307, "user": "bench", "password": SECRET, "database": "sbtest", "ssl_ca": "/etc/ca.pem"}
    assert kw["ssl_verify_cert"] and kw["ssl_verify_identity"] and "ssl_disabled" not in kw
    assert "database" not in connector_kwargs(TCP, database=False)
    # A managed server's record names only its socket: the connector picks no host or port.
    assert connector_kwargs(SOCKET) == {"unix_socket": "/run/m.sock", "user": "benchfleet", "password": SECRET,
                                        "database": "sbtest"}
    assert connector_kwargs(ConnectParams(host="h", ssl_disabled=True))["ssl_disabled"] is True

    # The load core's (host, user, password, database, port, unix_socket, ssl_ca, connect timeout,
    # compression, clear text allowed).
    assert connect_tuple(TCP)[:7] == ("db1", "bench", SECRET, "sbtest", 3307, None, "/etc/ca.pem")
    host, *_, port, sock, _, _, _, _ = connect_tuple(SOCKET)
    assert (host, sock, port) == ("localhost", "/run/m.sock", 3306)
    assert connect_tuple(ConnectParams(ssl_ca="/ca", ssl_disabled=True))[6] is None
    assert connect_tuple(ConnectParams())[3] is None and connect_tuple(ConnectParams())[0] == "127.0.0.1"
    assert connect_tuple(TCP)[8:] == (False, False)  # no compression; hashing auth plugins only
    assert connect_tuple(ConnectParams(allow_cleartext=True), compress=True)[8:] == (True, True)

    assert mysql_options(TCP) == ["--mysql-host=db1", "--mysql-port=3307", "--mysql-user=bench", "--mysql-db=sbtest"]
    assert mysql_options(SOCKET) == ["--mysql-socket=/run/m.sock", "--mysql-user=benchfleet", "--mysql-db=sbtest"]
    assert not any(SECRET in a for a in mysql_options(TCP) + mysql_options(SOCKET))
