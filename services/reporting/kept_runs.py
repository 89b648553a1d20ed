"""A cell's runs for one metric, split into the runs its number and verdict stand on and the runs
left out of them: a successful run the worker flagged for a stall, an overrun or a short window
measured something else than the cell's steady state (a 0 ms p95 of a run that completed nothing,
a q/s of a window shorter than ten response times), so it is left out as a failed run is, and said.

A side whose every run is flagged keeps them in its number (the table still shows what was
measured), but none of them in its verdict: that cell reads ``?``, nothing left to judge. Pure.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Iterable, Sequence

from services.reporting.stats import CellStats, describe

#: Why a flagged run is left out, in the words of the notes (the flags of ``RunQuality``).
_REASONS = {"short": "short window", "stall": "stall", "overrun": "overrun"}


def left_out_reason(flags: Iterable[str]) -> str:
    """Why a successful run with these quality flags is left out ("" : it is kept)."""
    return ", ".join(_REASONS.get(f, f) for f in flags)


@dataclass(frozen=True)
class LeftOut:
    """One successful run left out of a cell's verdict (and of its number, unless every run was)."""

    repetition: int
    reason: str


@dataclass(frozen=True)
class CellRuns:
    """One cell's runs for one metric: the values its number is over (the kept runs, or every
    successful run when none could be kept) in repetition order, its failed runs (left out), all
    its runs, successful runs that did not record the metric, and the runs left out of its verdict."""

    values: tuple[float, ...]
    failed: int = 0
    total: int = 0
    unrecorded: int = 0
    #: The repetition of each value (empty: values are repetitions 1, 2, ... in order).
    blocks: tuple[int, ...] = ()
    left_out: tuple[LeftOut, ...] = ()
    #: Of ``unrecorded``: runs that completed transactions yet have no latency figure (sysbench
    #: did not print it: ``messages.results.NOT_PRINTED``).
    unprinted: int = 0

    def by_block(self) -> dict[int, float | None]:
        """The kept values by repetition, as a page's verdicts pair them (a left-out run's block
        pairs nothing, so the other side's run of that block drops out of a paired test too)."""
        gone = {x.repetition for x in self.left_out}
        return {b: v for b, v in zip(self.blocks or range(1, len(self.values) + 1), self.values) if b not in gone}

    @functools.cached_property
    def stats(self) -> CellStats | None:
        """The values' summary, computed once however many tables show the cell (None: no values)."""
        return describe(self.values) if self.values else None


def cell_runs_of(runs: Sequence[tuple[int, float, str]], *, failed: int = 0, total: int = 0,
                 unrecorded: int = 0, unprinted: int = 0) -> CellRuns:
    """The cell of ``runs`` (repetition, value, why it is left out or ""), in repetition order."""
    kept = [(b, v) for b, v, why in runs if not why]
    shown = kept or [(b, v) for b, v, _ in runs]
    return CellRuns(tuple(v for _, v in shown), failed, total, unrecorded, tuple(b for b, _ in shown),
                    tuple(LeftOut(b, why) for b, _, why in runs if why), unprinted)


def as_judged(own: CellRuns, base: CellRuns) -> tuple[CellRuns, CellRuns]:
    """A comparison's two sides within one campaign as its verdict reads them: when the verdict
    pairs (two or more blocks both sides kept), each side on those shared blocks only (not a
    block the other side left out, failed or did not record), so the ratio shown stands on the
    pairs the test does; else as they are (Welch on each side's kept runs)."""
    shared = own.by_block().keys() & base.by_block().keys()
    if len(shared) < 2:
        return own, base
    return _only(own, shared), _only(base, shared)


def _only(runs: CellRuns, blocks: set[int]) -> CellRuns:
    kept = [(b, v) for b, v in zip(runs.blocks or range(1, len(runs.values) + 1), runs.values) if b in blocks]
    if len(kept) == len(runs.values):
        return runs
    return dataclasses.replace(runs, values=tuple(v for _, v in kept), blocks=tuple(b for b, _ in kept))


def left_out_note(sides: Sequence[tuple[str, CellRuns | None]]) -> str:
    """The runs a cell leaves out, by side: "on repetition 2: short window; off repetition 1: stall"."""
    return "; ".join(f"{name} repetition {x.repetition}: {x.reason}" for name, runs in sides if runs is not None
                     for x in runs.left_out)
