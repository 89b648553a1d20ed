"""Whether a target has settled from the runs before it, decided from status snapshots alone.

Pure: services/worker/target/quiesce.py reads the snapshots (SHOW GLOBAL STATUS, the history
list length, the process list) and acts on the decision; the unit tests feed literal ones.

Settled means: InnoDB dirty pages at or below ``max_dirty_pct`` of the buffer pool (or no longer
falling, see ``flushing_stopped``), the history list at or below ``max_history`` (purge caught
up), no pending InnoDB reads, writes or fsyncs, and no statement of an earlier run running.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from services.common.spec.targets import Quiesce

#: Seconds over which a dirty page count that has not fallen means the server flushes no more
#: while idle: MariaDB 10.5+ with innodb_max_dirty_pages_pct_lwm = 0 (its default) leaves pages
#: dirty until load or a checkpoint pushes them out, so waiting longer would change nothing.
#: Longer than the page cleaner's one-second sleep, so a flushing server shows a fall.
STEADY_S = 3.0

#: SHOW GLOBAL STATUS variables a snapshot reads.
STATUS_NAMES = ("Innodb_buffer_pool_pages_dirty", "Innodb_buffer_pool_pages_total", "Innodb_history_list_length",
                "Innodb_data_pending_reads", "Innodb_data_pending_writes", "Innodb_data_pending_fsyncs")

#: Characters of a running statement quoted when naming it.
INFO_CHARS = 120


@dataclass(frozen=True)
class Connection:
    """One row of SHOW FULL PROCESSLIST."""

    id: int
    user: str
    host: str
    db: str | None
    command: str
    time_s: float
    state: str | None = None
    info: str | None = None

    def describe(self) -> str:
        """How a failed run names it: ``connection 42 (bench@127.0.0.1:5123 on sbtest, Query for
        12 s, User sleep: SELECT SLEEP(600))``."""
        what = " ".join((self.info or "").split())
        if len(what) > INFO_CHARS:
            what = what[:INFO_CHARS] + "..."
        doing = ", ".join(p for p in (self.state, what) if p)
        return (f"connection {self.id} ({self.user}@{self.host} on {self.db}, {self.command} for {self.time_s:g} s"
                + (f", {doing}" if doing else "") + ")")


def client_host(host: str) -> str:
    """The client part of a process list Host: ``127.0.0.1:33894`` -> ``127.0.0.1`` (sockets
    show ``localhost``, without a port)."""
    head, sep, port = host.rpartition(":")
    return head if sep and port.isdigit() else host


def leftovers(rows: Sequence[Connection], me: Connection, database: str) -> list[Connection]:
    """The connections of ``rows`` an earlier run of this worker may have left running: same
    user as the load (``me`` is the worker's own connection, as the bench user), on the run's
    ``database``, from the same client host, running a statement (an idle one does no harm and
    ends with its client)."""
    mine = client_host(me.host)
    return [r for r in rows if r.id != me.id and r.user == me.user and r.db == database
            and client_host(r.host) == mine and r.command != "Sleep"]


def client_port(host: str) -> int | None:
    """The client's TCP port in a process list Host (None over a unix socket)."""
    _, sep, port = host.rpartition(":")
    return int(port) if sep and port.isdigit() else None


#: /proc/net/tcp's state of a connected socket (a client whose process died leaves FIN_WAIT2).
_ESTABLISHED = "01"


def live_client_ports(tcp_tables: Sequence[str], server_port: int) -> set[int]:
    """Local ports of this host's connected TCP sockets to ``server_port``, from the text of
    /proc/net/tcp and /proc/net/tcp6: the clients of the server that are still alive."""
    ports = set()
    for table in tcp_tables:
        for line in table.splitlines()[1:]:
            fields = line.split()
            if len(fields) < 4 or fields[3] != _ESTABLISHED:
                continue
            try:
                local, remote = int(fields[1].rsplit(":", 1)[1], 16), int(fields[2].rsplit(":", 1)[1], 16)
            except (IndexError, ValueError):
                continue
            if remote == server_port:
                ports.add(local)
    return ports


def abandoned(conns: Sequence[Connection], live_ports: set[int] | None, *, managed: bool) -> list[Connection]:
    """The connections of ``conns`` whose client is gone, so that ending them ends nobody's
    work: a TCP client whose port has no connected socket on this host (``live_ports``). Over a
    unix socket (``live_ports`` None) a client's liveness cannot be seen: on the worker's own
    ``managed`` server every one is the runs', on a DSN target none is ended (it may be a user's)."""
    if live_ports is None:
        return list(conns) if managed else []
    return [c for c in conns if (port := client_port(c.host)) is not None and port not in live_ports]


@dataclass(frozen=True)
class Snapshot:
    """What the target looked like ``elapsed_s`` seconds into the wait (None: not readable)."""

    elapsed_s: float
    dirty_pages: int | None = None
    total_pages: int | None = None
    history_length: int | None = None
    pending_reads: int | None = None
    pending_writes: int | None = None
    pending_fsyncs: int | None = None
    leftovers: tuple[Connection, ...] = ()

    @property
    def dirty_pct(self) -> float | None:
        if self.dirty_pages is None or not self.total_pages:
            return None
        return 100.0 * self.dirty_pages / self.total_pages

    @property
    def pending_io(self) -> int | None:
        known = [n for n in (self.pending_reads, self.pending_writes, self.pending_fsyncs) if n is not None]
        return sum(known) if known else None


def _int(status: Mapping[str, str], name: str) -> int | None:
    try:
        return int(status[name])
    except (KeyError, TypeError, ValueError):
        return None


def snapshot(elapsed_s: float, status: Mapping[str, str], *, history_length: int | None = None,
             leftovers: Sequence[Connection] = ()) -> Snapshot:
    """A snapshot from SHOW GLOBAL STATUS values (by name); ``history_length`` is used when the
    status has no Innodb_history_list_length (MySQL: from INNODB_METRICS or SHOW ENGINE INNODB STATUS)."""
    history = _int(status, "Innodb_history_list_length")
    return Snapshot(
        elapsed_s=elapsed_s,
        dirty_pages=_int(status, "Innodb_buffer_pool_pages_dirty"),
        total_pages=_int(status, "Innodb_buffer_pool_pages_total"),
        history_length=history if history is not None else history_length,
        pending_reads=_int(status, "Innodb_data_pending_reads"),
        pending_writes=_int(status, "Innodb_data_pending_writes"),
        pending_fsyncs=_int(status, "Innodb_data_pending_fsyncs"),
        leftovers=tuple(leftovers),
    )


_HISTORY = re.compile(r"^History list length\s+(\d+)", re.MULTILINE)


def history_from_innodb_status(text: str) -> int | None:
    """The history list length in SHOW ENGINE INNODB STATUS's TRANSACTIONS section."""
    m = _HISTORY.search(text)
    return int(m.group(1)) if m else None


def flushing_stopped(history: Sequence[Snapshot], steady_s: float = STEADY_S) -> bool:
    """Whether the dirty page count has not fallen below where it was ``steady_s`` seconds
    before the last snapshot: the server has stopped flushing on its own."""
    last = history[-1]
    if last.dirty_pages is None:
        return False
    before = [s for s in history if s.dirty_pages is not None and s.elapsed_s <= last.elapsed_s - steady_s]
    if not before:
        return False
    ref = before[-1]
    since = [s.dirty_pages for s in history if s.elapsed_s >= ref.elapsed_s and s.dirty_pages is not None]
    return min(since) >= ref.dirty_pages


def window(history: Sequence[Snapshot], steady_s: float = STEADY_S) -> list[Snapshot]:
    """The snapshots a later decision can still need (the last ``steady_s`` seconds and the one
    before them), so a long wait keeps a bounded history."""
    last = history[-1].elapsed_s
    older = [i for i, s in enumerate(history) if s.elapsed_s <= last - steady_s]
    return list(history[older[-1]:]) if older else list(history)


class Verdict(enum.Enum):
    SETTLED = "settled"
    WAIT = "wait"
    GIVE_UP = "give_up"


@dataclass(frozen=True)
class Decision:
    """What to do after the last snapshot, with what keeps the target from settling and what
    could not be read (so was not waited for)."""

    verdict: Verdict
    unsettled: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def assess(history: Sequence[Snapshot], rules: Quiesce, *, connections_only: bool = False) -> tuple[list[str], list[str]]:
    """(what is not settled, what is unknown) at the last snapshot of ``history``. With
    ``connections_only`` only statements of earlier runs count."""
    last = history[-1]
    busy: list[str] = []
    unknown: list[str] = []
    if not connections_only:
        pct = last.dirty_pct
        if pct is None:
            unknown.append("InnoDB dirty pages")
        elif pct > rules.max_dirty_pct and not flushing_stopped(history):
            busy.append(f"InnoDB dirty pages at {pct:.1f}% of the buffer pool, still being flushed "
                        f"(max_dirty_pct {rules.max_dirty_pct:g})")
        if last.history_length is None:
            unknown.append("InnoDB history list length")
        elif last.history_length > rules.max_history:
            busy.append(f"InnoDB history list length {last.history_length:,}: purge has not caught up "
                        f"(max_history {rules.max_history:,})")
        if last.pending_io is None:
            unknown.append("InnoDB pending I/O")
        elif last.pending_io > 0:
            parts = [_plural(n, w) for n, w in ((last.pending_reads, "read"), (last.pending_writes, "write"),
                                               (last.pending_fsyncs, "fsync")) if n]
            busy.append("InnoDB pending I/O: " + ", ".join(parts))
    busy.extend(f"{c.describe()} still running" for c in last.leftovers)
    return busy, unknown


def decide(history: Sequence[Snapshot], rules: Quiesce, *, connections_only: bool = False) -> Decision:
    """Settled, wait, or give up (``rules.timeout`` reached and something still busy)."""
    busy, unknown = assess(history, rules, connections_only=connections_only)
    if not busy:
        return Decision(Verdict.SETTLED, (), tuple(unknown))
    verdict = Verdict.GIVE_UP if history[-1].elapsed_s >= rules.timeout else Verdict.WAIT
    return Decision(verdict, tuple(busy), tuple(unknown))
