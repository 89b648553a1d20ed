"""Quiesce's flush request on a managed server (innodb_max_dirty_pages_pct = 0) is always taken
back: on a fresh connection when the quiesce connection failed, and when that fails too the
server is marked to be started again rather than reused with its flushing left on."""

from __future__ import annotations

import mysql.connector
import pytest

from services.worker.target import quiesce


class FakeCursor:
    """Records statements; fails every SET GLOBAL after ``fail_after`` statements."""

    def __init__(self, server: dict, fail: bool = False):
        self.server = server
        self.fail = fail
        self._rows: list = []

    def execute(self, sql: str, args: tuple = ()) -> None:
        if sql.startswith("SELECT @@GLOBAL"):
            self._rows = [(self.server["pct"], self.server["lwm"])]
            return
        if self.fail:
            raise mysql.connector.OperationalError(msg="Lost connection to server during query", errno=2013)
        name = sql.split()[2]
        value = args[0] if args else float(sql.rsplit("=", 1)[1])
        self.server["pct" if name == "innodb_max_dirty_pages_pct" else "lwm"] = value

    def fetchall(self) -> list:
        return self._rows


class FakeConnection:
    def __init__(self, server: dict, fail: bool = False):
        self.server, self.fail = server, fail

    def cursor(self) -> FakeCursor:
        return FakeCursor(self.server, self.fail)

    def close(self) -> None:
        pass


def test_options_are_put_back_on_a_fresh_connection_when_the_quiesce_connection_died():
    """A server asked to flush keeps its own 75 % once the quiesce connection was lost."""
    server = {"pct": 75.0, "lwm": 0.0}
    cur = FakeCursor(server)
    with quiesce._Flushing(cur, lambda: FakeConnection(server)):
        assert server["pct"] == 0.0
        cur.fail = True  # the quiesce connection goes away during the wait
    assert server == {"pct": 75.0, "lwm": 0.0}


def test_a_server_whose_options_cannot_be_put_back_is_not_reused():
    """When a fresh connection fails too, FlushNotRestored, and the run's managed server is
    marked so the next run starts it again instead of running on a server that flushes all along."""
    from services.worker.target.lifecycle import Settling

    server = {"pct": 75.0, "lwm": 0.0}
    cur = FakeCursor(server)
    with pytest.raises(quiesce.FlushNotRestored, match="innodb_max_dirty_pages_pct not put back"):
        with quiesce._Flushing(cur, lambda: FakeConnection(server, fail=True)):
            cur.fail = True

    class Managed:
        restart_before_reuse = False

    class Session:
        server = Managed()

    class Waits:
        def settle(self):
            raise quiesce.FlushNotRestored(2013, "quiesce: innodb_max_dirty_pages_pct not put back: lost")

    settling = Settling.__new__(Settling)
    settling.servers, settling.session, settling.waits, settling.report = None, Session(), Waits(), None
    with pytest.raises(quiesce.FlushNotRestored):
        settling.settle()
    assert Session.server.restart_before_reuse is True
