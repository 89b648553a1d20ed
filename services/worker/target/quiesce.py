"""Quiescing a target before a run's warm-up: end what a failed run left running, ask a managed
server to flush, then look at the target every POLL_S seconds until the settling rules
(settling.py) say it has settled, or give up at the quiesce timeout.

Which statements are an earlier run's: those of the bench user on the run's database from this
worker's host (settling.leftovers); the worker waits for all of them. Load connections carry no
marker a server shows without performance_schema, which MariaDB leaves off. After a failed,
cancelled or retried run the worker also ends (KILL) those whose client is gone: a TCP client
whose port has no connected socket on this host (settling.abandoned), which is what a killed
load process or sysbench leaves; so a live client's statement (another worker's, a user's) is
never ended. On a managed server, reached over its unix socket, every one is the runs' own; on a
DSN target reached over a unix socket a client's liveness cannot be seen, so nothing is ended there.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import mysql.connector

from services.common import logs
from services.common.errors import DbError, TargetError
from services.common.messages.results import QuiesceReport
from services.common.spec.targets import Quiesce
from services.worker.target import settling
from services.worker.target.connect_params import ConnectParams
from services.worker.target.dsn import connect

log = logs.get(__name__)

#: Seconds between two looks at the target.
POLL_S = 0.5
#: MySQL errors of a KILL whose connection has already gone (unknown thread id).
_GONE = 1094
#: MySQL error of a connection to a database that does not exist (ER_BAD_DB_ERROR).
_NO_DATABASE = 1049


class TargetUnsettled(TargetError):
    """The target did not settle from earlier runs within its quiesce timeout; ``report`` says
    how long the worker waited and what was still going on."""

    def __init__(self, field: str, message: str, report: QuiesceReport):
        self.report = report
        super().__init__(field, message)


@dataclass(frozen=True)
class Phase:
    """What one pass of waiting did, so two passes (before and after prepare) add up."""

    waited_s: float
    polls: int
    ended: int
    last: settling.Snapshot
    decision: settling.Decision


def _rows(cur: Any, sql: str) -> list[tuple[Any, ...]]:
    cur.execute(sql)
    return list(cur.fetchall())


def _text(v: Any) -> str | None:
    if v is None:
        return None
    return v.decode(errors="replace") if isinstance(v, (bytes, bytearray)) else str(v)


def processlist(cur: Any) -> list[settling.Connection]:
    """SHOW FULL PROCESSLIST as Connections (MariaDB adds columns after Info; they are ignored)."""
    out = []
    for r in _rows(cur, "SHOW FULL PROCESSLIST"):
        out.append(settling.Connection(id=int(r[0]), user=_text(r[1]) or "", host=_text(r[2]) or "", db=_text(r[3]),
                                       command=_text(r[4]) or "", time_s=float(r[5] or 0), state=_text(r[6]) or None,
                                       info=_text(r[7])))
    return out


class _History:
    """The history list length where Innodb_history_list_length is not a status variable
    (MySQL): INNODB_METRICS, else SHOW ENGINE INNODB STATUS; both need PROCESS, and a source
    refused once is not asked again."""

    def __init__(self) -> None:
        self.sources: list[Callable[[Any], int | None]] = [self._metrics, self._engine_status]

    @staticmethod
    def _metrics(cur: Any) -> int | None:
        rows = _rows(cur, "SELECT COUNT FROM information_schema.INNODB_METRICS WHERE NAME = 'trx_rseg_history_len'")
        return int(rows[0][0]) if rows and rows[0][0] is not None else None

    @staticmethod
    def _engine_status(cur: Any) -> int | None:
        rows = _rows(cur, "SHOW ENGINE INNODB STATUS")
        return settling.history_from_innodb_status(_text(rows[0][2]) or "") if rows else None

    def read(self, cur: Any) -> int | None:
        for source in list(self.sources):
            try:
                value = source(cur)
            except mysql.connector.Error:
                value = None
            if value is not None:
                return value
            self.sources.remove(source)
        return None


def status(cur: Any) -> dict[str, str]:
    names = ", ".join(f"'{n}'" for n in settling.STATUS_NAMES)
    return {str(k): _text(v) or "" for k, v in _rows(cur, f"SHOW GLOBAL STATUS WHERE Variable_name IN ({names})")}


def live_ports(params: ConnectParams) -> set[int] | None:
    """The live client ports to the target on this host (None over a unix socket)."""
    if params.unix_socket:
        return None
    tables = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                tables.append(f.read())
        except OSError:
            pass
    return settling.live_client_ports(tables, params.port or 3306)


def _kill(cur: Any, c: settling.Connection) -> bool:
    try:
        cur.execute(f"KILL CONNECTION {int(c.id)}")
    except mysql.connector.Error as e:
        if e.errno != _GONE:
            log.warning("quiesce_kill_refused", connection=c.id, error=f"{e.errno} {e.msg}")
        return False
    log.info("quiesce_connection_ended", connection=c.describe())
    return True


class FlushNotRestored(DbError):
    """The managed server's dirty page options could not be put back (on the quiesce connection
    nor on a fresh one): left at innodb_max_dirty_pages_pct = 0 it would flush throughout the next
    runs, so the server must not be reused as it is."""


def _restore(cur: Any, saved: tuple[Any, Any]) -> None:
    # Setting the pct below the low-water mark lowered the mark too: the pct first.
    pct, lwm = saved
    cur.execute("SET GLOBAL innodb_max_dirty_pages_pct = %s", (float(pct),))
    cur.execute("SET GLOBAL innodb_max_dirty_pages_pct_lwm = %s", (float(lwm),))


class _Flushing:
    """Asks a managed server to flush every dirty page now (innodb_max_dirty_pages_pct = 0)
    and puts the options back as they were: an idle MariaDB 10.5+ otherwise keeps them dirty
    until the next run's load pushes them out, mid-measurement. When the quiesce connection
    failed (it is often why the block ends early), they are put back on a fresh one
    (``reconnect``); FlushNotRestored when that fails too."""

    def __init__(self, cur: Any, reconnect: Callable[[], Any]):
        self.cur = cur
        self.reconnect = reconnect
        self.saved: tuple[Any, Any] | None = None

    def __enter__(self) -> "_Flushing":
        try:
            (pct, lwm), = _rows(self.cur, "SELECT @@GLOBAL.innodb_max_dirty_pages_pct, "
                                          "@@GLOBAL.innodb_max_dirty_pages_pct_lwm")
            self.cur.execute("SET GLOBAL innodb_max_dirty_pages_pct = 0")
            self.saved = (pct, lwm)
        except mysql.connector.Error as e:  # an old or unusual server: just wait
            log.warning("quiesce_flush_not_asked", error=f"{e.errno} {e.msg}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.saved is None:
            return
        try:
            _restore(self.cur, self.saved)
            return
        except mysql.connector.Error as e:
            log.warning("quiesce_flush_restore_retried", error=f"{e.errno} {e.msg}")
        try:
            conn = self.reconnect()
            try:
                _restore(conn.cursor(), self.saved)
            finally:
                try:
                    conn.close()
                except Exception:  # the options are back; a failing close changes nothing
                    pass
        except mysql.connector.Error as e:
            raise FlushNotRestored(e.errno or 0, f"quiesce: innodb_max_dirty_pages_pct not put back: {e.msg}") from None


def wait(cur: Any, me: settling.Connection, params: ConnectParams, rules: Quiesce, *, end_leftovers: bool,
         managed: bool = False, connections_only: bool = False, spent_s: float = 0.0,
         stop: threading.Event | None = None, poll_s: float = POLL_S) -> Phase:
    """Look at the target (``params``: the run's) until it has settled, the timeout (counted
    from ``spent_s`` already spent) is reached, or ``stop`` is set; first KILL the leftovers
    whose client is gone when ``end_leftovers`` (over a unix socket: only on a ``managed`` server)."""
    database = params.database
    history_source = _History()
    killed: set[int] = set()
    ended = 0
    history: list[settling.Snapshot] = []
    t0 = time.monotonic()
    polls = 0
    while True:
        left = settling.leftovers(processlist(cur), me, database)
        if end_leftovers and left:
            for c in settling.abandoned(left, live_ports(params), managed=managed):
                if c.id not in killed and c.command != "Killed":
                    killed.add(c.id)
                    ended += int(_kill(cur, c))
        st = {} if connections_only else status(cur)
        extra = None
        if not connections_only and "Innodb_history_list_length" not in st:
            extra = history_source.read(cur)
        polls += 1
        history.append(settling.snapshot(spent_s + time.monotonic() - t0, st, history_length=extra, leftovers=left))
        history = settling.window(history)
        decision = settling.decide(history, rules, connections_only=connections_only)
        if decision.verdict is not settling.Verdict.WAIT or (stop is not None and stop.is_set()):
            return Phase(time.monotonic() - t0, polls, ended, history[-1], decision)
        pause = min(poll_s, max(0.0, rules.timeout - history[-1].elapsed_s))
        if stop is not None:
            stop.wait(pause)
        else:
            time.sleep(pause)


def own_connection(cur: Any) -> settling.Connection:
    """This connection's process list row (as the server sees its user and client host)."""
    (cid,), = _rows(cur, "SELECT CONNECTION_ID()")
    for c in processlist(cur):
        if c.id == int(cid):
            return c
    raise DbError(0, f"connection {cid} is not in its own process list")


def report(phases: list[Phase], *, settled: bool) -> QuiesceReport:
    """The result's ``quiesce`` field for the passes of one run."""
    last = phases[-1]
    pct = last.last.dirty_pct
    return QuiesceReport(
        waited_s=round(sum(p.waited_s for p in phases), 3), settled=settled, polls=sum(p.polls for p in phases),
        ended_connections=sum(p.ended for p in phases), dirty_pct=round(pct, 2) if pct is not None else None,
        history_length=last.last.history_length, pending_io=last.last.pending_io,
        unsettled=list(last.decision.unsettled), unknown=list(last.decision.unknown))


class Quiescer:
    """One run's waits on one connection of its own: ``before_prepare`` ends an earlier failed
    run's statements (they would hold the locks prepare needs), ``settle`` waits for the rest."""

    def __init__(self, params: ConnectParams, rules: Quiesce, *, field: str, end_leftovers: bool, flush: bool,
                 managed: bool = False, stop: threading.Event | None = None, poll_s: float = POLL_S):
        self.params = params
        #: The worker's own server: over its unix socket every leftover is a run's.
        self.managed = managed
        self.rules = rules
        self.field = field
        self.end_leftovers = end_leftovers
        self.flush = flush
        self.stop = stop
        self.poll_s = poll_s
        self.phases: list[Phase] = []

    def _spent(self) -> float:
        return sum(p.waited_s for p in self.phases)

    def _pass(self, *, connections_only: bool) -> QuiesceReport:
        try:
            conn = connect(self.params)
        except mysql.connector.Error as e:
            raise DbError(e.errno, f"quiesce: {e.msg}") from None
        try:
            cur = conn.cursor()
            me = own_connection(cur)
            if connections_only or not self.flush:
                phase = self._wait(cur, me, connections_only)
            else:
                with _Flushing(cur, lambda: connect(self.params)):
                    phase = self._wait(cur, me, connections_only)
        except mysql.connector.Error as e:
            raise DbError(e.errno, f"quiesce: {e.msg}") from None
        finally:
            try:
                conn.close()
            except Exception:  # closing a dead connection must not hide the real error
                pass
        self.phases.append(phase)
        if phase.decision.verdict is settling.Verdict.GIVE_UP:
            rep = report(self.phases, settled=False)
            raise TargetUnsettled(self.field, f"the target did not settle within {self.rules.timeout:g} s "
                                              f"(quiesce.timeout): " + "; ".join(phase.decision.unsettled), rep)
        return report(self.phases, settled=phase.decision.verdict is settling.Verdict.SETTLED)

    def _wait(self, cur: Any, me: settling.Connection, connections_only: bool) -> Phase:
        return wait(cur, me, self.params, self.rules, end_leftovers=self.end_leftovers, managed=self.managed,
                    connections_only=connections_only, spent_s=self._spent(), stop=self.stop, poll_s=self.poll_s)

    def before_prepare(self) -> QuiesceReport | None:
        """After a failed run: end its statements and wait for them to go (None otherwise)."""
        if not self.end_leftovers:
            return None
        try:
            return self._pass(connections_only=True)
        except DbError as e:
            # A fresh server (a managed one just started for a retried or redelivered run) has
            # no database yet: no earlier statement can be running in it, and prepare makes it.
            if e.errno == _NO_DATABASE:
                log.info("quiesce_no_database", database=self.params.database)
                return None
            raise

    def settle(self) -> QuiesceReport:
        """Wait until the target has settled; TargetUnsettled naming what was still busy."""
        return self._pass(connections_only=False)
