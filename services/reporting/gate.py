"""The regression gate (`--fail-on-slower PCT`) over judged tables, and its confirmation: the
failing cells judged again on a re-run of them alone, as a fresh family.

A gate read off one campaign fails now and then on noise however it is adjusted; a CI job that
re-runs only the failing cells and fails when they fail again trades minutes for false alarms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

from services.reporting.analysis import NamedTable
from services.reporting.page_verdicts import direction
from services.reporting.verdicts import CellFigures, Verdict, fails_gate, judge

#: (target, workload, threads): a cell the gate names.
CellKey = tuple[str, str, int]


@dataclass(frozen=True)
class Regression:
    """A cell whose adjusted interval lies wholly beyond the gate's threshold of slower."""

    target: str
    workload: str
    threads: int
    #: Target / baseline on the log scale (below 1 for q/s, above 1 for latency when slower).
    ratio: float
    #: The BH q-value of the cell in its page's family.
    q: float
    #: The ratio's interval at ``level`` (the page's Benjamini-Yekutieli level).
    low: float
    high: float
    level: float

    @property
    def key(self) -> CellKey:
        return self.target, self.workload, self.threads

    def describe(self, unit: str, label: str = "B/A") -> str:
        return (f"{self.target} {self.workload} t={self.threads}: {label} {self.ratio:.3f} "
                f"({(self.ratio - 1) * 100:+.1f}% {unit}, {self.level * 100:.3g}% interval "
                f"{(self.low - 1) * 100:+.1f}% to {(self.high - 1) * 100:+.1f}%, q = {self.q:.3g})")


def _regression(key: CellKey, v: Verdict) -> Regression:
    return Regression(*key, v.ratio, v.q, v.low, v.high, v.level)


def _verdicts(tables: Sequence[NamedTable], targets: Sequence[str] | None) -> list[tuple[CellKey, Verdict, NamedTable]]:
    """Every judged cell of ``tables``, named by its target (``targets[i]`` for table i when the
    rows are campaigns, as in a comparison; else the row's target)."""
    out = []
    for i, named in enumerate(tables):
        for row in named.table.rows:
            for threads, cell in zip(named.table.threads, row.cells):
                if cell.verdict is not None:
                    target = targets[i] if targets is not None else row.target
                    out.append(((target, row.workload, threads), cell.verdict, named))
    return out


def regressions(tables: Sequence[NamedTable], beyond: float, *, targets: Sequence[str] | None = None) -> list[Regression]:
    """Cells slower than their baseline by more than ``beyond`` (a fraction: 0.05 is 5%) beyond
    doubt and by at least the table's min-effect: the adjusted interval of the cell (its page's
    family) lies wholly past it in the direction the metric counts as worse."""
    return [_regression(key, v) for key, v, named in _verdicts(tables, targets)
            # --min-effect still applies: a confirmed slowdown smaller than that fails no gate.
            if fails_gate(v, direction(named.metric), beyond * 100) and abs(v.ratio - 1) >= named.table.spec.min_effect]


ConfirmState = Literal["confirmed", "cleared", "unmeasured"]


@dataclass(frozen=True)
class ConfirmedCell:
    """A cell that failed the gate, and what its re-run said: slower again, cleared, or not measured."""

    first: Regression
    state: ConfirmState
    #: The re-run's verdict on the cell (None: the re-run gave nothing to compare).
    again: Verdict | None

    def describe(self, unit: str, label: str) -> str:
        v = self.again
        if v is None or v.decision == "missing":
            why = v.reason if v is not None else "no figures"
            return f"{self.first.target} {self.first.workload} t={self.first.threads}: not measured again ({why})"
        return _regression(self.first.key, v).describe(unit, label) + f" [{v.decision}]"


@dataclass(frozen=True)
class Confirmation:
    """The failing cells judged again on the confirming campaign's runs alone."""

    campaign_id: str
    cells: tuple[ConfirmedCell, ...]
    #: The size of the fresh family (the failing cells the re-run could test).
    family_size: int

    @property
    def failed(self) -> bool:
        """The gate fails when a cell was confirmed, or could not be measured again (it was not cleared)."""
        return any(c.state != "cleared" for c in self.cells)

    def of(self, state: ConfirmState) -> tuple[ConfirmedCell, ...]:
        return tuple(c for c in self.cells if c.state == state)

    def lines(self, unit: str, label: str = "target/baseline") -> list[str]:
        """What the gate says after the confirmation, one line per failing cell."""
        head = {"confirmed": "confirmed", "cleared": "not confirmed", "unmeasured": "not measured again"}
        out = [f"confirming campaign {self.campaign_id}: the {len(self.cells)} failing cell(s) judged again on its "
               f"runs alone ({self.family_size} compared, one family)"]
        for state in ("confirmed", "unmeasured", "cleared"):
            out += [f"{head[state]}: {c.describe(unit, label)}" for c in self.of(state)]  # type: ignore[arg-type]
        return out


def confirm(first: Sequence[Regression], rerun: Sequence[NamedTable], beyond: float, campaign_id: str, *,
            targets: Sequence[str] | None = None) -> Confirmation:
    """Judge the cells of ``first`` again from the figures the ``rerun`` tables hold for them, as a
    family of just those cells (whatever else the re-run measured), with the gate of ``beyond``."""
    wanted = {r.key: r for r in first}
    found: dict[CellKey, tuple[CellFigures, NamedTable]] = {}
    for i, named in enumerate(rerun):
        for row in named.table.rows:
            for threads, cell in zip(named.table.threads, row.cells):
                key = (targets[i] if targets is not None else row.target, row.workload, threads)
                if key in wanted and cell.figures is not None and key not in found:
                    found[key] = (CellFigures(f"{key[0]} / {key[1]} / {key[2]}", cell.figures.target,
                                              cell.figures.baseline), named)
    again: dict[CellKey, tuple[Verdict, bool]] = {}
    size = 0
    if found:
        named = next(iter(found.values()))[1]
        spec, way = named.table.spec, direction(named.metric)
        keys = list(found)
        page = judge([found[k][0] for k in keys], family="confirmation", higher_is_better=way,
                     alpha=spec.alpha, min_effect=spec.min_effect)
        size = page.selection.family_size
        for k, v in zip(keys, page.verdicts):
            slower = fails_gate(v, way, beyond * 100) and abs(v.ratio - 1) >= spec.min_effect
            again[k] = (v, slower)
    cells = []
    for r in first:
        v, slower = again.get(r.key, (None, False))
        state: ConfirmState = ("unmeasured" if v is None or v.decision == "missing"
                               else "confirmed" if slower else "cleared")
        cells.append(ConfirmedCell(r, state, v))
    return Confirmation(campaign_id, tuple(cells), size)
