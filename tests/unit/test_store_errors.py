"""How the results store sorts MySQL errors: the DB away (wait, never blame the message), the
message refused (dead-letter it), or neither."""

from __future__ import annotations

import mysql.connector
import pytest

from services.common import store
from services.common.store import connection as store_connection

#: The codes issue 13 names, and the client's -1 ("MySQL Connection not available", seen after
#: the server closed an idle connection at wait_timeout).
AWAY = {1046: "No database selected", 1053: "Server shutdown in progress", 1927: "Connection was killed",
        2003: "Can't connect to MySQL server", 2006: "MySQL server has gone away",
        2013: "Lost connection to MySQL server during query", 2055: "Lost connection to MySQL server",
        -1: "MySQL Connection not available.", 1205: "Lock wait timeout exceeded", 1213: "Deadlock found"}
REFUSED = {(1406, "22001"): "Data too long for column 'error'", (1264, "22003"): "Out of range value",
           (1366, "HY000"): "Incorrect string value", (1048, "23000"): "Column 'host' cannot be null",
           (1153, "08S01"): "Got a packet bigger than 'max_allowed_packet' bytes"}


@pytest.mark.parametrize("code", sorted(AWAY))
def test_db_away_errors_are_never_the_messages_fault(code):
    """Lost, killed, refused and timed-out connections, a missing database and lock waits mean
    "wait and try again"; none refuses the message."""
    e = mysql.connector.Error(msg=AWAY[code], errno=code, sqlstate="HY000")
    assert store_connection._away(e) and not store_connection._refused(e)


@pytest.mark.parametrize("code,sqlstate", sorted(REFUSED))
def test_data_errors_refuse_the_message(code, sqlstate):
    """Data exceptions, integrity violations and a too-big packet blame the values written."""
    e = mysql.connector.Error(msg=REFUSED[(code, sqlstate)], errno=code, sqlstate=sqlstate)
    assert store_connection._refused(e) and not store_connection._away(e)


def test_a_temporary_table_file_the_server_lost_is_tried_again_and_no_other_delete_error():
    """The server failing to delete its own temporary table's file (seen once on a read of
    information_schema) passes by itself; a failed delete of another file is not waited out."""
    lost = mysql.connector.Error(msg="Error on delete of '/tmp/#sql-temptable-ee4-1d14-2b.MAI' (Errcode: 2)",
                                 errno=6, sqlstate="HY000")
    other = mysql.connector.Error(msg="Error on delete of './bf/t1.frm' (Errcode: 13)", errno=6, sqlstate="HY000")
    assert store_connection._away(lost) and not store_connection._refused(lost)
    assert not store_connection._away(other)


def test_other_errors_are_neither():
    """A missing table or a missing grant is the DB's configuration: neither waiting by itself
    nor the message's fault (the collector waits, logs once, and dead-letters nothing)."""
    for code, sqlstate in ((1146, "42S02"), (1142, "42000")):
        e = mysql.connector.Error(msg="x", errno=code, sqlstate=sqlstate)
        assert not store_connection._away(e) and not store_connection._refused(e)


class _FakeConnection:
    """A connection that fails its next statements with the scripted errors, then answers."""

    def __init__(self, log: list, errors: list):
        self.log, self.errors = log, errors

    def cursor(self, buffered: bool = False):
        return self

    def execute(self, sql, params=()):
        if sql == "SELECT @@max_allowed_packet":
            return
        if self.errors:
            raise self.errors.pop(0)
        self.log.append(sql)

    def fetchall(self):
        return [(16 * 2**20,)]

    def close(self):
        pass


def test_every_connection_names_the_database_and_a_lost_one_is_made_again(monkeypatch):
    """A KILLed connection (2013) is replaced by a new one into the same database, and the
    statement runs again there; the DB staying away ends in StoreUnavailable after the tries."""
    from services.common.config import Settings
    from services.common.errors import StoreUnavailable

    connects: list[dict] = []
    executed: list[str] = []
    errors = [mysql.connector.Error(msg="Lost connection to MySQL server during query", errno=2013)]

    def connect(**params):
        connects.append(params)
        return _FakeConnection(executed, errors)

    monkeypatch.setattr(mysql.connector, "connect", connect)
    s = store.Store(Settings(db_name="bf_unit"), backoff_s=0.0).open(migrate=False)
    s.db.execute("UPDATE runs SET state='running'")
    assert [c["database"] for c in connects] == ["bf_unit", "bf_unit"]
    assert executed == ["UPDATE runs SET state='running'"]
    errors.extend(mysql.connector.Error(msg="Can't connect", errno=2003) for _ in range(store_connection.RETRY_ATTEMPTS))
    with pytest.raises(StoreUnavailable, match="2003"):
        s.db.execute("SELECT 1")
    assert all(c["database"] == "bf_unit" for c in connects)
