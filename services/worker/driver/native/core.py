"""The compiled load core's Python face: a load process's Job becomes one ``_core.Core`` (csrc/)
holding every connection, its transaction program and its random stream; Python opens the
connections, starts the run and reads the counters, the core does everything per query.

Programs cross into C as plain tuples (``encode``), so the C side reads no dataclass; each
connection's random stream is sysbench's for the run's seed (workload/sb_random.py), handed
over as its state, so the core draws what the Python generators and sysbench draw.
"""

from __future__ import annotations

import random
import threading
from typing import Any

from services.common.errors import ClientLibraryError, DbError
from services.common.results.histogram import Histogram
from services.common.spec import ignore_policy as ignore
from services.worker.driver.counts import Counts
from services.worker.driver.native.protocol import Fatal, Job
from services.worker.target.connect_params import ConnectParams
from services.worker.driver.native.arrivals import MAX_BACKLOG
from services.workload import sb_random
from services.workload.program import Block, Const, Cycle, Digits, Distribution, Key, Program, Ref, Statement, Unique
from services.workload.registry import COUNT_BY_ROWS, OTHER, RAND_TYPES, READ, WRITE

try:
    from services.worker.driver.native import _core
except ImportError as e:  # pragma: no cover - a broken install, reported when a run starts
    _core = None
    _IMPORT_ERROR: ImportError | None = e
else:
    _IMPORT_ERROR = None

#: Seconds a connection may take to open (libmariadb's MYSQL_OPT_CONNECT_TIMEOUT).
CONNECT_TIMEOUT_S = 10

_KINDS = {READ: 0, WRITE: 1, OTHER: 2}
_KEY, _REF, _DIGITS, _CONST, _NULL, _UNIQUE, _CYCLE = range(7)


def module() -> Any:
    """The compiled module; ClientLibraryError saying how to build it when it is missing."""
    if _core is None:
        raise ClientLibraryError(
            f"the compiled load core is not built ({_IMPORT_ERROR}); install the build dependencies with "
            "deploy/ensure-services build, then reinstall the package (make venv)")
    return _core


def _param(p: Any) -> tuple[int, int, int, int, int]:
    if isinstance(p, Key):
        return (_KEY, p.lo, p.hi, p.save, 0)
    if isinstance(p, Ref):
        return (_REF, p.reg, p.plus, 0, 0)
    if isinstance(p, Digits):
        return (_DIGITS, p.groups, 0, 0, 0)
    if isinstance(p, Const):
        return (_NULL, 0, 0, 0, 0) if p.value is None else (_CONST, p.value, 0, 0, 0)
    if isinstance(p, Unique):
        return (_UNIQUE, p.index, p.offset, p.step, p.plus)
    if isinstance(p, Cycle):
        return (_CYCLE, p.k, p.step, p.size, 0)
    raise ValueError(f"program parameter {p!r}: the load core has no generator of this type")


def encode(program: Program) -> tuple:
    """The program as the core reads it: (blocks, distribution, by_rows, registers, prepared, tail_draws)."""
    d = program.distribution
    blocks = tuple(
        (b.tables, b.repeat, tuple((_KINDS[s.kind], s.text, s.sql, tuple(_param(p) for p in s.params))
                                   for s in b.statements))
        for b in program.blocks)
    dist = (RAND_TYPES.index(d.name), d.iters, d.pct, d.res, float(d.pareto_h), float(d.zipfian_exp))
    return (blocks, dist, program.counting == COUNT_BY_ROWS, program.registers, program.prepared(),
            program.tail_draws)


def draw(program: Program, rng: random.Random, events: int) -> list[list[tuple]]:
    """``events`` transactions of ``program`` drawn by the core from a copy of ``rng``'s state,
    in program.Interpreter's shape (for tests: both must agree)."""
    return module().draw(encode(program), rng.getstate(), events)


def connect_tuple(params: ConnectParams, *, compress: bool = False) -> tuple:
    """``params`` as the core's connect takes them; over a socket the host is "localhost", which
    is how libmariadb is told to use it, and TLS only when a CA is set and TLS is not disabled.
    ``compress``: the compressed protocol (mysql_compression); clear-text authentication only
    when the operator allows it (the connection is otherwise restricted to hashing plugins)."""
    sock = params.unix_socket
    return ("localhost" if sock else params.host or "127.0.0.1", params.user, params.password,
            params.database or None, params.port or 3306, sock or None,
            params.ssl_ca if params.ssl_ca and not params.ssl_disabled else None, CONNECT_TIMEOUT_S,
            bool(compress), bool(params.allow_cleartext))


def connect_once(params: ConnectParams) -> None:
    """Open one connection as a run's would and close it; DbError as the run would get it."""
    lib = module()
    program = Program((Block((Statement(OTHER, ("DO 0",), text=True),)),), Distribution("uniform"))
    core = lib.Core([encode(program)], [random.Random(0).getstate()], [-1], connect_tuple(params), False, None,
                    True, 0.0, None, MAX_BACKLOG)
    try:
        core.open(0)
    except lib.Error as e:
        code, message = e.args
        raise DbError(int(code), str(message)) from None
    finally:
        core.close()


def runs_blocking(job: Job) -> bool:
    """Whether the job's process drives its connection with blocking calls: it has exactly one,
    in closed loop (open loop waits for arrivals, which the epoll loop's timers handle)."""
    return len(job.thread_ids) == 1 and job.rate <= 0


class LoadCore:
    """The connections of one load process in the compiled core."""

    def __init__(self, job: Job):
        lib = module()
        # Equal programs share one encoding, and the core one compiled copy of it.
        encoded = [encode(p) for p in job.programs]
        programs = [encoded[i] for i in job.program_of]
        states = [s.getstate() for s in sb_random.connection_streams(job.seed, job.thread_ids)]
        budgets = [-1 if b is None else int(b) for b in (job.budgets or (None,) * len(job.thread_ids))]
        policy = None if job.ignore_errors == ignore.ALL else tuple(job.ignore_errors)
        arrivals = random.Random(f"{job.seed}:arrivals:{job.index}").getstate() if job.rate > 0 else None
        self.blocking = runs_blocking(job)
        self.ignore_errors = job.ignore_errors
        self.rate = job.rate
        self.core = lib.Core(programs, states, budgets, connect_tuple(job.params, compress=job.compress), job.by_kind,
                             policy, self.blocking, float(job.rate), arrivals,
                             MAX_BACKLOG if job.backlog_limit is None else job.backlog_limit, job.loops)
        self.connections = len(programs)

    def open(self) -> None:
        """Open every connection and prepare its statements, 16 at a time (the core lets go of
        the GIL while it waits); DbError for the first that fails, with every one closed and no
        more opened."""
        lib = module()

        def one(i: int) -> None:
            try:
                self.core.open(i)
            except lib.Error as e:
                code, message = e.args
                raise DbError(int(code), str(message)) from None

        # Sixteen threads take the next connection in turn, with nothing kept per connection on
        # Python's side (a future each would add megabytes at thousands of connections, at the
        # moment the connections' own memory peaks); the first failure stops the rest.
        todo = iter(range(self.connections))
        lock = threading.Lock()
        failures: list[BaseException] = []

        def opener() -> None:
            while not failures:
                with lock:
                    i = next(todo, None)
                if i is None:
                    return
                try:
                    one(i)
                except BaseException as e:  # noqa: BLE001 - the first one is raised below
                    failures.append(e)

        openers = [threading.Thread(target=opener, daemon=True) for _ in range(min(16, self.connections))]
        for t in openers:
            t.start()
        for t in openers:
            t.join()
        if failures:
            self.core.close()
            raise failures[0]

    def counts(self) -> Counts:
        """What the measured window counted so far, read while the core may still add to it."""
        trx, reads, writes, other, errors, ignored, reconnects, codes = self.core.counts()
        return Counts(transactions=trx, reads=reads, writes=writes, other=other, errors=errors,
                      ignored_errors=ignored, reconnects=reconnects, errors_by_code=codes)

    def latency(self) -> Histogram:
        """Transaction latency of the measured window so far."""
        buckets, max_us = self.core.latency()
        return Histogram(buckets, max_us)

    def queue(self, now: float) -> int | None:
        """Open loop: arrivals due by ``now`` that no connection has started; None when closed."""
        return self.core.queue(now)

    def kinds(self) -> dict[str, Histogram]:
        """Statement latency per kind (only kinds that ran)."""
        return {kind: Histogram(b, m) for kind, (b, m) in self.core.kinds().items() if b}

    def backlog(self) -> Fatal | None:
        """Open loop: the run's end when its backlog passed the bound, or None."""
        exceeded = self.core.backlog()
        if exceeded is None:
            return None
        return Fatal(None, f"the open-loop backlog passed {exceeded:,} transactions due and not started in one "
                           f"load process (rate {self.rate:g}/s there, its share of the run's bound of "
                           f"{MAX_BACKLOG:,}): its connections fell that far behind "
                           "the rate (the server, or the client, cannot keep it); a lower rate or more "
                           "connections measure it", behind=exceeded)

    def fatal(self) -> Fatal | None:
        """The error outside the ignore list that ended the run, if one did (a statement's, else
        an open-loop backlog past its bound)."""
        got = self.core.fatal()
        if got is None:
            return self.backlog()
        code, message, sql = got
        return Fatal(code, f"MySQL error {code}: {message}, for query '{sql}' (not in ignore_errors: "
                           f"{ignore.describe(self.ignore_errors)})")
