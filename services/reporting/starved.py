"""Starved connections: in a window long enough to measure, connections that completed nothing.

A long window in which some connections never completed a transaction did not measure them
badly: the server left them waiting (a lock queue, an unfair scheduler, a thread pool's queue).
That is a finding about the server, listed per cell beside the collapse check with the age of the
oldest transaction still in flight at the window's end; short windows are listed as short
instead (services/reporting/stalls.py). Pure: result rows in, cells and lines out.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Sequence

from services.common.results.rows import ResultRow


@dataclass(frozen=True)
class StarvedCell:
    """One cell whose runs left connections without a completed transaction."""

    target: str
    workload: str
    threads: int
    #: Runs of the cell with a starved connection, of its successful runs that recorded a window.
    runs: int
    recorded: int
    #: The most connections one run starved, and the most transactions in flight at a window's end.
    starved_max: int
    in_flight_max: int
    #: The oldest transaction still in flight at any of those runs' window's end (seconds).
    oldest_in_flight_s: float

    def as_data(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def starved_cells(rows: Iterable[ResultRow]) -> list[StarvedCell]:
    """The cells with a starved connection in a successful run whose window was not short."""
    runs: dict[tuple[str, str, int], list[ResultRow]] = defaultdict(list)
    for r in rows:
        if r.status == "ok" and r.starved_connections is not None and "short" not in r.flags:
            runs[(r.workload, r.target, r.threads)].append(r)
    out = []
    for (workload, target, threads), cell in sorted(runs.items()):
        hit = [r for r in cell if r.starved_connections]
        if hit:
            out.append(StarvedCell(target, workload, threads, len(hit), len(cell),
                                   max(r.starved_connections or 0 for r in hit),
                                   max(r.in_flight_at_end or 0 for r in hit),
                                   max(r.oldest_in_flight_s or 0.0 for r in hit)))
    return out


def starved_lines(cells: Sequence[StarvedCell]) -> list[str]:
    """The note beside the collapse list: one line per cell; nothing when no run starved one."""
    if not cells:
        return []
    lines = ["Starved connections: connections that completed no transaction in a window long enough to "
             "measure (the server kept them waiting):"]
    for c in cells:
        lines.append(f"  {c.target} / {c.workload} / {c.threads} threads: {c.runs} of {c.recorded} runs, at most "
                     f"{c.starved_max:,} of {c.threads:,} connections starved; {c.in_flight_max:,} transactions in "
                     f"flight at the window's end, the oldest for {c.oldest_in_flight_s:,.1f} s")
    return lines


STARVED_HEADER = ["target", "workload", "threads", "runs", "recorded", "starved_max", "in_flight_max",
                  "oldest_in_flight_s"]


def starved_rows(cells: Sequence[StarvedCell]) -> list[list[object]]:
    """The cells as spreadsheet rows, header first."""
    return [list(STARVED_HEADER)] + [[getattr(c, k) for k in STARVED_HEADER] for c in cells]
