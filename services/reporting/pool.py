"""The thread pool as the status monitor saw it: a summary per cell of the per-second series a
run stores (``server.pool``), and a one-line reading per (target, workload) of whether the pool
held at the highest thread count, decided by the thresholds below (docs/reports.md states them).

Pure: result rows carrying their whole results in, cells and lines out. Only the window's seconds
count (the warm-up is plotted, never summarised); a figure the server did not report is n/a.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Sequence

from services.common.messages.pool import PoolSecond
from services.common.results.rows import ResultRow
from services.reporting.render.formats import md_text

#: A pool holds at a thread count when, over the window seconds of its runs, groups were stalled
#: in at most this share of them: a group stalls when its worker runs past thread_pool_stall_limit,
#: and a pool stalled most seconds is running one thread per waiting statement.
MAX_STALLED_SHARE = 0.10
#: ... connections were queued while no transaction committed in at most this share of them (only
#: for workloads that commit: autocommit statements leave Com_commit alone) ...
MAX_STUCK_SHARE = 0.10
#: ... and the longest wait in the queue, median over seconds, is at most this: a closed loop at
#: saturation keeps its connections queued, but a fair pool serves each within one round of the
#: queue (about 0.4 s a statement for oltp_read_write at 4096 clients on 2 cores); waits past a
#: second are connections passed over.
MAX_OLDEST_QUEUED_MS = 1000.0


@dataclass(frozen=True)
class PoolCell:
    """One cell's monitor figures: medians over its runs' window seconds (None: not reported)."""

    target: str
    workload: str
    threads: int
    runs: int
    seconds: int
    pool_threads: float | None
    idle_threads: float | None
    threads_running: float | None
    threads_connected: float | None
    commits_per_s: float | None
    queue_length: float | None
    queued_high: float | None
    queued_low: float | None
    oldest_queued_ms: float | None
    #: Seconds the pool's tables were read in; of them, seconds with a stalled group, and seconds
    #: with connections queued and no commit (None where the workload committed nothing).
    table_seconds: int
    stalled_seconds: int
    stuck_seconds: int | None
    stalls_per_s: float | None
    tables_reason: str | None = None


def _median(values: Iterable[float | int | None]) -> float | None:
    known = [float(v) for v in values if v is not None]
    return statistics.median(known) if known else None


def pool_cells(rows: Iterable[ResultRow]) -> list[PoolCell]:
    """The cells whose successful runs carry a monitor series, in (workload, target, threads) order."""
    runs: dict[tuple[str, str, int], list[ResultRow]] = defaultdict(list)
    for r in rows:
        if r.status == "ok" and r.result is not None and r.result.server.pool is not None:
            runs[(r.workload, r.target, r.threads)].append(r)
    out = []
    for (workload, target, threads), cell in sorted(runs.items()):
        series = [r.result.server.pool for r in cell if r.result is not None and r.result.server.pool is not None]
        secs: list[PoolSecond] = [s for p in series for s in p.window()]
        read = [s for s in secs if s.groups is not None]
        commits = any((s.commits_per_s or 0) > 0 for s in secs)
        reasons = sorted({p.tables_reason for p in series if p.tables_reason})
        out.append(PoolCell(
            target, workload, threads, len(cell), len(secs),
            pool_threads=_median(s.threads for s in secs), idle_threads=_median(s.idle_threads for s in secs),
            threads_running=_median(s.threads_running for s in secs),
            threads_connected=_median(s.threads_connected for s in secs),
            commits_per_s=_median(s.commits_per_s for s in secs), queue_length=_median(s.queue_length for s in read),
            queued_high=_median(s.queued_high for s in read), queued_low=_median(s.queued_low for s in read),
            oldest_queued_ms=_median(s.oldest_queued_ms for s in read), table_seconds=len(read),
            stalled_seconds=sum(1 for s in read if s.stalled_groups),
            stuck_seconds=sum(1 for s in read if s.queue_length and s.commits_per_s == 0) if commits else None,
            stalls_per_s=_median(s.stalls_per_s for s in read), tables_reason="; ".join(reasons) or None))
    return out


@dataclass(frozen=True)
class PoolReading:
    """Whether a target's pool held at its highest thread count for one workload, and why."""

    cell: PoolCell
    held: bool
    reasons: tuple[str, ...]

    def line(self) -> str:
        c = self.cell
        head = f"{c.target} / {c.workload}: the pool {'held' if self.held else 'did not hold'} at {c.threads} threads"
        return f"{head}: {', '.join(self.reasons)}."


def _ms(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.0f} ms"


def reading(cell: PoolCell) -> PoolReading | None:
    """The reading of one cell by the thresholds above; None when its pool tables were never read."""
    n = cell.table_seconds
    if n == 0:
        return None
    stalled_ok = cell.stalled_seconds <= MAX_STALLED_SHARE * n
    stuck_ok = cell.stuck_seconds is None or cell.stuck_seconds <= MAX_STUCK_SHARE * n
    wait_ok = cell.oldest_queued_ms is None or cell.oldest_queued_ms <= MAX_OLDEST_QUEUED_MS
    held = stalled_ok and stuck_ok and wait_ok
    queue = "n/a" if cell.queue_length is None else f"{cell.queue_length:g}"
    reasons = [f"queues drained (median oldest wait {_ms(cell.oldest_queued_ms)}, median queue length {queue})"
               if wait_ok else
               f"median queue length {queue}, median oldest wait {_ms(cell.oldest_queued_ms)} "
               f"(over {MAX_OLDEST_QUEUED_MS:g} ms)"]
    if cell.stalled_seconds == 0:
        reasons.append("no stalled groups")
    else:
        limit = "at most" if stalled_ok else "over"
        reasons.append(f"groups stalled in {cell.stalled_seconds} of {n} s ({limit} {MAX_STALLED_SHARE:.0%})")
    if cell.stuck_seconds is None:
        reasons.append("no commit to follow (autocommit workload)")
    elif cell.stuck_seconds == 0:
        reasons.append("commits in every second")
    else:
        limit = "at most" if stuck_ok else "over"
        reasons.append(f"{cell.stuck_seconds} of {n} s with connections queued and no commit "
                       f"({limit} {MAX_STUCK_SHARE:.0%})")
    return PoolReading(cell, held, tuple(reasons))


def readings(cells: Sequence[PoolCell]) -> list[PoolReading]:
    """One reading per (target, workload) whose pool was read, at its highest thread count."""
    top: dict[tuple[str, str], PoolCell] = {}
    for c in cells:
        if c.table_seconds and ((c.workload, c.target) not in top or c.threads > top[(c.workload, c.target)].threads):
            top[(c.workload, c.target)] = c
    return [r for key in sorted(top) if (r := reading(top[key])) is not None]


HEADER = ("target", "workload", "threads", "runs", "seconds", "pool threads", "idle", "running", "connected",
          "commits/s", "queue", "queued high", "queued low", "oldest wait ms", "stalled s", "stalls/s")


def _f(v: float | int | None) -> str:
    if v is None:
        return "n/a"
    return f"{v:,.0f}" if abs(v) >= 10 or float(v).is_integer() else f"{v:.2f}"


def table_rows(cells: Sequence[PoolCell]) -> list[tuple[str, ...]]:
    """One row of text per cell, in HEADER order (medians over window seconds; n/a: not reported)."""
    return [(c.target, c.workload, str(c.threads), str(c.runs), str(c.seconds), _f(c.pool_threads),
             _f(c.idle_threads), _f(c.threads_running), _f(c.threads_connected), _f(c.commits_per_s),
             _f(c.queue_length), _f(c.queued_high), _f(c.queued_low), _f(c.oldest_queued_ms),
             "n/a" if not c.table_seconds else f"{c.stalled_seconds}/{c.table_seconds}", _f(c.stalls_per_s))
            for c in cells]


LEGEND = (f"Medians over the measured seconds of each cell's runs, read once a second by the status monitor "
          f"(through extra_port past a thread pool); n/a: the server did not report it. A pool held when groups "
          f"stalled in at most {MAX_STALLED_SHARE:.0%} of seconds, connections were queued with no commit in at "
          f"most {MAX_STUCK_SHARE:.0%}, and the median oldest wait in the queue was at most "
          f"{MAX_OLDEST_QUEUED_MS:g} ms.")


def pool_lines(cells: Sequence[PoolCell], *, markdown: bool = False) -> list[str]:
    """The section "Thread pool monitor": the readings, the per-cell table and its legend; nothing
    when no run carries a monitor series."""
    if not cells:
        return []
    said = [r.line() for r in readings(cells)] or ["No run read the thread pool's tables."]
    reasons = sorted({c.tables_reason for c in cells if c.tables_reason and not c.table_seconds})
    rows = table_rows(cells)
    if markdown:
        out = ["## Thread pool monitor", "", *[f"- {md_text(s)}" for s in said], "",
               "| " + " | ".join(HEADER) + " |", "| " + " | ".join(":---" if i < 2 else "---:" for i in range(len(HEADER))) + " |",
               *["| " + " | ".join(v.replace("|", "\\|") for v in row) + " |" for row in rows]]
    else:
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(HEADER)]
        out = ["Thread pool monitor", *said, "",
               "  ".join(h.ljust(w) if i < 2 else h.rjust(w) for i, (h, w) in enumerate(zip(HEADER, widths))),
               *["  ".join(v.ljust(w) if i < 2 else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths)))
                 for row in rows]]
    tail = [LEGEND, *[f"No pool figures: {r}." for r in reasons]]
    return out + [""] + ([md_text(t) for t in tail] if markdown else tail)
