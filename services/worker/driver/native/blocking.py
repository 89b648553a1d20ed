"""The load loop for a process whose only connection runs in closed loop: blocking libmariadb
calls that let go of the GIL while they wait, as sysbench's thread does, instead of epoll."""

from __future__ import annotations

import heapq
import time
from time import monotonic as _mono

from services.worker.driver.native.client import Client
from services.worker.driver.native.libmariadb import DbError
from services.worker.driver.native.sinks import Sink, kind_hist
from services.worker.driver.window import AFTER, MEASURED, WARMUP
from services.workload.registry import OTHER, WRITE


class BlockingConnection:
    """The Loop's path for one blocking connection; it starts transactions with the Loop's
    ``_begin`` and hands failures to its ``_failed`` and ``_lost`` (failures.py)."""

    deadline: list[float]
    by_kind: bool
    warm: Sink
    timers: list[tuple[float, int, Client]]
    retry: list[tuple[float, int, Client, float]]

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
        of its own between two statements. The clock is read once per statement, when it ends:
        a statement counts in the window it ended in (window.py), and the last one's reading
        ends the transaction too."""
        execute, store = self._b_execute, self._b_store
        free, stmt_rows, by_kind, by_rows = self._free, self._stmt_rows, self.by_kind, c.by_rows
        stmts, event, rng, deadline = c.stmts, c.event, c.rng, self.deadline
        sink, warm = c.sink, self.warm.counts
        counts, hist = sink.counts, sink.hist
        ops, i = c.ops, c.i
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
            now = _mono()
            if kind == WRITE and by_rows and not c.rows:
                kind = OTHER
            if deadline[0] <= now < deadline[1]:
                where = MEASURED
                counts[kind] += 1
                if by_kind:
                    kind_hist(sink.kinds, kind).record((now - c.ts) * 1e6)
            elif now < deadline[0]:
                where = WARMUP
                warm[kind] += 1
            else:
                where = AFTER
            i += 1
            if i < len(ops):
                # _failed names the statement c.i, so it always points at the one running.
                c.i = i
                continue
            c.last_end = now
            if where == MEASURED:
                hist.record((now - c.t_start) * 1e6)
                counts["transactions"] += 1
                if c.left > 0:
                    c.left -= 1
                if c.left:
                    # _begin's usual outcome, inline: the next transaction.
                    c.ops = ops = event(rng)
                    c.i = i = 0
                    c.t_start = now
                    continue
            elif where == WARMUP:
                warm["transactions"] += 1
            elif not c.in_flight_from:
                c.in_flight_from = c.t_start
            if not self._begin(c, now):
                return False
            ops, i = c.ops, 0

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

