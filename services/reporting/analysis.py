"""A campaign's results as plain data, and everything computed from them for a report: the
tables (one per metric and shape), collapse findings with a significance test, plot series.

Pure: ``CampaignData`` is built by ``load.load`` (the only part touching the store) or by
tests from literals; nothing here imports the store, pika or mysql.connector.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from services.common.results.rows import ResultRow
from services.reporting import metrics_catalog as mc
from services.reporting.collapse import AgainstPeak, CellThroughput, collapse_points
from services.reporting.kept_runs import cell_runs_of, left_out_reason
from services.reporting.options import ReportOptions
from services.reporting.peak import check_peak
from services.reporting.stalls import StalledRun, mark_stalls
from services.reporting.stats import describe
from services.reporting.tables import (
    MARK_COLLAPSE,
    CellRuns,
    Mode,
    Table,
    TableSpec,
    table_of_cells,
)


@dataclass(frozen=True)
class CampaignData:
    """What a report needs of one campaign; ``settings`` is the spec as JSON data."""

    campaign_id: str
    name: str
    state: str
    targets: tuple[str, ...]
    baseline: str
    workloads: tuple[str, ...]
    threads: tuple[int, ...]
    settings: Mapping[str, Any] = field(default_factory=dict)
    runs: tuple[ResultRow, ...] = ()
    created_at: float = 0.0

    @functools.cached_property
    def by_cell(self) -> dict[tuple[str, str, int], tuple[ResultRow, ...]]:
        """The runs of the campaign's targets and workloads per cell (target, workload, threads)
        in repetition order, one per repetition (the last read wins, as a table keeps it): the
        grouping every table of a report shares."""
        targets, workloads = set(self.targets), set(self.workloads)
        runs = {(r.target, r.workload, r.threads, r.repetition): r for r in self.runs
                if r.target in targets and r.workload in workloads}
        out: dict[tuple[str, str, int], list[ResultRow]] = defaultdict(list)
        for key in sorted(runs):
            out[key[:3]].append(runs[key])
        return {key: tuple(rows) for key, rows in out.items()}


@dataclass(frozen=True)
class NamedTable:
    """A table with the title a report, a spreadsheet sheet or a JSON export gives it."""

    key: str
    title: str
    metric: mc.Metric
    table: Table


@dataclass(frozen=True)
class CollapseFinding(AgainstPeak):
    """A cell whose throughput fell below ``fraction`` of the peak at fewer threads, and how sure
    the report is of it."""

    #: How unsure the drop beyond the fraction is (1 - ``PeakCheck.sure``: the adjusted one-sided p
    #: that the drop is within it); NaN when a cell has fewer than 2 successful runs.
    p: float
    #: "significant", or "untested" (too few repetitions: the fraction alone decided).
    basis: str
    #: Bounds of q/s / peak - 1 against every lower thread count at once, at ``level`` (NaN: untested).
    drop_low: float = math.nan
    drop_high: float = math.nan
    level: float = math.nan


#: Metrics whose values sit just below 1, where the fourth decimal still counts (1 - misses/requests).
HIT_RATIOS = ("key_cache_hit_ratio", "buffer_pool_hit_ratio")


def cell_runs(data: CampaignData, m: mc.Metric) -> dict[tuple[str, str, int], CellRuns]:
    """Each cell's runs for metric ``m``, as ``tables.group_cells`` groups measurements, from the
    grouping the campaign's tables share; runs flagged for a stall, an overrun or a short window
    are left out of the cell's number and verdict (``kept_runs``)."""
    out = {}
    for key, rows in data.by_cell.items():
        values, failed, unrecorded, unprinted = [], 0, 0, 0
        for r in rows:
            v = mc.row_value(m, r)
            if r.status != "ok" or (v is not None and math.isnan(v)):
                failed += 1
            elif v is None:
                unrecorded += 1
                # A latency of a run that completed transactions: sysbench printed no such percentile.
                unprinted += bool(m.key in mc.LATENCY_KEYS and r.transactions)
            else:
                values.append((r.repetition, v, left_out_reason(r.flags)))
        out[key] = cell_runs_of(values, failed=failed, total=len(rows), unrecorded=unrecorded, unprinted=unprinted)
    return out


def _has_values(data: CampaignData, m: mc.Metric) -> bool:
    return any(mc.row_value(m, r) is not None for r in data.runs)


def build(data: CampaignData, m: mc.Metric, mode: Mode, opts: ReportOptions,
          collapsed: Sequence[CollapseFinding] = (), stalled: Sequence[StalledRun] = (),
          cells: Mapping[tuple[str, str, int], CellRuns] | None = None) -> Table:
    """One table of ``data`` for metric ``m``; a single-target campaign is always absolute."""
    shape: Mode = mode if len(data.targets) > 1 else "absolute"
    spec = TableSpec(
        targets=data.targets, baseline=data.baseline, workloads=data.workloads, threads=data.threads,
        mode=shape, unit=m.unit, alpha=opts.alpha, min_effect=opts.min_effect, cv_threshold=opts.cv_threshold,
        mark_high_cv=opts.mark_high_cv, higher_is_better=m.higher_is_better,
        # Latency, CPU and status counts per transaction are small numbers where the decimals
        # matter; throughput keeps the seeds' whole q/s.
        decimals=None if m.key in ("qps", "tps") or shape != "absolute" else 4 if m.key in HIT_RATIOS else 2,
    )
    table = table_of_cells(cell_runs(data, m) if cells is None else cells, spec)
    if m.key in ("qps", "tps") and collapsed:
        table = mark_collapse(table, collapsed)
    # Every metric of a stalled run is off (latency, CPU, status per transaction), not only q/s.
    return mark_stalls(table, stalled)


def mark_collapse(table: Table, found: Sequence[CollapseFinding]) -> Table:
    """The table with ``!`` added to the cells of every collapsed (target, workload, threads)."""
    hit = {(f.target, f.workload, f.threads) for f in found}
    rows = []
    for row in table.rows:
        cells = tuple(
            dataclasses.replace(c, mark=c.mark + MARK_COLLAPSE) if (row.target, row.workload, t) in hit else c
            for t, c in zip(table.threads, row.cells)
        )
        rows.append(dataclasses.replace(row, cells=cells))
    return dataclasses.replace(table, rows=tuple(rows))


def collapse_findings(data: CampaignData, opts: ReportOptions = ReportOptions()) -> list[CollapseFinding]:
    """Collapsed cells: mean q/s below the fraction of the lower-concurrency peak, and the drop
    beyond ``1 - fraction`` with ``1 - alpha`` confidence by ``peak.check_peak`` (the cell against
    every lower thread count at once, not against the largest of their noisy means); with fewer
    than 2 repetitions the fraction alone decides."""
    values: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for r in data.runs:
        if r.status == "ok":
            values[(r.target, r.workload, r.threads)].append(r.qps)
    summaries = {k: describe(v) for k, v in values.items()}
    cells = [CellThroughput(t, w, n, s.mean) for (t, w, n), s in summaries.items()]
    # check_peak needs a margin inside (0, 1): a fraction of 1 ("any drop") asks for the least one.
    margin = min(max(1 - opts.collapse_fraction, 1e-9), 1 - 1e-9)
    found = []
    for p in collapse_points(cells, fraction=opts.collapse_fraction):
        if not p.collapsed:
            continue
        curve = {n: vs for (t, w, n), vs in values.items() if (t, w) == (p.target, p.workload) and n <= p.threads}
        check = check_peak(curve, margin=margin, alpha=opts.alpha)
        if check is None:
            found.append(CollapseFinding(p.target, p.workload, p.threads, p.qps, p.peak_threads, p.peak_qps,
                                         p.ratio, math.nan, "untested"))
        elif check.collapsed:
            found.append(CollapseFinding(p.target, p.workload, p.threads, p.qps, p.peak_threads, p.peak_qps,
                                         p.ratio, 1 - check.sure, "significant", check.drop_low, check.drop_high,
                                         check.level))
    return found


def collapse_lines(found: Sequence[CollapseFinding], fraction: float) -> list[str]:
    """The collapse note printed under the tables (one line per collapsed cell)."""
    if not found:
        return [f"No collapse: no target falls below {fraction * 100:g}% of its peak q/s at fewer threads."]
    lines = [f"Collapse ({MARK_COLLAPSE}): q/s below {fraction * 100:g}% of the peak at fewer threads:"]
    for f in found:
        why = (f"p = {f.p:.3g}; {f.level * 100:g}% sure it is {-f.drop_high * 100:.1f}% to {-f.drop_low * 100:.1f}% "
               "below the peak" if f.basis == "significant" else "too few repetitions to test")
        lines.append(f"  {f.target} / {f.workload} / {f.threads} threads: {f.qps:.0f} q/s = "
                     f"{f.ratio * 100:.1f}% of {f.peak_qps:.0f} q/s at {f.peak_threads} threads ({why})")
    return lines


def report_metrics(data: CampaignData) -> list[mc.Metric]:
    """Every metric this campaign recorded: throughput, latency, CPU and each status delta."""
    out = [mc.BUILTIN[k] for k in ("qps", "tps", "p95_ms", "p99_ms")]
    if not any(r.figures is not None for r in data.runs):
        return out
    for key in ("p50_ms", *mc.WORK_FIELDS):
        if _has_values(data, mc.BUILTIN[key]):
            out.append(mc.BUILTIN[key])
    out.extend(mc.metric(mc.STATUS_PREFIX + name) for name in mc.available_status(data.runs))
    return out


def all_tables(data: CampaignData, main: mc.Metric, mode: Mode, opts: ReportOptions,
               collapsed: Sequence[CollapseFinding] = (), stalled: Sequence[StalledRun] = ()) -> list[NamedTable]:
    """The chosen table first, then absolute values of every recorded metric (the HTML, JSON
    and ODS reports carry them all)."""
    shape = mode if len(data.targets) > 1 else "absolute"
    main_cells = cell_runs(data, main)  # shared with its absolute table, statistics and all
    out = [NamedTable(f"{main.key}_{shape}", f"{main.description} ({shape})", main,
                      build(data, main, mode, opts, collapsed, stalled, main_cells))]
    for m in report_metrics(data):
        if m.key == main.key and shape == "absolute":
            continue
        out.append(NamedTable(f"{m.key}_absolute", f"{m.description} (absolute)", m,
                              build(data, m, "absolute", opts, collapsed, stalled,
                                    main_cells if m.key == main.key else None)))
    return out
