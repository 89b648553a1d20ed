"""The one row type of a stored result: what the store returns, what reports, exports and the
collector's Prometheus restore read.

A row holds the indexed columns of the results table; reports that need series, histograms or
the server report also get the whole stored ``RunResult``, decoded, in ``result``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

from services.common.messages.results import RunQuality, RunResult, ServerAgreement, ServerCount, Window
from services.common.results.figures import RunFigures

RunStatus = Literal["ok", "failed", "cancelled"]


@dataclass(frozen=True)
class ResultRow:
    """One run's stored result: its columns, and the decoded whole result when it was read."""

    run_id: str
    campaign_id: str
    target: str
    workload: str
    threads: int
    repetition: int
    status: RunStatus
    qps: float
    tps: float
    #: None where no transaction completed (no latency: reports print n/a, never 0).
    p95_ms: float | None
    p99_ms: float | None
    measured_s: float
    error: str | None
    max_ms: float | None = None
    #: The run's stalls and overrun (RunQuality); None when the run was not assessed (failed,
    #: cancelled, or stored before runs were). ``quality_flags`` is the flags comma-joined.
    stalled_s: int | None = None
    longest_stall_s: int | None = None
    overrun_s: float | None = None
    quality_flags: str | None = None
    #: The run's window (``Window``, native driver): connections that completed no transaction,
    #: transactions in flight at its end and the age of the oldest, the fewest and the median
    #: transactions one connection completed; None from sysbench and results stored before.
    starved_connections: int | None = None
    in_flight_at_end: int | None = None
    oldest_in_flight_s: float | None = None
    completed_per_connection_min: int | None = None
    completed_per_connection_median: float | None = None
    #: The client's count of the window's transactions (``totals.transactions``), and the server's
    #: own count of them (``server.count``, schema 21): None where it is n/a, with
    #: ``server_count_reason`` saying why (None too for results stored before it was recorded).
    transactions: int | None = None
    server_transactions: int | None = None
    server_count_reason: str | None = None
    #: The whole stored result (series, histograms, server report); None when only the columns
    #: were read, which is all a text table of q/s, tps or p95/p99 needs. Not a column, and
    #: left out of equality: two reads of one run compare equal with or without it.
    result: RunResult | None = field(default=None, compare=False, repr=False, metadata={"column": False})
    #: The figures a full report reads of every run (median latency, server counts, status
    #: deltas): from the figure columns (schema 16) or the whole result; None when neither was read.
    figures: RunFigures | None = field(default=None, compare=False, repr=False, metadata={"column": False})

    @classmethod
    def of(cls, result: RunResult) -> "ResultRow":
        """The row the store keeps for ``result``, carrying the result itself."""
        return cls(run_id=result.run_id, campaign_id=result.campaign_id, target=result.cell.target,
                   workload=result.cell.workload, threads=result.cell.threads, repetition=result.repetition,
                   status=result.status, qps=result.qps, tps=result.tps, p95_ms=result.latency.p95_ms,
                   p99_ms=result.latency.p99_ms, measured_s=result.measured_s, error=result.error,
                   max_ms=result.latency.max_ms, **quality_columns(result.quality),
                   **window_columns(result.window), transactions=result.totals.transactions,
                   **count_columns(result.server.count), result=result,
                   figures=RunFigures.of(result))

    @classmethod
    def from_columns(cls, values: Sequence[Any], figures: RunFigures | None = None) -> "ResultRow":
        """A row from database values in ``COLUMNS`` order (numbers coerced to the field's type)."""
        if len(values) != len(COLUMNS):
            raise ValueError(f"a result row has {len(COLUMNS)} columns ({', '.join(COLUMNS)}), got {len(values)}")
        return cls(*[convert(v) for convert, v in zip(_CONVERTERS, values)], figures=figures)

    def columns(self) -> tuple[Any, ...]:
        """The row's column values in ``COLUMNS`` order (what an export writes per run)."""
        return tuple(getattr(self, name) for name in COLUMNS)

    @property
    def flags(self) -> tuple[str, ...]:
        """The run's quality flags ("stall", "overrun"); empty when clean or not assessed."""
        return tuple(f for f in (self.quality_flags or "").split(",") if f)

    @property
    def server_count(self) -> ServerCount | None:
        """The server's own count of the run's measured transactions (or why it is n/a); None
        when the whole result was not read or was stored before it was recorded."""
        return self.result.server.count if self.result is not None else None

    @property
    def server_agreement(self) -> ServerAgreement | None:
        """The client's count against the server's, ``agrees`` False for a run to mark; None
        where the server's count is n/a or the whole result was not read."""
        q = self.result.quality if self.result is not None else None
        return q.server_agreement if q is not None else None

    def with_result(self, result: RunResult | None) -> "ResultRow":
        """The same row carrying ``result`` and its figures (built directly: ``dataclasses.replace``
        costs a 10,000-run report a third of a second)."""
        return type(self)(*self.columns(), result=result,
                          figures=RunFigures.of(result) if result is not None else None)

    def with_figures(self, figures: RunFigures | None) -> "ResultRow":
        """The same row carrying ``figures`` (read from the figure columns), without a whole result."""
        return type(self)(*self.columns(), figures=figures)


def quality_columns(q: RunQuality | None) -> dict[str, Any]:
    """The results table's quality columns of a run (all None when it was not assessed)."""
    if q is None:
        return {"stalled_s": None, "longest_stall_s": None, "overrun_s": None, "quality_flags": None}
    return {"stalled_s": q.stalled_s, "longest_stall_s": q.longest_stall_s, "overrun_s": q.overrun_s,
            "quality_flags": ",".join(q.flags)}


#: The results table's columns of a run's window (schema 20), in ``window_columns`` order.
WINDOW_COLUMNS = ("starved_connections", "in_flight_at_end", "oldest_in_flight_s", "completed_per_connection_min",
                  "completed_per_connection_median")


def window_columns(w: Window | None) -> dict[str, Any]:
    """The results table's window columns of a run (all None when it recorded no window)."""
    return {name: None if w is None else getattr(w, name) for name in WINDOW_COLUMNS}


#: The results table's columns of the server's count (schema 21), in ``count_columns`` order.
COUNT_COLUMNS = ("server_transactions", "server_count_reason")
#: The reason column is TEXT; a reason is a sentence, the whole of it stays in the stored result.
REASON_CHARS = 1000


def count_columns(c: ServerCount | None) -> dict[str, Any]:
    """The results table's columns of the server's count of a run (both None when not recorded)."""
    if c is None:
        return {"server_transactions": None, "server_count_reason": None}
    reason = c.reason[:REASON_CHARS] if c.reason is not None else None
    return {"server_transactions": c.server_transactions, "server_count_reason": reason}


#: The results table's columns a row holds, in order: derived from the type, so the store's
#: SELECT and every export's run columns follow a field added here.
COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ResultRow) if f.metadata.get("column", True))


def _same(v: Any) -> Any:
    return v


def _or_none(convert: Any) -> Any:
    return lambda v: None if v is None else convert(v)


_COERCE = {"int": int, "float": float, "int | None": _or_none(int), "float | None": _or_none(float)}
_CONVERTERS = tuple(_COERCE.get(str(f.type), _same) for f in dataclasses.fields(ResultRow) if f.name in COLUMNS)


@dataclass(frozen=True)
class HistoryEntry:
    """A result of one cell with the campaign it belongs to, for a cell's history across campaigns."""

    campaign_name: str
    created_at: float
    row: ResultRow


@dataclass(frozen=True)
class CampaignNight:
    """One campaign of a spec's history: which, when it was recorded, and its state (finished, ...)."""

    campaign_id: str
    created_at: float
    state: str


@dataclass(frozen=True)
class TargetBuild:
    """What ran as one target in a campaign's results: the build, its version string, the sha256
    of its server binary and the allocator found loaded (None where a result did not record it)."""

    target: str
    build: str | None
    version: str | None
    server_sha256: str | None
    malloc: str | None

    def describe(self) -> dict[str, str]:
        """Settings items for a report's target line (the digest shortened to 12 digits)."""
        out = {}
        if self.version:
            out["version"] = self.version
        if self.server_sha256:
            out["sha256"] = self.server_sha256[:12]
        if self.malloc:
            out["malloc_loaded"] = self.malloc
        return out


@dataclass(frozen=True)
class CellStatRow:
    """One cell's statistics for one metric, as the collector stores them in ``cell_stats`` for
    SQL and Grafana: the summary, the comparison with the baseline's cell, and the marks.

    Floats are None where a report shows nothing (NaN: too few repetitions; no baseline row)."""

    campaign_id: str
    metric: str
    workload: str
    threads: int
    target: str
    baseline: str
    higher_is_better: bool
    #: Successful runs summarised, and failed runs left out.
    n: int
    failed: int
    mean: float | None
    stdev: float | None
    cv: float | None
    ci_low: float | None
    ci_high: float | None
    #: Against the baseline's cell (None on the baseline's own row): the ratio of the means over
    #: the runs the verdict stands on, the cell's own log-ratio test (paired over shared blocks)
    #: with its unadjusted 1 - alpha interval, and its two-sided p.
    ratio: float | None
    ratio_low: float | None
    ratio_high: float | None
    p_value: float | None
    #: The report's decision (verdicts.Decision: faster, slower, equivalent, undecided, differs,
    #: identical, missing), judged with every compared cell of the campaign's metric as one family;
    #: None on the baseline's own row and until the campaign's cells are judged together (a refresh
    #: of part of a campaign writes figures only).
    verdict: str | None
    #: The report's marks: + - = ° ≠ ? (verdict), * (high CV, opt-in), ! (collapse), ~ (stall),
    #: < (short window); high_cv says whether the seeds' * applies.
    mark: str
    high_cv: bool
    collapsed: bool
    collapse_ratio: float | None
    #: Successful runs flagged for a stall or an overrun (RunQuality; the report's ~), the
    #: baseline cell's included on a compared target's row (its ratio depends on both).
    stalled_runs: int
    alpha: float
    min_effect: float
    #: The verdict's Benjamini-Hochberg q-value in its family (None: not judged, or no test).
    q_value: float | None = None
    #: The ratio's interval adjusted to agree with the verdict (Benjamini-Yekutieli), at ``interval_level``.
    interval_low: float | None = None
    interval_high: float | None = None
    interval_level: float | None = None
    #: Runs of this cell (and of the baseline's, on a compared row) left out of its verdict for a
    #: stall, an overrun or a short window (``kept_runs``).
    excluded_runs: int = 0
    #: The pool whose runs these are, in a campaign on several pools (spec ``pools``), judged as that
    #: pool's report judges them; '' for a campaign on one pool.
    pool: str = ""


#: The cell_stats table's columns, in the record's order.
CELL_STAT_COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(CellStatRow))
