"""One connection of a load process: its prepared statements, generator, random stream and
the state of the statement and transaction in flight, which the loop advances."""

from __future__ import annotations

import ctypes
import random

from services.worker.driver.native.libmariadb import Connection, Statement
from services.worker.driver.native.protocol import Job
from services.worker.driver.native.sinks import Sink
from services.workload.registry import COUNT_BY_ROWS
from services.workload.statements import Generator, text_events, uses_prepared

#: Where a client's statement stands: none running, a prepared statement executing or storing its
#: result, a plain-text statement (oltp_insert's) running or storing its result.
IDLE, EXEC, STORE, QUERY, QSTORE = range(5)


def runs_blocking(job: Job) -> bool:
    """Whether the job's process drives its connection with blocking calls: it has exactly one,
    in closed loop (open loop waits for arrivals, which the epoll loop's timers handle)."""
    return len(job.thread_ids) == 1 and job.rate <= 0


class Client:
    """One connection with its prepared statements, generator, random stream and the state of
    the transaction in flight."""

    # Slots: the loop reads and writes a dozen of these per query.
    __slots__ = ("params", "rng", "gen", "sink", "left", "last_end", "failure", "event", "ret", "ret_ref",
                 "res", "ops", "i", "stage", "cur", "text", "t_start", "ts", "in_flight_from", "done",
                 "conn", "fd", "stmts", "mask", "by_rows", "rows", "blocking", "prepared")

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
        #: db_ps_mode auto: server-side prepared statements; disable: every statement as text.
        self.prepared = uses_prepared(job.workload)
        self.event = self.gen.event if self.prepared else text_events(self.gen.event)
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
        self.stage = IDLE
        self.cur: Statement | None = None
        self.text = b""
        self.t_start = 0.0
        self.ts = 0.0
        #: The start of this connection's transaction that was in flight at the window's end
        #: (it completed after it); 0.0: none.
        self.in_flight_from = 0.0
        self.done = False
        self.conn: Connection | None = None
        #: The epoll events this connection is registered for (0: not registered).
        self.mask = 0
        #: Opened for blocking calls: the process's only connection, in closed loop.
        self.blocking = runs_blocking(job)
        self._open()

    def _open(self) -> None:
        conn = Connection(self.params, nonblocking=not self.blocking,
                          compress=bool(self.gen.workload.option("mysql_compression")))
        try:
            self.stmts = {sql: conn.prepare(sql) for sql in self.gen.statements()} if self.prepared else {}
        except BaseException:
            conn.close()
            raise
        self.conn, self.fd = conn, conn.fd

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

