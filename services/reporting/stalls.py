"""Runs marked for stalls or overrun, the cells holding them, and the note listing them.

A cell's mean over its repetitions looks like any other when one repetition stalled for half its
time; the ``~`` mark sends the reader to the list of those runs. Pure: result rows in, marks and
lines out.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from services.common.results.rows import ResultRow
from services.common.results.stalls import OVERRUN_FRACTION, OVERRUN_MIN_S
from services.reporting.tables import MARK_STALL, Table


@dataclass(frozen=True)
class StalledRun:
    """One run the worker marked: where it ran, its stalled seconds, slowest transaction and overrun."""

    run_id: str
    target: str
    workload: str
    threads: int
    repetition: int
    flags: tuple[str, ...]
    stalled_s: int
    longest_stall_s: int
    max_ms: float
    overrun_s: float
    qps: float

    def as_data(self) -> dict[str, object]:
        """The run as plain JSON data (what the JSON exports list)."""
        return dict(dataclasses.asdict(self), flags=list(self.flags))


def stalled_runs(rows: Iterable[ResultRow]) -> list[StalledRun]:
    """The successful runs whose quality is flagged (stall or overrun), in cell order; failed runs
    are already left out of the numbers and listed as failures."""
    out = [StalledRun(r.run_id, r.target, r.workload, r.threads, r.repetition, r.flags, r.stalled_s or 0,
                      r.longest_stall_s or 0, r.max_ms, r.overrun_s or 0.0, r.qps)
           for r in rows if r.status == "ok" and r.flags]
    return sorted(out, key=lambda s: (s.workload, s.target, s.threads, s.repetition))


def assessed(rows: Iterable[ResultRow]) -> bool:
    """Whether any successful run was assessed for stalls (results stored before were not)."""
    return any(r.status == "ok" and r.quality_flags is not None for r in rows)


def mark_stalls(table: Table, found: Sequence[StalledRun]) -> Table:
    """``table`` with ``~`` on every cell holding a marked run, and on every comparison cell whose
    baseline cell holds one (its number depends on both)."""
    if not found:
        return table
    hits = stall_counts(found)
    spec = table.spec
    compared_with = None if spec.mode == "absolute" else spec.baseline
    rows = []
    for row in table.rows:
        cells = []
        for t, c in zip(table.threads, row.cells):
            n = stalled_behind(hits, (row.target, row.workload, t), compared_with)
            marked = n and c.value is not None
            cells.append(dataclasses.replace(c, mark=c.mark + MARK_STALL, stalled=n) if marked else c)
        rows.append(dataclasses.replace(row, cells=tuple(cells)))
    return dataclasses.replace(table, rows=tuple(rows))


def stall_counts(found: Iterable[StalledRun]) -> Counter[tuple[str, str, int]]:
    """How many marked runs each cell (target, workload, threads) holds."""
    return Counter((s.target, s.workload, s.threads) for s in found)


def stalled_behind(hits: Mapping[tuple[str, str, int], int], cell: tuple[str, str, int], baseline: str | None) -> int:
    """The marked runs behind a cell's number: its own, and, when it is compared with ``baseline``'s
    cell (None: not compared), the baseline cell's too (the comparison depends on both)."""
    target, workload, threads = cell
    own = hits.get(cell, 0)
    return own + hits.get((baseline, workload, threads), 0) if baseline is not None and target != baseline else own


def _threads(n: int) -> str:
    return f"{n} thread{'s' if n != 1 else ''}"


def stall_lines(found: Sequence[StalledRun], checked: bool = True) -> list[str]:
    """The note under the tables: one line per marked run (run id, stalled seconds, slowest
    transaction, overrun); a line saying none when runs were assessed; nothing when none was."""
    if not found:
        if not checked:
            return []
        return [f"No stall: every run completed transactions every second and ended within "
                f"{OVERRUN_FRACTION * 100:g}% of its planned time."]
    lines = [f"Stalls and overruns ({MARK_STALL}): runs with seconds without a completed transaction, or "
             f"wall time more than {OVERRUN_FRACTION * 100:g}% (and {OVERRUN_MIN_S:g} s) past warm-up + duration:"]
    for s in found:
        lines.append(f"  {s.target} / {s.workload} / {_threads(s.threads)} / repetition {s.repetition} "
                     f"(run {s.run_id}): {describe(s)}")
    return lines


def describe(s: StalledRun) -> str:
    """What happened to one marked run, in a few words with its numbers."""
    return (f"stalled {s.stalled_s} s (longest {s.longest_stall_s} s), max latency {s.max_ms:,.0f} ms, "
            f"overrun {s.overrun_s:.1f} s, {s.qps:,.0f} q/s")


def stall_rows(found: Sequence[StalledRun]) -> list[list[object]]:
    """The marked runs as spreadsheet rows, header first."""
    return [["run_id", "target", "workload", "threads", "repetition", "flags", "stalled_s", "longest_stall_s",
             "max_ms", "overrun_s", "qps"]] + [
        [s.run_id, s.target, s.workload, s.threads, s.repetition, ",".join(s.flags), s.stalled_s,
         s.longest_stall_s, s.max_ms, s.overrun_s, s.qps] for s in found]
