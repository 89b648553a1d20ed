"""Comparison tables in the 2010 MariaDB sysbench pages' layout, with verdict marks.

``build_table`` turns measurements into a ``Table`` (numbers, marks, statistics per cell; the
page's verdicts are put on by ``page_verdicts.judge_tables``); ``render_text`` prints it like the seeds. Renderers return lines; callers print them.
Markdown, CSV and the settings block live in ``render.formats``.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Literal, Mapping

from services.common.messages.results import NOT_PRINTED
from services.common.results.stalls import MIN_COMPLETED_PER_CONNECTION
from services.reporting.kept_runs import CellRuns, as_judged, cell_runs_of, left_out_note
from services.reporting.stats import (
    DEFAULT_ALPHA,
    DEFAULT_CV_THRESHOLD,
    DEFAULT_MIN_EFFECT,
    CellStats,
    Comparison,
    side_by_side,
)
from services.reporting.verdicts import CellFigures, Decision, Verdict

Mode = Literal["ratio", "delta", "absolute"]
MODES: tuple[Mode, ...] = ("ratio", "delta", "absolute")

MARK_FASTER, MARK_SLOWER, MARK_UNTESTED, MARK_HIGH_CV = "+", "-", "?", "*"
#: Added by the report (analysis.mark_collapse) to cells whose throughput collapsed.
MARK_COLLAPSE = "!"
#: Added by the report (stalls.mark_stalls) to cells holding a run that stalled or overran.
MARK_STALL = "~"
#: Added by the report (stalls.mark_stalls) to cells holding a run whose window was too short.
MARK_SHORT = "<"
NO_DATA = "n/a"
#: Marks of a page's verdicts (``verdicts.judge`` over the page's family) beside ``+`` and ``-``.
MARK_EQUIVALENT, MARK_UNDECIDED, MARK_DIFFERS = "=", "°", "≠"
#: The mark of each decision once a page has judged its cells (identical figures read as equivalent).
DECISION_MARK: dict[Decision, str] = {
    "faster": MARK_FASTER, "slower": MARK_SLOWER, "differs": MARK_DIFFERS, "equivalent": MARK_EQUIVALENT,
    "identical": MARK_EQUIVALENT, "undecided": MARK_UNDECIDED, "missing": MARK_UNTESTED,
}


@dataclass(frozen=True)
class Measurement:
    """One run's number for a cell (e.g. q/s); a failed run is kept only to be counted."""

    target: str
    workload: str
    threads: int
    repetition: int
    value: float | None
    failed: bool = False
    #: Why a successful run is left out of the cell's number and verdict ("": kept; see kept_runs).
    left_out: str = ""


@dataclass(frozen=True)
class TableSpec:
    """What to show and how: order of targets, workloads and threads, mode and test settings."""

    targets: tuple[str, ...]
    baseline: str
    workloads: tuple[str, ...]
    #: Empty: every thread count found in the measurements, ascending.
    threads: tuple[int, ...] = ()
    mode: Mode = "ratio"
    unit: str = "q/s"
    alpha: float = DEFAULT_ALPHA
    min_effect: float = DEFAULT_MIN_EFFECT
    cv_threshold: float = DEFAULT_CV_THRESHOLD
    #: Add the seeds' ``*`` to cells where either side's CV exceeds cv_threshold.
    mark_high_cv: bool = False
    higher_is_better: bool = True
    #: Whether the targets' repetitions ran in shared blocks (one campaign), so a ratio stands on the
    #: blocks a paired verdict pairs; False for the two campaigns of a comparison.
    paired: bool = True
    #: None: two decimals for ratio/delta (as the seeds); absolute values get whole numbers
    #: when they reach the thousands (q/s) and two decimals below (latency in ms).
    decimals: int | None = None

    def __post_init__(self) -> None:
        # Lists are accepted for convenience; tuples keep the spec hashable and immutable.
        for name in ("targets", "workloads", "threads"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.baseline not in self.targets:
            raise ValueError(f"baseline {self.baseline!r} is not one of the targets {list(self.targets)}")
        if self.mode != "absolute" and len(self.targets) < 2:
            raise ValueError(f"a {self.mode} table needs a target besides the baseline")

    @property
    def grouped(self) -> bool:
        """Workload headings with a row per target (seed 000) instead of one row per workload (seed 003)."""
        return self.mode == "absolute" or len(self.targets) > 2

    @property
    def row_targets(self) -> tuple[str, ...]:
        if self.mode == "absolute":
            return self.targets
        return tuple(t for t in self.targets if t != self.baseline)


@dataclass(frozen=True)
class Cell:
    """One table cell: the number shown (None: no data), its marks, and the statistics behind it."""

    value: float | None
    mark: str
    stats: CellStats | None = None
    comparison: Comparison | None = None
    failed: int = 0
    #: Runs behind the number (the baseline's too, in a comparison) marked for a stall or an
    #: overrun (``stalls.mark_stalls`` sets it with the ``~``).
    stalled: int = 0
    #: Both sides' figures by repetition, for a page's verdicts (None: nothing to compare).
    figures: CellFigures | None = None
    #: The page's verdict on the cell (None until a page judged it: ``page_verdicts``).
    verdict: Verdict | None = None
    #: Runs behind the cell (the baseline's too, in a comparison) left out of its verdict for a
    #: stall, an overrun or a short window, and which and why (``kept_runs``).
    excluded: int = 0
    excluded_reason: str = ""


@dataclass(frozen=True)
class Row:
    """One printed row: a target's cells for one workload, under its label."""

    workload: str
    target: str
    label: str
    cells: tuple[Cell, ...]


@dataclass(frozen=True)
class FailedRuns:
    """How many runs of one cell failed and were left out, for the note below the table."""

    target: str
    workload: str
    threads: int
    failed: int
    total: int


@dataclass(frozen=True)
class FamilyNote:
    """The family a page judged its cells in: how many cells, how many discoveries, at which
    false-discovery rate and interval level, paired over shared blocks or not."""

    size: int
    discoveries: int
    alpha: float
    level: float
    min_effect: float
    paired: bool

    def lines(self) -> list[str]:
        """What the page says of its family: the cells compared and the discoveries expected by chance."""
        how = "paired over the blocks both ran" if self.paired else "unpaired (two campaigns)"
        return [f"{self.size} cells compared on this page ({how}, log ratios), Benjamini-Hochberg at a "
                f"{self.alpha * 100:g}% false-discovery rate: {self.discoveries} marked, of which about "
                f"{self.alpha * self.discoveries:.2g} expected by chance (a {self.alpha * 100:g}% test per cell "
                f"would mark {self.alpha * self.size:.2g} cells of an unchanged pair); intervals at "
                f"{self.level * 100:.3g}% (Benjamini-Yekutieli)"]


@dataclass(frozen=True)
class Table:
    """A computed comparison table, ready for any renderer."""

    spec: TableSpec
    threads: tuple[int, ...]
    rows: tuple[Row, ...]
    failed: tuple[FailedRuns, ...] = field(default=())
    places: int = 2
    #: Successful runs that did not record the metric (a dsn target's server CPU): shown as
    #: n/a, never as 0, and not counted as failures.
    unrecorded: int = 0
    #: Of ``unrecorded``: runs that completed transactions but whose latency sysbench did not print.
    unprinted: int = 0
    #: Set once a page judged the table's cells (``page_verdicts``): its marks are the verdicts'.
    family: FamilyNote | None = None

    def marks_used(self) -> set[str]:
        return {ch for row in self.rows for cell in row.cells for ch in cell.mark}

    def has_missing(self) -> bool:
        return any(cell.value is None for row in self.rows for cell in row.cells)


def group_cells(measurements: Iterable[Measurement], spec: TableSpec) -> dict[tuple[str, str, int], CellRuns]:
    """Measurements of the spec's targets and workloads grouped into cells (target, workload, threads)."""
    # Keyed by repetition so a redelivered result replaces, never doubles, its run.
    runs: dict[tuple[str, str, int, int], Measurement] = {}
    for m in measurements:
        if m.target in spec.targets and m.workload in spec.workloads:
            runs[(m.target, m.workload, m.threads, m.repetition)] = m
    values: dict[tuple[str, str, int], list[tuple[int, float, str]]] = defaultdict(list)
    failures: dict[tuple[str, str, int], int] = defaultdict(int)
    totals: dict[tuple[str, str, int], int] = defaultdict(int)
    unrecorded: dict[tuple[str, str, int], int] = defaultdict(int)
    for (target, workload, threads, repetition), m in sorted(runs.items()):
        key = (target, workload, threads)
        totals[key] += 1
        if m.failed or (m.value is not None and math.isnan(m.value)):
            failures[key] += 1
        elif m.value is None:
            unrecorded[key] += 1
        else:
            values[key].append((repetition, m.value, m.left_out))
    return {key: cell_runs_of(values.get(key, ()), failed=failures.get(key, 0), total=n,
                              unrecorded=unrecorded.get(key, 0))
            for key, n in totals.items()}


def build_table(measurements: Iterable[Measurement], spec: TableSpec) -> Table:
    """Group measurements into cells, compare each target with the baseline and lay out rows."""
    return table_of_cells(group_cells(measurements, spec), spec)


def table_of_cells(cells: Mapping[tuple[str, str, int], CellRuns], spec: TableSpec) -> Table:
    """The table of cells already grouped (only the spec's targets and workloads): tables of one
    metric share the cells, and with them each cell's statistics."""
    threads = spec.threads or tuple(sorted({k[2] for k in cells}))
    summaries = {key: c.stats for key, c in cells.items() if c.values}
    failures = {key: c.failed for key, c in cells.items() if c.failed}

    rows = []
    for workload in spec.workloads:
        for target in spec.row_targets:
            row_cells = tuple(_cell(spec, summaries, failures, target, workload, t, cells) for t in threads)
            rows.append(Row(workload, target, _row_label(spec, workload, target), row_cells))
    failed = tuple(
        FailedRuns(*key, n, cells[key].total)
        for key, n in sorted(
            failures.items(),
            key=lambda kv: (spec.workloads.index(kv[0][1]), spec.targets.index(kv[0][0]), kv[0][2]),
        )
    )
    unrecorded = sum(c.unrecorded for c in cells.values())
    unprinted = sum(c.unprinted for c in cells.values())
    rows = [_with_figures(spec, cells, row, threads) for row in rows]
    return Table(spec, tuple(threads), tuple(rows), failed, _places(spec, rows), unrecorded, unprinted=unprinted)


def _with_figures(spec: TableSpec, cells: Mapping[tuple[str, str, int], CellRuns], row: Row,
                  threads: Iterable[int]) -> Row:
    """The row with each compared cell's kept figures by repetition, for the page's verdicts, and
    every cell's runs left out of its verdict."""
    out = []
    for t, c in zip(threads, row.cells):
        own, base = cells.get((row.target, row.workload, t)), cells.get((spec.baseline, row.workload, t))
        sides = [(row.target, own)] + ([(spec.baseline, base)] if row.target != spec.baseline else [])
        note = left_out_note(sides)
        if note:
            c = dataclasses.replace(c, excluded=sum(len(r.left_out) for _, r in sides if r is not None),
                                    excluded_reason=note)
        if c.comparison is not None and own is not None and base is not None:
            key = f"{row.target} / {row.workload} / {t}"
            c = dataclasses.replace(c, figures=CellFigures(key, own.by_block(), base.by_block(), left_out=note))
        out.append(c)
    return dataclasses.replace(row, cells=tuple(out))


def _places(spec: TableSpec, rows: list[Row]) -> int:
    if spec.decimals is not None:
        return spec.decimals
    if spec.mode != "absolute":
        return 2
    shown = [abs(c.value) for r in rows for c in r.cells if c.value is not None]
    return 0 if shown and max(shown) >= 1000 else 2


def _cell(spec: TableSpec, summaries, failures, target: str, workload: str, threads: int,
          cells: Mapping[tuple[str, str, int], CellRuns]) -> Cell:
    own = summaries.get((target, workload, threads))
    base = summaries.get((spec.baseline, workload, threads))
    failed = failures.get((target, workload, threads), 0)
    if own is None:
        return Cell(None, "", failed=failed)
    # The baseline's own cell (only in absolute tables) has nothing to test against.
    compared = target != spec.baseline
    if compared and base is not None and spec.paired and spec.mode != "absolute":
        # A ratio stands on the blocks its paired verdict does: none whose run of either side was left out.
        mine, theirs = as_judged(cells[(target, workload, threads)], cells[(spec.baseline, workload, threads)])
        own, base = mine.stats or own, theirs.stats or base
    comp = side_by_side(own, base) if compared and base is not None else None
    mark = cell_mark(own, comp, compared=compared, mark_high_cv=spec.mark_high_cv, cv_threshold=spec.cv_threshold)
    if comp is None:
        if compared and spec.mode != "absolute":
            return Cell(None, "", own, None, failed)
        return Cell(own.mean, mark, own, None, failed)
    if math.isnan(comp.ratio) and spec.mode != "absolute":
        return Cell(None, "", own, comp, failed)
    value = {"ratio": comp.ratio * 100, "delta": comp.ratio * 100 - 100, "absolute": own.mean}[spec.mode]
    return Cell(value, mark, own, comp, failed)


def cell_mark(own: CellStats, comp: Comparison | None, *, compared: bool, mark_high_cv: bool,
              cv_threshold: float) -> str:
    """A cell's marks before its page's verdict (``page_verdicts`` puts the decision's mark first),
    collapse and stalls: ``?`` for a compared target without a baseline cell, and the seeds' ``*``
    when asked for and a side is noisy."""
    if comp is not None:
        return MARK_HIGH_CV if mark_high_cv and comp.high_cv(cv_threshold) else ""
    if compared:
        return MARK_UNTESTED
    return MARK_HIGH_CV if mark_high_cv and own.high_cv(cv_threshold) else ""


def _row_label(spec: TableSpec, workload: str, target: str) -> str:
    if not spec.grouped:
        return workload
    if spec.mode == "absolute":
        return target
    width = max(len(t) for t in spec.row_targets)
    return f"{target.rjust(width)} / {spec.baseline}"


def format_value(cell: Cell, places: int) -> str:
    """The cell's number as printed, without marks; ``n/a`` when there is no data."""
    return NO_DATA if cell.value is None else f"{cell.value:.{places}f}"


def formula_lines(spec: TableSpec) -> list[str]:
    """What the numbers are, in the seeds' words: ``( 8/off*100)-100`` or ``(A q/s / B q/s * 100)``."""
    base, unit = spec.baseline, spec.unit
    if spec.mode == "absolute":
        return [f"mean {unit} over the successful repetitions; marks compare each target with {base}"]
    width = max(len(t) for t in spec.row_targets)
    if spec.mode == "delta":
        return [f"({t.rjust(width)}/{base}*100)-100" for t in spec.row_targets]
    return [f"({t.rjust(width)} {unit} / {base} {unit} * 100)" for t in spec.row_targets]


def legend_lines(table: Table) -> list[tuple[str, str]]:
    """(mark, meaning) pairs for the marks a reader can meet in this table."""
    spec = table.spec
    used = table.marks_used()
    # A table no page judged (nothing to compare) has no verdict marks to explain.
    entries = _verdict_legend(table, table.family, used) if table.family is not None else []
    left_out = any(c.excluded for row in table.rows for c in row.cells)
    if MARK_UNTESTED in used:
        entries.append((MARK_UNTESTED, "not enough repetitions to test (fewer than 2 successful runs on a side"
                                       + (", once stalled and short runs are left out)" if left_out else ")")))
    if spec.mark_high_cv:
        entries.append((MARK_HIGH_CV, f"unusually high STDEV: coefficient of variation above {spec.cv_threshold * 100:g}%"))
    if MARK_COLLAPSE in used:
        entries.append((MARK_COLLAPSE, "collapse: throughput far below the peak at fewer threads (listed below)"))
    if MARK_STALL in used:
        whose = "a run of this cell" if spec.mode == "absolute" else f"a run of this cell or of {spec.baseline}'s"
        entries.append((MARK_STALL, f"stall: {whose} had seconds without a completed transaction, or overran "
                                    "its planned time (runs listed below)"))
    if MARK_SHORT in used:
        whose = "a run of this cell" if spec.mode == "absolute" else f"a run of this cell or of {spec.baseline}'s"
        entries.append((MARK_SHORT, f"short window: {whose} completed fewer than {MIN_COMPLETED_PER_CONNECTION:g} "
                                    "transactions per connection, so its window was shorter than that many mean "
                                    "response times (runs listed below)"))
    if left_out:
        entries.append(("", f"runs marked {MARK_STALL} or {MARK_SHORT} are left out of their cell's verdict, and of "
                            "its number while the cell has other runs (the number and the verdict then stand on "
                            "the same runs); a block whose run of either side is left out pairs nothing (runs "
                            "left out listed below)"))
    if table.has_missing():
        entries.append((NO_DATA, missing_reason(table)))
    return entries


def verdict_note(v: Verdict) -> str:
    """A cell's verdict in a line: decision, ratio, adjusted interval, q-value and how it was tested
    (an HTML tooltip, a Markdown footnote)."""
    if v.decision == "missing":
        return f"{v.decision}: {v.reason}"
    q = "" if math.isnan(v.q) else f", q = {v.q:.3g}"
    left = f"; left out: {v.left_out}" if v.left_out else ""
    return (f"{v.decision}: ratio {v.ratio:.4f}, {v.level * 100:.3g}% interval {v.low:.4f} to {v.high:.4f}{q} "
            f"({v.estimate.reason}; {v.reason}{left})")


def _verdict_legend(table: Table, family: FamilyNote, used: set[str]) -> list[tuple[str, str]]:
    base = table.spec.baseline
    beyond = "the adjusted interval excludes no change"
    entries = [
        (MARK_FASTER, f"faster than {base}: {beyond}"),
        (MARK_SLOWER, f"slower than {base}: {beyond}"),
        (MARK_EQUIVALENT, f"equivalent to {base}: the adjusted interval lies within "
                          f"+-{family.min_effect * 100:g}% (or every repetition gave the same figure)"),
        (MARK_UNDECIDED, f"undecided: the adjusted interval spans both no change and a change of "
                         f"{family.min_effect * 100:g}% or more; more repetitions might tell"),
    ]
    if MARK_DIFFERS in used:
        entries.append((MARK_DIFFERS, f"differs from {base} (a counter, which has no better direction): {beyond}"))
    return entries + [("", line) for line in family.lines()]


def missing_reason(table: Table) -> str:
    """Why a cell of ``table`` reads n/a: a latency table's runs completed no transaction (an empty
    histogram has no percentile) or read sysbench's output where it printed no such percentile,
    another's did not record the figure, or no run succeeded."""
    if not table.unrecorded:
        return "no successful run to compare"
    if table.spec.unit.endswith(" ms"):
        why = [] if table.unrecorded == table.unprinted else ["no transaction completed in the cell's runs (no latency to read)"]
        if table.unprinted:
            why.append(f"the percentile was {NOT_PRINTED}")
        return "; or ".join(why) + ", or no successful run"
    return "not recorded by the cell's runs (server process figures need a managed target), or no successful run"


def failed_lines(table: Table) -> list[str]:
    """A note naming the cells whose failed runs were left out of the numbers."""
    if not table.failed:
        return []
    count = sum(f.failed for f in table.failed)
    lines = [f"{count} failed run{'s' if count != 1 else ''} excluded:"]
    for f in table.failed:
        threads = f"{f.threads} thread{'s' if f.threads != 1 else ''}"
        lines.append(f"  {f.target} / {f.workload} / {threads}: {f.failed} of {f.total} runs failed")
    return lines


def left_out_lines(table: Table) -> list[str]:
    """A note naming each cell whose runs were left out of its verdict, with which runs and why."""
    hit = [(row, t, c) for row in table.rows for t, c in zip(table.threads, row.cells) if c.excluded]
    if not hit:
        return []
    lines = [f"Runs left out of the verdicts ({MARK_STALL} a stall or an overrun, {MARK_SHORT} a short window):"]
    for row, t, c in hit:
        runs = f"{c.excluded} run{'s' if c.excluded != 1 else ''}"
        lines.append(f"  {row.target} / {row.workload} / {t} thread{'s' if t != 1 else ''}: {runs} "
                     f"({c.excluded_reason})")
    return lines


def render_text(table: Table) -> list[str]:
    """The table as aligned text, like the seeds, followed by formulas, legend and failures."""
    spec = table.spec
    places = table.places
    # The seeds indent "8 / off" one deeper than a plain name so the slashes line up under
    # the workload heading.
    indent = "    " if spec.mode == "absolute" else "     "
    label_rows = [(f"  {r.workload}" if not spec.grouped else indent + r.label, r) for r in table.rows]
    label_width = max(
        [len(" sysbench test")] + [len(f"  {w}") for w in spec.workloads] + [len(lbl) for lbl, _ in label_rows]
    )
    cells = [c for r in table.rows for c in r.cells]
    # One pitch for every column, as in the seeds, sized by the widest number anywhere so
    # wide absolute values (172083 q/s) never push a column out of line.
    num_width = max([len(format_value(c, places)) for c in cells] + [len(str(t)) for t in table.threads] + [1])
    mark_width = max([len(c.mark) for c in cells] + [1])
    pitch = num_width + mark_width + 2
    start = label_width + 4

    lines = [" " * (start - 2) + "Number of threads"]
    lines.append((" " * start + "".join(str(t).ljust(pitch) for t in table.threads)).rstrip())
    lines.append(" sysbench test")
    current = None
    for label, row in label_rows:
        if spec.grouped and row.workload != current:
            lines.append(f"  {row.workload}")
            current = row.workload
        body = "".join(format_value(c, places).rjust(num_width) + c.mark.ljust(mark_width) + "  " for c in row.cells)
        lines.append((label.ljust(start) + body).rstrip())
    lines.append("")
    lines.extend(" " + f for f in formula_lines(spec))
    lines.append("")
    legend = legend_lines(table)
    key_width = max([len(mark) for mark, _ in legend] + [0])
    lines.extend((f" {mark.ljust(key_width)}  {text}").rstrip() for mark, text in legend)
    if table.failed:
        lines.append("")
        lines.extend(" " + f for f in failed_lines(table))
    if left_out_lines(table):
        lines.append("")
        lines.extend(" " + f for f in left_out_lines(table))
    return lines
