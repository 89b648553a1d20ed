"""One load process's connections, driven by a single thread over epoll.

Each connection is a small state machine over libmariadb's non-blocking calls: start a
statement, and whenever its socket is ready continue it until the statement, then the
transaction, completes; then start the next. No thread per connection means no GIL hand-off
and no context switch per query, so the client spends less CPU per query than sysbench's
thread-per-connection loop and the server, not the client, sets the pace.

A process with a single connection in closed loop has nothing to multiplex: it runs its
statements with libmariadb's blocking calls instead, letting go of the GIL while they wait, as
sysbench's thread does (a send and a receive per statement; the non-blocking calls add a
receive that finds nothing, and the loop an epoll_wait or more, per statement).

The hot path only executes statements and bumps in-memory counters and a latency histogram;
a control thread samples the counters once a second (see child.py).
"""

from __future__ import annotations

import ctypes
import heapq
import random
import select
import time
from dataclasses import dataclass, field
from time import monotonic as _mono
from typing import Iterable

from services.common import ignore_errors as ignore
from services.common.histogram import Histogram
from services.common.ignore_errors import RECONNECT_ON, IgnoreErrors
from services.worker.driver.contract import Counts
from services.worker.driver.native.arrivals import Schedule
from services.worker.driver.native.libmariadb import (
    WAIT_READ,
    WAIT_WRITE,
    Connection,
    DbError,
    Statement,
    blocking_library,
    hot,
    hot_blocking,
    library,
)
from services.worker.driver.native.protocol import Fatal, Job
from services.workload.registry import COUNT_BY_ROWS, OTHER, WRITE
from services.workload.statements import Generator

#: Seconds after the deadline a stuck connection may hold up the end of a run.
DRAIN_GRACE_S = 30.0
#: Empty polls before the loop sleeps in epoll_wait. A reply is often on its way, and sleeping
#: costs a context switch; more polls than this cost more CPU per query than they save on a
#: client CPU of its own (measured: 0, 5, 20 and 100 polls), though they help on a shared one.
SPIN_POLLS = 4

COUNTERS = ("transactions", "read", "write", "other", "errors", "ignored_errors", "reconnects")

_IDLE, _EXEC, _STORE, _QUERY, _QSTORE = range(5)
_IN = select.EPOLLIN


def kind_hist(kinds: dict[str, Histogram], kind: str) -> Histogram:
    h = kinds.get(kind)
    if h is None:
        h = kinds[kind] = Histogram()
    return h


@dataclass
class Sink:
    """Where a connection records: the real one while measuring, a throwaway one while warming up."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    hist: Histogram = field(default_factory=Histogram)
    #: Statement latency per kind, filled only when the run asks for it.
    kinds: dict[str, Histogram] = field(default_factory=dict)
    errors_by_code: dict[str, int] = field(default_factory=dict)


def counted(sinks: Iterable[Sink]) -> Counts:
    """What these sinks counted so far, read while the loop may still be adding to them.

    Added up in the loop's own dicts, one Counts at the end: a Counts per connection costs the
    control thread five times as much (measured: 6.6 ms instead of 1.3 ms for 1000 connections),
    once a second, on the CPU the load loop runs on."""
    total = dict.fromkeys(COUNTERS, 0)
    codes: dict[str, int] = {}
    for s in sinks:
        for k, v in s.counts.items():
            total[k] += v
        for code, n in list(s.errors_by_code.items()):  # list(): the loop may add a code meanwhile
            codes[code] = codes.get(code, 0) + n
    return Counts(transactions=total["transactions"], reads=total["read"], writes=total["write"],
                  other=total["other"], errors=total["errors"], ignored_errors=total["ignored_errors"],
                  reconnects=total["reconnects"], errors_by_code=codes)


def runs_blocking(job: Job) -> bool:
    """Whether the job's process drives its connection with blocking calls: it has exactly one,
    in closed loop (open loop waits for arrivals, which the epoll loop's timers handle)."""
    return len(job.thread_ids) == 1 and job.rate <= 0


class Client:
    """One connection with its prepared statements, generator, random stream and the state of
    the transaction in flight."""

    # Slots: the loop reads and writes a dozen of these per query.
    __slots__ = ("params", "rng", "gen", "sink", "left", "last_end", "failure", "event", "ret", "ret_ref",
                 "res", "ops", "i", "stage", "cur", "text", "t_start", "ts", "now_sink", "measuring", "done",
                 "conn", "fd", "stmts", "mask", "by_rows", "rows", "blocking")

    def __init__(self, job: Job, thread_id: int, budget: int | None = None):
        self.params = job.params
        self.rng = random.Random(f"{job.seed}:{thread_id}")
        self.gen = Generator(job.workload, job.data, thread_id=thread_id, threads=job.threads,
                             seed_rng=random.Random(f"{job.seed}:{thread_id}:unique"))
        self.sink = Sink()
        #: Measured transactions left in fixed-event mode; -1: no limit.
        self.left = budget if budget is not None else -1
        self.last_end = 0.0
        self.failure: BaseException | None = None
        self.event = self.gen.event
        #: sysbench 1.0 counts a statement without a result set as a write only when it changed
        #: rows; sysbench 0.5 (the 2010 workloads) counted every INSERT/UPDATE/DELETE as one.
        self.by_rows = self.gen.definition.counting == COUNT_BY_ROWS
        #: Rows the last statement without a result set changed (read when by_rows).
        self.rows = 0
        self.ret = ctypes.c_int(0)
        self.ret_ref = ctypes.byref(self.ret)
        self.res = ctypes.c_void_p(0)
        self.ops: list = []
        self.i = 0
        self.stage = _IDLE
        self.cur: Statement | None = None
        self.text = b""
        self.t_start = 0.0
        self.ts = 0.0
        self.now_sink = self.sink
        self.measuring = False
        self.done = False
        self.conn: Connection | None = None
        #: The epoll events this connection is registered for (0: not registered).
        self.mask = 0
        #: Opened for blocking calls: the process's only connection, in closed loop.
        self.blocking = runs_blocking(job)
        self._open()

    def _open(self) -> None:
        conn = Connection(self.params, nonblocking=not self.blocking)
        try:
            self.stmts = {sql: conn.prepare(sql) for sql in self.gen.statements()}
        except BaseException:
            conn.close()
            raise
        self.conn, self.fd = conn, conn.fd

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class Loop:
    """Runs every client of a load process from ``t0`` until ``deadline[1]`` (warming up until
    ``deadline[0]``); zeroing both stops it early, letting transactions in flight finish."""

    def __init__(self, clients: list[Client], deadline: list[float], *, by_kind: bool,
                 schedule: Schedule | None = None, ignore_errors: IgnoreErrors = ignore.DEFAULT):
        self.clients = clients
        self.deadline = deadline
        self.by_kind = by_kind
        self.schedule = schedule
        self.ignore_errors = ignore_errors
        #: The first error outside the ignore list; it ends the run.
        self.fatal: Fatal | None = None
        self.warm = Sink()
        self.lib = library()
        h = hot()
        self._exec_start, self._exec_cont = h.mysql_stmt_execute_start, h.mysql_stmt_execute_cont
        self._store_start, self._store_cont = h.mysql_stmt_store_result_start, h.mysql_stmt_store_result_cont
        self._free = h.mysql_stmt_free_result
        self._stmt_rows = h.mysql_stmt_affected_rows
        hb = hot_blocking()
        self._b_execute, self._b_store = hb.mysql_stmt_execute, hb.mysql_stmt_store_result
        self._blib = blocking_library()
        self.ep = select.epoll()
        self.by_fd: dict[int, Client] = {}
        self.timers: list[tuple[float, int, Client]] = []  # (when, tiebreak, client): arrivals, restarts
        self.retry: list[tuple[float, int, Client, float]] = []  # reconnects: (when, tiebreak, client, pause)
        self.active = 0
        for c in clients:
            self._register(c)

    # -- registration

    def _register(self, c: Client) -> None:
        self.ep.register(c.fd, _IN)
        self.by_fd[c.fd] = c
        c.mask = _IN

    def _unregister(self, c: Client) -> None:
        if self.by_fd.pop(c.fd, None) is not None:
            c.mask = 0
            try:
                self.ep.unregister(c.fd)
            except (OSError, ValueError):
                pass

    def _want(self, c: Client, wait: int) -> None:
        # Almost always "readable"; a full send buffer asks for "writable" once in a while.
        m = (_IN if wait & ~WAIT_WRITE else 0) | (select.EPOLLOUT if wait & WAIT_WRITE else 0)
        if m and c.mask != m:
            self.ep.modify(c.fd, m)
            c.mask = m

    # -- statements

    def _text_start(self, c: Client, sql: str) -> int:
        """Send a plain-text statement (oltp_insert's); return libmariadb's wait flags, 0 when
        it has finished."""
        c.text = sql.encode()
        c.stage = _QUERY
        return self._text_cont(c, 0, self.lib.mysql_real_query_start(c.ret, c.conn.handle, c.text, len(c.text)))

    def _text_cont(self, c: Client, status: int, wait: int = -1) -> int:
        """Continue a plain-text statement (``wait`` is the flags its start just returned);
        0 when it has finished, raising DbError if it failed."""
        lib = self.lib
        while True:
            stage = c.stage
            if wait < 0:
                if stage == _QUERY:
                    wait = lib.mysql_real_query_cont(c.ret, c.conn.handle, status)
                else:
                    wait = lib.mysql_store_result_cont(ctypes.byref(c.res), c.conn.handle, status)
            if wait:
                return wait
            wait = -1
            if stage == _QUERY:
                if c.ret.value:
                    raise c.conn.error()
                if lib.mysql_field_count(c.conn.handle):
                    c.stage = _QSTORE
                    wait = lib.mysql_store_result_start(ctypes.byref(c.res), c.conn.handle)
                    continue
                if c.by_rows:
                    c.rows = lib.mysql_affected_rows(c.conn.handle)
            else:
                if not c.res.value:
                    raise c.conn.error()
                lib.mysql_free_result(c.res.value)
            c.stage = _IDLE
            return 0

    # -- transactions

    def _begin(self, c: Client, now: float, intended: float | None = None) -> bool:
        """Start the client's next transaction if the run allows one; False if it did not."""
        d = self.deadline
        if now >= d[1] or c.done:
            c.done = True
            return False
        if d[0] <= now:
            if c.left == 0:
                c.done = True
                return False
            c.measuring, c.now_sink = True, c.sink
        else:
            c.measuring, c.now_sink = False, self.warm
        c.ops = c.event(c.rng)
        c.i = 0
        c.t_start = now if intended is None else intended
        return True

    def _next(self, c: Client, now: float) -> bool:
        """After a transaction (or at the start): begin the next one now, or schedule it
        (open loop). True if a transaction was begun."""
        sched = self.schedule
        if sched is None:
            return self._begin(c, now)
        if now >= self.deadline[1] or c.done:
            c.done = True
            return False
        intended = sched.take(self.deadline[1])
        if intended is None:
            # No arrival before the deadline: idle up to it, so the interval ends where the
            # closed loop's would.
            c.done = True
            heapq.heappush(self.timers, (self.deadline[1], id(c), c))
            return False
        if intended > now:
            heapq.heappush(self.timers, (intended, id(c), c))
            return False
        return self._begin(c, now, intended)

    def _advance(self, c: Client, status: int, start: bool = False) -> None:
        """Drive ``c`` as far as it goes without waiting; ``start``: begin with statement
        ``c.i`` of the transaction just begun.

        The per-query path, and the only place prepared statements are started and finished;
        it calls no function of its own between two statements of a closed-loop transaction,
        each call being a measurable share of the client's CPU per point select."""
        stage = c.stage
        if start:
            wait = 0
        elif stage == _EXEC:
            wait = self._exec_cont(c.ret_ref, c.cur.ref, status)
        elif stage == _STORE:
            wait = self._store_cont(c.ret_ref, c.cur.ref, status)
        else:
            wait = self._text_cont(c, status)
        while True:
            if wait:
                if c.mask != _IN or wait & WAIT_WRITE:
                    self._want(c, wait)
                return
            now = _mono()
            if start:
                start = False
            else:
                stage = c.stage
                if stage == _EXEC or stage == _STORE:
                    if c.ret.value:
                        raise c.conn.stmt_error(c.cur)
                    if stage == _EXEC and c.cur.has_result:
                        # sysbench stores every result set (mysql_stmt_store_result) and frees it.
                        c.stage = _STORE
                        wait = self._store_start(c.ret_ref, c.cur.ref)
                        continue
                    if stage == _EXEC and c.by_rows:
                        c.rows = self._stmt_rows(c.cur.ref)
                    self._free(c.cur.ref)
                    c.stage = _IDLE
                # A statement finished.
                sink = c.now_sink
                kind = c.ops[c.i][0]
                if kind == WRITE and c.by_rows and not c.rows:
                    kind = OTHER
                sink.counts[kind] += 1
                if c.measuring and self.by_kind:
                    kind_hist(sink.kinds, kind).record((now - c.ts) * 1e6)
                c.i += 1
                if c.i == len(c.ops):
                    if c.measuring:
                        sink.hist.record((now - c.t_start) * 1e6)
                        sink.counts["transactions"] += 1
                        if c.left > 0:
                            c.left -= 1
                    c.last_end = now
                    if not self._next(c, now):
                        self.active -= 1
                        return
            # Start statement c.i.
            _, sql, params = c.ops[c.i]
            c.ts = now
            if params is None:
                wait = self._text_start(c, sql)
                continue
            st = c.stmts[sql]
            cells = st.int_cells
            if cells is not None:
                if len(cells) == 1:  # point selects, updates and deletes by id
                    cells[0].value = params[0]
                else:
                    for cell, v in zip(cells, params):
                        cell.value = v
            elif st.nparams:
                st.set(params)
            c.cur = st
            c.stage = _EXEC
            wait = self._exec_start(c.ret_ref, st.ref)

    def _start(self, c: Client, now: float, intended: float | None = None) -> None:
        """Begin a transaction on an idle client (at ``intended``, or the schedule's next
        arrival, or now) and drive it."""
        if self.schedule is None or intended is not None:
            began = self._begin(c, now, intended)
        else:
            began = self._next(c, now)
        if not began:
            return
        self.active += 1
        try:
            self._advance(c, 0, start=True)
        except DbError as e:
            self._failed(c, e)

    # -- errors

    def _failed(self, c: Client, e: DbError) -> None:
        """A statement failed. As sysbench's check_error decides: an error of the ignore list
        restarts the transaction (a lost connection reconnects first); any other ends the run."""
        code = int(e.errno or 0)
        sink = c.now_sink
        key = str(code)
        sink.errors_by_code[key] = sink.errors_by_code.get(key, 0) + 1
        sql = c.ops[c.i][1] if c.i < len(c.ops) else ""
        c.stage = _IDLE
        self.active -= 1
        if not ignore.ignores(self.ignore_errors, code):
            sink.counts["errors"] += 1
            self._fatal(c, code, e.msg, sql)
            return
        if code in RECONNECT_ON:
            self._lost(c, time.monotonic(), 0.05)
            return
        sink.counts["ignored_errors"] += 1
        # No ROLLBACK, as in sysbench: the server has rolled a deadlocked transaction back, and
        # the restarted transaction's BEGIN ends whatever else was left open.
        self._restart(c)

    def _restart(self, c: Client) -> None:
        # The same event again (sysbench's RESTART_EVENT): new statements, the event's start time
        # kept, so its latency includes the failed attempt and no new arrival is taken. Queued as
        # a timer due at once rather than started here, so a statement that fails at once again
        # (say with ignore_errors: all) loops in run(), not in ever deeper recursion.
        heapq.heappush(self.timers, (c.t_start, id(c), c))

    def _fatal(self, c: Client, code: int, message: str, sql: str) -> None:
        if self.fatal is None:
            self.fatal = Fatal(code, f"MySQL error {code}: {message}, for query '{sql}' (not in ignore_errors: "
                                     f"{ignore.describe(self.ignore_errors)})")
        # sysbench aborts the whole run: no connection starts another transaction.
        self.deadline[0] = self.deadline[1] = 0.0
        c.done = True

    def _lost(self, c: Client, now: float, pause: float) -> None:
        # Keeps trying until the end of the whole run, as sysbench's reconnect loop does, so a
        # restart of the server during warm-up still leaves a working connection for the measurement.
        self._unregister(c)
        c.close()
        if now >= self.deadline[-1]:
            c.done = True
            return
        try:
            c._open()
        except DbError:
            heapq.heappush(self.retry, (now + pause, id(c), c, min(1.0, pause * 2)))
            return
        c.now_sink.counts["reconnects"] += 1
        self._register(c)
        self._restart(c)

    # -- one blocking connection

    def _run_blocking(self, c: Client) -> None:
        """Drive the process's only connection (closed loop) with blocking calls until the run ends."""
        timers, retry = self.timers, self.retry
        began = self._begin(c, time.monotonic())
        while True:
            if began:
                try:
                    began = self._transaction_blocking(c)
                except DbError as e:
                    self._failed(c, e)
                    began = False
                continue
            now = time.monotonic()
            if timers:  # a transaction restarted after an ignored error
                when, _, c = heapq.heappop(timers)
                began = not c.done and self._begin(c, now, when)
                continue
            if retry:  # reconnecting after a lost connection
                when, _, c, pause = heapq.heappop(retry)
                if when > now:
                    time.sleep(when - now)
                self._lost(c, time.monotonic(), pause)
                continue
            break

    def _transaction_blocking(self, c: Client) -> bool:
        """Run the rest of ``c``'s transaction and begin the next; False when no next one began.

        The blocking twin of _advance, written out for the same reason: it calls no function
        of its own between two statements."""
        execute, store = self._b_execute, self._b_store
        free, stmt_rows, by_kind, by_rows = self._free, self._stmt_rows, self.by_kind, c.by_rows
        stmts, event, rng, deadline = c.stmts, c.event, c.rng, self.deadline
        ops, i, sink = c.ops, c.i, c.now_sink
        counts = sink.counts
        while True:
            kind, sql, params = ops[i]
            if by_kind:
                c.ts = _mono()
            if params is None:
                self._text_blocking(c, sql)
            else:
                st = stmts[sql]
                cells = st.int_cells
                if cells is not None:
                    if len(cells) == 1:
                        cells[0].value = params[0]
                    else:
                        for cell, v in zip(cells, params):
                            cell.value = v
                elif st.nparams:
                    st.set(params)
                ref = st.ref
                if execute(ref):
                    raise c.conn.stmt_error(st)
                if st.has_result:
                    # sysbench stores every result set (mysql_stmt_store_result) and frees it.
                    if store(ref):
                        raise c.conn.stmt_error(st)
                elif by_rows:
                    c.rows = stmt_rows(ref)
                free(ref)
            if kind == WRITE and by_rows and not c.rows:
                kind = OTHER
            counts[kind] += 1
            if by_kind and c.measuring:
                kind_hist(sink.kinds, kind).record((_mono() - c.ts) * 1e6)
            i += 1
            if i < len(ops):
                # _failed names the statement c.i, so it always points at the one running.
                c.i = i
                continue
            # The clock is read once per transaction unless statements are timed too.
            now = _mono()
            if c.measuring:
                sink.hist.record((now - c.t_start) * 1e6)
                counts["transactions"] += 1
                if c.left > 0:
                    c.left -= 1
            c.last_end = now
            if c.measuring and c.left and now < deadline[1] and deadline[0] <= now:
                # _begin's usual outcome, inline: the next transaction, measured like this one.
                c.ops = ops = event(rng)
                c.i = i = 0
                c.t_start = now
                continue
            if not self._begin(c, now):
                return False
            ops, i, sink = c.ops, 0, c.now_sink
            counts = sink.counts

    def _text_blocking(self, c: Client, sql: str) -> None:
        """A plain-text statement (oltp_insert's) on a blocking connection; DbError if it fails."""
        lib, handle = self._blib, c.conn.handle
        text = sql.encode()
        if lib.mysql_real_query(handle, text, len(text)):
            raise c.conn.error()
        if lib.mysql_field_count(handle):
            res = lib.mysql_store_result(handle)
            if not res:
                raise c.conn.error()
            lib.mysql_free_result(res)
        elif c.by_rows:
            c.rows = lib.mysql_affected_rows(handle)

    # -- the loop

    def run(self) -> None:
        clients = self.clients
        if len(clients) == 1 and clients[0].blocking:
            self._run_blocking(clients[0])
            self.ep.close()
            return
        now = time.monotonic()
        for c in clients:
            self._start(c, now)
        poll, timers, retry, by_fd = self.ep.poll, self.timers, self.retry, self.by_fd
        advance, readable, writable = self._advance, select.EPOLLIN | select.EPOLLERR | select.EPOLLHUP, select.EPOLLOUT
        stop_seen: float | None = None
        while True:
            now = time.monotonic()
            end = self.deadline[1]
            while timers and (timers[0][0] <= now or now >= end):
                when, _, c = heapq.heappop(timers)
                if now >= end or c.done:
                    c.done = True
                    c.last_end = max(c.last_end, min(now, end) if end else now)
                    continue
                self._start(c, now, when)
            while retry and retry[0][0] <= now:
                _, _, c, pause = heapq.heappop(retry)
                self._lost(c, now, pause)
            if self.active <= 0 and not timers and not retry:
                break
            if not end:
                stop_seen = stop_seen or now
            if now > (end if end else (stop_seen or now)) + DRAIN_GRACE_S:
                break  # a connection stuck past the grace period: the run ends without it
            events = poll(0)
            spins = SPIN_POLLS
            while not events and spins:
                events = poll(0)
                spins -= 1
            if not events:
                wake = min(x[0] for x in (timers[:1] + retry[:1])) if (timers or retry) else now + 0.05
                timeout = min(0.05, wake - time.monotonic())
                # epoll rounds its timeout up to whole milliseconds: sleep short of the next
                # arrival, then spin to it, so open-loop starts are not late by up to 1 ms.
                events = poll(timeout - 0.001) if timeout > 0.002 else poll(0)
            for fd, ev in events:
                c = by_fd.get(fd)
                if c is None or c.stage == _IDLE:
                    continue
                status = WAIT_READ if ev & readable else 0
                if ev & writable:
                    status |= WAIT_WRITE
                try:
                    advance(c, status)
                except DbError as e:
                    self._failed(c, e)
        self.ep.close()


def drive_clients(clients: list[Client], deadline: list[float], *, by_kind: bool,
                  schedule: Schedule | None, ignore_errors: IgnoreErrors = ignore.DEFAULT) -> Fatal | None:
    """Run the loop; return the error outside the ignore list that ended it, if one did. A bug in
    the loop stops the whole process's load and is reported by a client."""
    loop = Loop(clients, deadline, by_kind=by_kind, schedule=schedule, ignore_errors=ignore_errors)
    try:
        loop.run()
    except BaseException as e:  # noqa: BLE001 - reported to the parent as the run's failure
        if clients:
            clients[0].failure = e
        deadline[0] = deadline[1] = 0.0
    finally:
        for c in clients:
            if not c.last_end:
                c.last_end = time.monotonic()
    return loop.fatal
