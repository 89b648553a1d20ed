"""Runs marked for stalls, overrun or a short window, the cells holding them, and the note
listing them.

A cell's mean over its repetitions looks like any other when one repetition stalled for half its
time, or when its window held a few transactions per connection; the ``~`` and ``<`` marks send
the reader to the list of those runs. Pure: result rows in, marks and lines out.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from services.common.messages.results import FellBehind
from services.common.results.rows import ResultRow
from services.common.results.stalls import MIN_COMPLETED_PER_CONNECTION, OVERRUN_FRACTION, OVERRUN_MIN_S
from services.reporting.tables import MARK_SHORT, MARK_STALL, Table

#: The flags the ``~`` mark stands for; "short" has ``<``. "behind": an open-loop run whose
#: connections fell behind the offered rate until its backlog ended it (a finding, stored).
_STALL_FLAGS = frozenset({"stall", "overrun", "behind"})


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
    #: None when no transaction completed.
    max_ms: float | None
    overrun_s: float
    qps: float
    #: Transactions completed per connection in the window, and (native driver) the fewest and
    #: the median one connection completed; None where not recorded.
    per_connection: float | None = None
    per_connection_min: int | None = None
    per_connection_median: float | None = None
    #: How far an open-loop run fell behind its rate ("behind"); None when not, or not read.
    behind: FellBehind | None = None

    @property
    def short(self) -> bool:
        return "short" in self.flags

    def as_data(self) -> dict[str, object]:
        """The run as plain JSON data (what the JSON exports list)."""
        return dict(dataclasses.asdict(self), flags=list(self.flags),
                    behind=self.behind.model_dump() if self.behind is not None else None)


def stalled_runs(rows: Iterable[ResultRow]) -> list[StalledRun]:
    """The successful runs whose quality is flagged (stall or overrun), in cell order; failed runs
    are already left out of the numbers and listed as failures."""
    out = [StalledRun(r.run_id, r.target, r.workload, r.threads, r.repetition, r.flags, r.stalled_s or 0,
                      r.longest_stall_s or 0, r.max_ms, r.overrun_s or 0.0, r.qps, *_per_connection(r), _behind(r))
           for r in rows if r.status == "ok" and r.flags]
    return sorted(out, key=lambda s: (s.workload, s.target, s.threads, s.repetition))


def _behind(r: ResultRow) -> FellBehind | None:
    q = r.result.quality if r.result is not None else None
    return q.behind if q is not None else None


def _per_connection(r: ResultRow) -> tuple[float | None, int | None, float | None]:
    """A run's completions per connection: the mean from the totals, the fewest and the median
    from its window (None where it recorded none)."""
    mean = r.tps * r.measured_s / r.threads if r.threads > 0 and r.measured_s > 0 else None
    return mean, r.completed_per_connection_min, r.completed_per_connection_median


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
            cell = (row.target, row.workload, t)
            n = stalled_behind(hits, cell, compared_with)
            if not n or c.value is None:
                cells.append(c)
                continue
            cells.append(dataclasses.replace(c, mark=c.mark + quality_mark(found, cell, compared_with), stalled=n))
        rows.append(dataclasses.replace(row, cells=tuple(cells)))
    return dataclasses.replace(table, rows=tuple(rows))


def quality_mark(found: Iterable[StalledRun], cell: tuple[str, str, int], baseline: str | None) -> str:
    """The marks of the runs behind a cell's number (as ``stalled_behind`` counts them): ``~`` for
    a stall or an overrun, ``<`` for a short window."""
    behind = [s for s in found if stalled_behind(stall_counts([s]), cell, baseline)]
    return ((MARK_STALL if any(_STALL_FLAGS & set(s.flags) for s in behind) else "")
            + (MARK_SHORT if any(s.short for s in behind) else ""))


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
    lines = []
    stalled = [s for s in found if {"stall", "overrun"} & set(s.flags)]
    if stalled:
        lines.append(f"Stalls and overruns ({MARK_STALL}): runs with seconds without a completed transaction, or "
                     f"wall time more than {OVERRUN_FRACTION * 100:g}% (and {OVERRUN_MIN_S:g} s) past warm-up + duration:")
    for s in stalled:
        lines.append(f"  {s.target} / {s.workload} / {_threads(s.threads)} / repetition {s.repetition} "
                     f"(run {s.run_id}): {describe(s)}")
    behind = [s for s in found if "behind" in s.flags]
    if behind:
        lines.append(f"Fell behind the offered rate ({MARK_STALL}): open-loop runs whose connections could not start "
                     "transactions as fast as they arrived, until the backlog ended the run (what it measured is kept):")
    for s in behind:
        lines.append(f"  {s.target} / {s.workload} / {_threads(s.threads)} / repetition {s.repetition} "
                     f"(run {s.run_id}): {describe_behind(s)}")
    short = [s for s in found if s.short]
    if short:
        lines.append(f"Short windows ({MARK_SHORT}): runs that completed fewer than {MIN_COMPLETED_PER_CONNECTION:g} "
                     "transactions per connection (a window shorter than that many mean response times; the "
                     "transactions in flight at its ends weigh on the figures):")
    for s in short:
        lines.append(f"  {s.target} / {s.workload} / {_threads(s.threads)} / repetition {s.repetition} "
                     f"(run {s.run_id}): {describe_short(s)}")
    return lines


def describe_behind(s: StalledRun) -> str:
    """How far a run fell behind its rate, where the whole result was read."""
    b = s.behind
    far = (f"{b.due:,} transactions due and not started after {b.after_s:,.1f} s at {b.rate:,.0f}/s offered, "
           if b is not None else "")
    return far + f"{s.qps:,.0f} q/s"


def describe_short(s: StalledRun) -> str:
    """A short run's completions per connection: the mean, and the fewest and median when recorded."""
    text = f"{s.per_connection:,.1f} transactions per connection" if s.per_connection is not None else "n/a"
    if s.per_connection_min is not None and s.per_connection_median is not None:
        text += f" (fewest {s.per_connection_min:,}, median {s.per_connection_median:,.1f})"
    return text + f", {s.qps:,.0f} q/s"


def describe(s: StalledRun) -> str:
    """What happened to one marked run, in a few words with its numbers."""
    latency = f"{s.max_ms:,.0f} ms" if s.max_ms is not None else "n/a (no transaction completed)"
    return (f"stalled {s.stalled_s} s (longest {s.longest_stall_s} s), max latency {latency}, "
            f"overrun {s.overrun_s:.1f} s, {s.qps:,.0f} q/s")


def stall_rows(found: Sequence[StalledRun]) -> list[list[object]]:
    """The marked runs as spreadsheet rows, header first."""
    return [["run_id", "target", "workload", "threads", "repetition", "flags", "stalled_s", "longest_stall_s",
             "max_ms", "overrun_s", "qps", "per_connection", "per_connection_min", "per_connection_median"]] + [
        [s.run_id, s.target, s.workload, s.threads, s.repetition, ",".join(s.flags), s.stalled_s,
         s.longest_stall_s, s.max_ms, s.overrun_s, s.qps, s.per_connection, s.per_connection_min,
         s.per_connection_median] for s in found]
