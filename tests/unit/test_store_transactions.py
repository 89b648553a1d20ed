"""The results DB's transactions (StoreConnection.atomic) on a fake connection: nesting, what their
errors say, and that no part of a failed one is committed."""

from __future__ import annotations

import mysql.connector
import pytest

from services.common.config import settings_from
from services.common.errors import StoreError, StoreUnavailable
from services.common.store.connection import StoreConnection


class FakeConn:
    """Records begin/statement/commit/rollback; a statement containing ``fail`` raises ``error``."""

    def __init__(self, error: Exception | None = None):
        self.log: list[str] = []
        self.error = error or mysql.connector.DatabaseError(msg="refused", errno=1644)
        self.closed = False

    def start_transaction(self) -> None:
        self.log.append("begin")

    def commit(self) -> None:
        self.log.append("commit")

    def rollback(self) -> None:
        if self.closed:
            raise RuntimeError("MySQLInterfaceError: the connection is closed")  # as the C extension's
        self.log.append("rollback")

    def close(self) -> None:
        self.closed = True

    def cursor(self, buffered: bool = False) -> "FakeConn":
        return self

    def execute(self, sql: str, params: tuple = ()) -> None:
        if "fail" in sql:
            raise self.error
        self.log.append(sql)


def _db(conn: FakeConn) -> StoreConnection:
    db = StoreConnection(settings_from(None))
    db._conn, db._open = conn, True
    return db


def test_a_nested_statement_error_names_both_transactions_and_nothing_commits():
    conn = FakeConn()
    db = _db(conn)
    with pytest.raises(StoreError) as e:
        with db.atomic("import campaign c1"):
            db.execute("INSERT campaign")
            with db.atomic("store the result of run r1"):
                db.execute("INSERT fail")
    assert str(e.value) == "results DB: import campaign c1: store the result of run r1: 1644 refused"
    assert conn.log == ["SELECT 1", "begin", "INSERT campaign", "rollback"] and not db._atomic


def test_a_nested_cursor_error_is_the_store_s_error():
    """A cursor's error inside a nested ``transaction`` reaches its caller as a StoreError (which the
    callers handle), not as the client library's exception."""
    conn = FakeConn()
    db = _db(conn)
    with pytest.raises(StoreError, match="^results DB: outer: cannot cancel: 1644 refused$"):
        with db.atomic("outer"):
            db.transaction("cannot cancel", lambda cur: cur.execute("UPDATE fail"))


def test_a_nested_failure_handled_by_its_caller_still_commits_nothing():
    """No savepoints: what ran before a nested failure is in the transaction, so a caller that handles
    the failure and goes on gets an error at the end instead of a part-committed transaction."""
    conn = FakeConn()
    db = _db(conn)
    with pytest.raises(StoreError, match="a part of it failed, so none of it was committed"):
        with db.atomic("outer"):
            try:
                with db.atomic("inner"):
                    db.execute("UPDATE one")
                    db.execute("UPDATE fail")
            except StoreError:
                pass
            db.execute("UPDATE two")
    assert "commit" not in conn.log and conn.log[-1] == "rollback"
    # The next transaction starts clean.
    with db.atomic("again"):
        db.execute("UPDATE three")
    assert conn.log[-1] == "commit"


def test_a_connection_lost_inside_is_unavailable_not_a_rollback_error():
    """A statement that loses the connection closes it; the rollback on the closed connection must not
    replace the error that says the DB is away (the caller runs the transaction again)."""
    conn = FakeConn(mysql.connector.OperationalError(msg="Lost connection to server during query", errno=2013))
    db = _db(conn)
    with pytest.raises(StoreUnavailable, match="^results DB: import campaign c1: 2013 Lost connection"):
        with db.atomic("import campaign c1"):
            db.execute("INSERT fail")
    assert conn.closed and db._conn is None


def test_a_whole_transaction_is_run_again_while_the_db_is_away_and_no_longer():
    db = StoreConnection(settings_from(None), attempts=3, backoff_s=0.0)
    calls: list[int] = []

    def away_twice() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise StoreUnavailable("results DB: 2013 Lost connection")
        return "stored"

    assert db.retried(away_twice) == "stored" and len(calls) == 3
    calls.clear()

    def always_away() -> str:
        calls.append(1)
        raise StoreUnavailable("results DB: 2013 Lost connection")

    with pytest.raises(StoreUnavailable):
        db.retried(always_away)
    assert len(calls) == 3
