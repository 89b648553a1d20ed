"""Throughput collapse: q/s at a thread count far below the peak reached at lower thread counts.

The seeds' thread-per-connection column is the case this exists for: 172083 q/s at 128
clients, 282 q/s at 4096. Pure: cells in, verdicts out, no I/O.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable

#: Below this fraction of the lower-concurrency peak a cell counts as collapsed. The
#: Prometheus alert has its own copy (recording rule ``benchfleet:collapse_fraction``).
DEFAULT_FRACTION = 0.5


@dataclass(frozen=True)
class CellThroughput:
    """Mean throughput of one finished cell."""

    target: str
    workload: str
    threads: int
    qps: float


@dataclass(frozen=True)
class AgainstPeak:
    """One cell's mean q/s against the best cell of the same target/workload at fewer threads:
    what a collapse point and a report's collapse finding both say."""

    target: str
    workload: str
    threads: int
    qps: float
    peak_threads: int
    peak_qps: float
    #: qps / peak_qps.
    ratio: float


@dataclass(frozen=True)
class CollapsePoint(AgainstPeak):
    """A cell against its peak, and whether its ratio fell below the collapse fraction."""

    collapsed: bool


def collapse_points(cells: Iterable[CellThroughput], *, fraction: float = DEFAULT_FRACTION) -> list[CollapsePoint]:
    """Every cell that has a lower thread count to compare with, ordered by target, workload, threads.

    Cells whose lower-concurrency peak is 0 q/s are left out: a ratio against nothing means nothing.
    """
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    groups: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    for c in cells:
        groups[(c.target, c.workload)][c.threads] = c.qps
    points: list[CollapsePoint] = []
    for (target, workload), by_threads in sorted(groups.items()):
        peak_threads, peak_qps = 0, 0.0
        for threads in sorted(by_threads):
            qps = by_threads[threads]
            if peak_qps > 0:
                ratio = qps / peak_qps
                points.append(CollapsePoint(target, workload, threads, qps, peak_threads, peak_qps,
                                            ratio, ratio < fraction))
            if qps > peak_qps:
                peak_threads, peak_qps = threads, qps
    return points


def collapses(cells: Iterable[CellThroughput], *, fraction: float = DEFAULT_FRACTION) -> list[CollapsePoint]:
    """Only the collapsed cells."""
    return [p for p in collapse_points(cells, fraction=fraction) if p.collapsed]


def at_top_threads(cells: Iterable[CellThroughput], *,
                   fraction: float = DEFAULT_FRACTION) -> dict[tuple[str, str], CollapsePoint]:
    """Per (target, workload), the point at the highest thread count: what the alert rule judges."""
    cells = list(cells)
    highest: dict[tuple[str, str], int] = {}
    for c in cells:
        highest[(c.target, c.workload)] = max(c.threads, highest.get((c.target, c.workload), 0))
    return {(p.target, p.workload): p for p in collapse_points(cells, fraction=fraction)
            if p.threads == highest[(p.target, p.workload)]}
