"""The results DB's connection: connecting (creating the database when asked), running a
statement again after a lost connection or while the DB is away, transactions and migrations.

Three kinds of failure leave the store, for callers to tell apart: StoreUnavailable (the DB
is away: wait and try again, the message is not to blame), StoreRefused (this write is wrong:
a run that does not exist, a value the DB rejects, a result too big for its packet limit), and
StoreError for the rest (a DB that answers but cannot be used as configured).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable, Iterable, NoReturn, Self, Sequence, TypeVar

import mysql.connector

from services.common import logs
from services.common.config import Settings
from services.common.errors import StoreError, StoreRefused, StoreUnavailable
from services.common.store.procedures import to_make as procedures_to_make
from services.common.store.schema import MIGRATIONS
from services.common.store.views import refresh_views

log = logs.get(__name__)

#: How every error of the DB's own begins.
_DB = "results DB: "
T = TypeVar("T")

#: MySQL errors after which the connection is gone or useless: connect again (the database is
#: in the connect parameters, so a new connection is in the right one) and run the statement again.
RECONNECT_ON = frozenset({
    1046,  # no database selected: a connection that lost its database
    1053,  # server shutdown in progress
    1152, 1158, 1159, 1160, 1161,  # aborted connection, network read/write errors
    1927,  # connection killed (KILL <id>)
    2002, 2003, 2005, 2006, 2013, 2014, 2055,  # cannot connect, gone away, lost, out of sync
    4031,  # disconnected by the server after wait_timeout (MySQL 8.0.24+)
})
#: Errors that pass by themselves: run the statement again on the same connection.
RETRY_ON = frozenset({
    1040, 1203,  # too many connections
    1205, 1213,  # lock wait timeout, deadlock
    1290,  # read-only (--read-only during a switchover)
})
#: MySQL errors that blame the values written, not the DB: data exceptions and integrity
#: violations (SQLSTATE classes 22 and 23), text the column's character set cannot hold, and a
#: statement above max_allowed_packet (the server closes the connection after that one).
REFUSED_SQLSTATE_CLASSES = ("22", "23")
ER_NET_PACKET_TOO_LARGE = 1153
#: mysys's EE_DELETE: the server failed to delete a file of its own.
EE_DELETE = 6
#: MySQL errors for a statement this user may not run: on a database, on a table, on a routine, a
#: privilege missing.
DENIED = frozenset({1044, 1142, 1370, 1227})
ER_BAD_DB_ERROR = 1049
ER_NO_SUCH_TABLE = 1146
ER_SP_ALREADY_EXISTS = 1304
REFUSED_ON = frozenset({ER_NET_PACKET_TOO_LARGE, 1366})
#: Tries of one statement (the first again at once, a lost connection needs no wait), then the
#: DB counts as away; pauses between tries double from RETRY_BACKOFF_S.
RETRY_ATTEMPTS = 4
RETRY_BACKOFF_S = 0.5
#: Seconds a user that may not migrate waits for a pending migration (the collector's first start
#: makes the schema; a submit right after it waits rather than fails).
SCHEMA_WAIT_S = 30


class StoreConnection:
    """A connection to the results DB that every part of the Store holds; not thread-safe (one per
    thread). A lost connection is made again on the next statement, into the same database."""

    def __init__(self, settings: Settings, *, attempts: int = RETRY_ATTEMPTS, backoff_s: float = RETRY_BACKOFF_S):
        self.settings = settings
        self.attempts = attempts
        self.backoff_s = backoff_s
        self._conn: Any = None
        #: Opened and not closed (``_conn`` is None between losing a connection and the next).
        self._open = False
        #: The server's max_allowed_packet, read on each new connection.
        self._packet_limit = 0
        #: Inside ``atomic``: statements are run once, on the transaction's connection.
        self._atomic = False
        #: An ``atomic`` inside the open transaction failed: it may not commit.
        self._doomed = False

    @property
    def _where(self) -> str:
        s = self.settings
        return f"{s.db_host}:{s.db_port}" if not s.db_socket else s.db_socket

    def _params(self) -> dict[str, Any]:
        params = self.settings.db_params()
        db = params["database"]
        # The name goes into CREATE DATABASE; only a plain identifier may (settings, not a spec, give it).
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", str(db)):
            raise StoreError(f"db_name: {db!r} is not a plain database name (letters, digits, _)")
        return params

    def _connect(self, *, create: bool = False, patient: bool = False) -> Any:
        """A new connection into the results DB (created first when ``create`` and missing);
        ``patient``: without read/write timeouts, for migrations that may work long on big tables."""
        params = self._params()
        if patient:
            params.pop("read_timeout", None)
            params.pop("write_timeout", None)
        try:
            conn = mysql.connector.connect(use_pure=False, autocommit=True, **params)
        except mysql.connector.Error as e:
            if e.errno == ER_BAD_DB_ERROR and create:
                self._create_database()
                return self._connect(patient=patient)
            what = (f"cannot connect to the results DB at {self._where} as {self.settings.db_user}: "
                    f"{e.errno} {e.msg}")
            raise (StoreUnavailable if _away(e) else StoreError)(what) from None
        try:
            cur = conn.cursor(buffered=True)
            cur.execute("SELECT @@max_allowed_packet")
            self._packet_limit = int(cur.fetchall()[0][0])
        except mysql.connector.Error as e:
            _close(conn)
            raise (StoreUnavailable if _away(e) else StoreError)(f"results DB: {e.errno} {e.msg}") from None
        return conn

    def _create_database(self) -> None:
        params = self._params()
        db = params.pop("database")
        try:
            conn = mysql.connector.connect(use_pure=False, autocommit=True, **params)
            try:
                conn.cursor().execute(f"CREATE DATABASE IF NOT EXISTS `{db}` CHARACTER SET utf8mb4")
            finally:
                _close(conn)
        except mysql.connector.Error as e:
            raise (StoreUnavailable if _away(e) else StoreError)(f"results DB {db!r}: {e.errno} {e.msg}") from None

    def open(self, migrate: bool = True) -> Self:
        """Connect, creating the database and applying migrations when asked."""
        self._conn = self._connect(create=migrate)
        self._open = True
        if migrate:
            self.migrate()
        return self

    def close(self) -> None:
        self._open = False
        if self._conn is not None:
            _close(self._conn)
            self._conn = None

    def __enter__(self) -> Self:
        return self if self._open else self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def execute(self, sql: str, params: Sequence[Any] = (), many: Iterable[Sequence[Any]] | None = None) -> Any:
        """Run one statement, connecting again when the connection was lost and trying again
        while the DB is away (every statement here may run twice)."""
        if not self._open:
            raise StoreError("store is not open")
        rows = None if many is None else list(many)
        if self._atomic:
            return self._execute_once(sql, params, rows)
        error = ""
        for attempt in range(1, self.attempts + 1):
            self._pause_before(attempt)
            try:
                if self._conn is None:
                    self._conn = self._connect()
                return _statement(self._conn, sql, params, rows)
            except StoreUnavailable as e:  # from _connect
                error = str(e)
            except mysql.connector.Error as e:
                error = f"{_DB}{e.errno} {e.msg}"
                self._drop_if_lost(e)
                if _refused(e):
                    raise StoreRefused(error, errno=e.errno) from None
                if not _away(e):
                    raise StoreError(error, errno=e.errno) from None
        raise StoreUnavailable(f"{error} (results DB at {self._where}, {self.attempts} tries)")

    def _pause_before(self, attempt: int) -> None:
        """The wait before try ``attempt``: none before the first two (a lost connection needs no
        wait), then doubling from ``backoff_s``."""
        if attempt > 2:
            time.sleep(self.backoff_s * 2 ** (attempt - 3))

    def retried(self, transaction: Callable[[], T]) -> T:
        """``transaction`` (one whole ``atomic``), run again while the DB is away, with the tries and
        pauses of one statement: rolled back whole, it is as safe to run again as a statement."""
        for attempt in range(1, self.attempts):
            self._pause_before(attempt)
            try:
                return transaction()
            except StoreUnavailable:
                pass
        self._pause_before(self.attempts)
        return transaction()

    def _execute_once(self, sql: str, params: Sequence[Any], rows: list | None) -> Any:
        """One statement of an ``atomic`` transaction: never tried again, nor on another connection
        (the statements before it would be lost); the caller runs the whole transaction again."""
        try:
            return _statement(self._conn, sql, params, rows)
        except mysql.connector.Error as e:
            self._drop_if_lost(e)
            raise _classified(e, f"{_DB}{e.errno} {e.msg}") from None

    def _drop_if_lost(self, e: mysql.connector.Error) -> None:
        """Forget a connection the error says is gone (or that the server closes after a packet too
        large): the next statement makes a new one."""
        if _lost(e) or e.errno == ER_NET_PACKET_TOO_LARGE:
            _close(self._conn)
            self._conn = None

    @contextmanager
    def atomic(self, what: str) -> Iterator[None]:
        """The statements run inside (through ``execute``, or a cursor of ``transaction``) are one
        transaction: a reader sees all of them or none. When one fails, or the commit, it is rolled
        back and raises without trying again (StoreUnavailable while the DB is away, else StoreError
        saying ``what`` could not be done): the caller runs it all again. Inside another ``atomic`` it
        is part of that one transaction, which commits or rolls back all of it."""
        if self._atomic:
            try:
                yield
            except BaseException as e:
                # No savepoint: what ran before the error stays in the enclosing transaction, so that
                # one may not commit, even when a caller handles this error and goes on.
                self._doomed = True
                self._raise_failure(e, what)
            return
        self.execute("SELECT 1")  # a live connection (made again if it was lost) for the transaction
        conn = self._conn
        try:
            conn.start_transaction()
            self._atomic, self._doomed = True, False
            yield
            if not self._doomed:
                conn.commit()
        except BaseException as e:
            _rollback(conn)
            self._raise_failure(e, what)
        finally:
            self._atomic = False
        if self._doomed:
            _rollback(conn)
            raise StoreError(f"{_DB}{what}: a part of it failed, so none of it was committed")

    def _raise_failure(self, e: BaseException, what: str) -> NoReturn:
        """Raise a transaction's error ``e``: the DB's errors as the store's, naming ``what``; others as they are."""
        if isinstance(e, StoreError):
            raise _doing(e, what) from None
        if not isinstance(e, mysql.connector.Error):
            raise e
        self._drop_if_lost(e)
        raise (StoreUnavailable if _away(e) else StoreError)(f"{_DB}{what}: {e.errno} {e.msg}", errno=e.errno) from None

    def reachable(self) -> bool:
        """Whether the results DB answers now (tells "DB away" from "DB refused this write")."""
        try:
            self.execute("SELECT 1").fetchall()
            return True
        except StoreError:
            return False

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Every row ``sql`` returns (run as ``execute`` does)."""
        return list(self.execute(sql, params).fetchall())

    def packet_limit(self) -> int:
        """The server's max_allowed_packet (connecting first when there is no connection)."""
        if self._conn is None:
            self.execute("SELECT 1")  # connects, reading the limit
        return self._packet_limit

    def transaction(self, what: str, statements: Callable[[Any], None]) -> None:
        """Run ``statements`` (given a cursor) in one transaction, as ``atomic`` does."""
        with self.atomic(what):
            statements(self._conn.cursor())

    # -- schema -----------------------------------------------------------------------------
    def migrate(self) -> int:
        """Apply pending migrations in order; returns the schema version now in force. A user that
        may not change the schema (a submitter, Grafana) changes nothing: while a migration is
        pending it waits up to SCHEMA_WAIT_S for one who may (a collector starting beside it), then
        StoreError says who may."""
        deadline = time.monotonic() + SCHEMA_WAIT_S
        told = False
        while True:
            try:
                return self._migrate()
            except _MayNotMigrate as e:
                if time.monotonic() >= deadline:
                    raise StoreError(f"{e} (waited {SCHEMA_WAIT_S} s): start the collector (it migrates), "
                                     "or run this once as an operator", errno=e.errno) from None
                if not told:
                    log.info("schema_awaited", reason=str(e))
                    told = True
                time.sleep(1)

    def _migrate(self) -> int:
        done = self._versions()
        if done is None:
            self._may_migrate("has no schema yet", "CREATE TABLE IF NOT EXISTS schema_migrations"
                              " (version INT NOT NULL PRIMARY KEY, applied_at DOUBLE NOT NULL)")
            done = set()
        pending = [(v, statements) for v, statements in MIGRATIONS if v not in done]
        if pending:
            # Backfills may work on big tables longer than a statement's read timeout.
            _close(self._conn)
            self._conn = None
            self._conn = self._connect(patient=True)
        try:
            for version, statements in pending:
                for sql in statements:
                    self._may_migrate(f"lacks schema version {version}", sql)
                # INSERT IGNORE: two services starting at once may both apply an idempotent step.
                self.execute("INSERT IGNORE INTO schema_migrations VALUES (%s, %s)", (version, time.time()))
                log.info("schema_migrated", version=version)
        finally:
            if pending:  # back to a connection with the timeouts
                _close(self._conn)
                self._conn = None
        refresh_views(self)  # views follow their tables' columns (views.py)
        self._refresh_procedures()
        return max([v for v, _ in MIGRATIONS] + list(done))

    def _versions(self) -> set[int] | None:
        """The migrations applied, None when the results DB has no schema_migrations table yet."""
        try:
            return {r[0] for r in self.rows("SELECT version FROM schema_migrations")}
        except StoreError as e:
            if e.errno == ER_NO_SUCH_TABLE:
                return None
            raise

    def _may_migrate(self, why: str, sql: str) -> None:
        """Run a schema statement; _MayNotMigrate when this user may not."""
        try:
            self.execute(sql)
        except StoreError as e:
            if e.errno not in DENIED:
                raise
            raise _MayNotMigrate(f"the results DB {self.settings.db_name} {why} and {self.settings.db_user} "
                                 f"may not change the schema", errno=e.errno) from None

    def _refresh_procedures(self) -> None:
        """Make the procedures submitters write through (store/procedures.py) when there are none
        and this user may; StoreError when they are of another version: only deploy/ensure-services
        replaces them, with the definer role (a store replacing them would become their definer)."""
        made = dict(self.rows("SELECT ROUTINE_NAME, ROUTINE_COMMENT FROM information_schema.ROUTINES"
                              " WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_TYPE = 'PROCEDURE'"))
        try:
            make = procedures_to_make(made)
        except ValueError as e:
            raise StoreError(f"results DB {self.settings.db_name}: {e}") from None
        for name, sql in make:
            try:
                self.execute(sql)
                log.info("procedure_made", procedure=name)
            except StoreError as e:
                # A user without the routine privileges sees none of them (the collector): not an error;
                # nor is one made meanwhile by a service starting beside this one.
                if e.errno not in DENIED and e.errno != ER_SP_ALREADY_EXISTS:
                    raise
                log.debug("procedure_not_made", procedure=name, error=str(e))


class _MayNotMigrate(StoreError):
    """A migration is pending and this user may not apply it."""


def _statement(conn: Any, sql: str, params: Sequence[Any], rows: list | None) -> Any:
    """``sql`` run once on ``conn`` (each of ``rows`` when given), its buffered cursor returned."""
    cur = conn.cursor(buffered=True)
    try:
        if rows is not None:
            cur.executemany(sql, rows)
        else:
            cur.execute(sql, tuple(params))
    except (OverflowError, ValueError) as e:
        # A parameter the client library cannot convert: the value is wrong, not the DB.
        raise StoreRefused(f"{_DB}cannot send a value: {type(e).__name__}: {e}") from None
    return cur


def _rollback(conn: Any) -> None:
    try:
        conn.rollback()
    except Exception:  # noqa: BLE001 - a lost connection (closed here or by the server) rolled it back already
        pass


def _doing(e: StoreError, what: str) -> StoreError:
    """The DB's error ``e`` (of one statement of a transaction) saying what it stopped: ``what``,
    outermost first when transactions nest. Errors of the store's own (a campaign that exists) stay."""
    if type(e) not in (StoreError, StoreUnavailable, StoreRefused) or not str(e).startswith(_DB):
        return e
    return type(e)(f"{_DB}{what}: {str(e)[len(_DB):]}", errno=e.errno)


def _classified(e: mysql.connector.Error, error: str) -> StoreError:
    """A MySQL error as the store's: refused (the values), unavailable (the DB away), or an error."""
    if _refused(e):
        return StoreRefused(error, errno=e.errno)
    return (StoreUnavailable if _away(e) else StoreError)(error, errno=e.errno)


def _lost(e: mysql.connector.Error) -> bool:
    """Whether a MySQL error means this connection is gone (the client library says so with no
    code, or -1: "MySQL Connection not available", once the server closed it after wait_timeout)."""
    return e.errno is None or e.errno < 0 or e.errno in RECONNECT_ON


def _away(e: mysql.connector.Error) -> bool:
    """Whether a MySQL error means the DB is away or busy for now (not: refuses this write)."""
    return _lost(e) or e.errno in RETRY_ON or _temp_file_lost(e)


def _temp_file_lost(e: mysql.connector.Error) -> bool:
    """The server could not remove an internal temporary table's file (``Error on delete of
    '/tmp/#sql-temptable-...MAI'``): its own bookkeeping, not the statement's, which was seen once
    failing a read of information_schema in a full test pass; the statement is run again."""
    return e.errno == EE_DELETE and "#sql" in (e.msg or "")


def _refused(e: mysql.connector.Error) -> bool:
    """Whether a MySQL error blames the values written (see REFUSED_ON)."""
    return e.errno in REFUSED_ON or (e.sqlstate or "")[:2] in REFUSED_SQLSTATE_CLASSES


def _close(conn: Any) -> None:
    try:
        conn.close()
    except Exception:  # closing a dead connection must not hide the real error
        pass
