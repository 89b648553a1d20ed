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

The Loop class joins the pieces: a connection's state is in client.py, the counters in
sinks.py, the failure handling in failures.py and the blocking path in blocking.py.
"""

from __future__ import annotations

import ctypes
import heapq
import select
import time
from time import monotonic as _mono

from services.common.spec import ignore_errors as ignore
from services.common.spec.ignore_errors import IgnoreErrors
from services.worker.driver.native.arrivals import Schedule
from services.worker.driver.native.blocking import BlockingConnection
from services.worker.driver.native.client import EXEC, IDLE, QSTORE, QUERY, STORE, Client
from services.worker.driver.native.failures import FailureHandling
from services.worker.driver.native.libmariadb import (
    WAIT_READ,
    WAIT_WRITE,
    DbError,
    blocking_library,
    hot,
    hot_blocking,
    library,
)
from services.worker.driver.native.protocol import Fatal
from services.worker.driver.native.sinks import Sink, kind_hist
from services.worker.driver.window import AFTER, MEASURED, WARMUP
from services.workload.registry import OTHER, WRITE

#: Seconds after the deadline a stuck connection may hold up the end of a run.
DRAIN_GRACE_S = 30.0
#: Empty polls before the loop sleeps in epoll_wait. A reply is often on its way, and sleeping
#: costs a context switch; more polls than this cost more CPU per query than they save on a
#: client CPU of its own (measured: 0, 5, 20 and 100 polls), though they help on a shared one.
SPIN_POLLS = 4

_IN = select.EPOLLIN


class Loop(BlockingConnection, FailureHandling):
    """Runs every client of a load process from ``t0`` until ``deadline[1]`` (warming up until
    ``deadline[0]``); moving both to now (a Stop) or to zero (a fatal error) stops it early,
    letting transactions in flight finish uncounted. What completes counts in the window it
    completes in (window.py)."""

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
        c.stage = QUERY
        return self._text_cont(c, 0, self.lib.mysql_real_query_start(c.ret, c.conn.handle, c.text, len(c.text)))

    def _text_cont(self, c: Client, status: int, wait: int = -1) -> int:
        """Continue a plain-text statement (``wait`` is the flags its start just returned);
        0 when it has finished, raising DbError if it failed."""
        lib = self.lib
        while True:
            stage = c.stage
            if wait < 0:
                if stage == QUERY:
                    wait = lib.mysql_real_query_cont(c.ret, c.conn.handle, status)
                else:
                    wait = lib.mysql_store_result_cont(ctypes.byref(c.res), c.conn.handle, status)
            if wait:
                return wait
            wait = -1
            if stage == QUERY:
                if c.ret.value:
                    raise c.conn.error()
                if lib.mysql_field_count(c.conn.handle):
                    c.stage = QSTORE
                    wait = lib.mysql_store_result_start(ctypes.byref(c.res), c.conn.handle)
                    continue
                if c.by_rows:
                    c.rows = lib.mysql_affected_rows(c.conn.handle)
            else:
                if not c.res.value:
                    raise c.conn.error()
                lib.mysql_free_result(c.res.value)
            c.stage = IDLE
            return 0

    # -- transactions

    def _begin(self, c: Client, now: float, intended: float | None = None) -> bool:
        """Start the client's next transaction if the run allows one; False if it did not. Where
        it counts is decided when it completes (window.py)."""
        d = self.deadline
        if now >= d[1] or c.done or (c.left == 0 and d[0] <= now):
            c.done = True
            return False
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
        stage, deadline = c.stage, self.deadline
        if start:
            wait = 0
        elif stage == EXEC:
            wait = self._exec_cont(c.ret_ref, c.cur.ref, status)
        elif stage == STORE:
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
                if stage == EXEC or stage == STORE:
                    if c.ret.value:
                        raise c.conn.stmt_error(c.cur)
                    if stage == EXEC and c.cur.has_result:
                        # sysbench stores every result set (mysql_stmt_store_result) and frees it.
                        c.stage = STORE
                        wait = self._store_start(c.ret_ref, c.cur.ref)
                        continue
                    if stage == EXEC and c.by_rows:
                        c.rows = self._stmt_rows(c.cur.ref)
                    self._free(c.cur.ref)
                    c.stage = IDLE
                # A statement finished: it counts in the window it finished in (window.py's
                # window_of, inline), and so does the transaction it may end.
                kind = c.ops[c.i][0]
                if kind == WRITE and c.by_rows and not c.rows:
                    kind = OTHER
                if deadline[0] <= now < deadline[1]:
                    where = MEASURED
                    sink = c.sink
                    sink.counts[kind] += 1
                    if self.by_kind:
                        kind_hist(sink.kinds, kind).record((now - c.ts) * 1e6)
                elif now < deadline[0]:
                    where = WARMUP
                    self.warm.counts[kind] += 1
                else:
                    where = AFTER
                c.i += 1
                if c.i == len(c.ops):
                    if where == MEASURED:
                        sink.hist.record((now - c.t_start) * 1e6)
                        sink.counts["transactions"] += 1
                        if c.left > 0:
                            c.left -= 1
                    elif where == WARMUP:
                        self.warm.counts["transactions"] += 1
                    elif not c.in_flight_from:
                        c.in_flight_from = c.t_start
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
            c.stage = EXEC
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
                if c is None or c.stage == IDLE:
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
