"""Per-cell statistics of a campaign as rows for the results DB's ``cell_stats`` table: what
the report's tables show (n, mean, stdev, CV, ratio to the baseline, decision, marks), so SQL
users and Grafana read them without recomputing anything.

A decision is a family's, not a cell's: each stored metric's compared cells of the campaign are
judged together, as ``collector report --metric M`` judges its page (``page_verdicts``), so the
stored decisions, q-values and adjusted intervals are the report's. Rows of part of a campaign
(``judged=False``) carry the figures only: their verdict columns stay empty rather than claim a
family they did not see.

Pure: the campaign comes in as ``CampaignData``; the cells, their figures and their marks are the
report's own (analysis.cell_runs and build, kept_runs.as_judged, stalls.stalled_behind).
"""

from __future__ import annotations

import math
from typing import Mapping

from services.common.results.rows import CellStatRow
from services.reporting import metrics_catalog as mc
from services.reporting.analysis import CampaignData, CollapseFinding, NamedTable, build, cell_runs, collapse_findings
from services.reporting.kept_runs import CellRuns, as_judged
from services.reporting.log_ratio import log_ratio
from services.reporting.options import ReportOptions
from services.reporting.page_verdicts import judge_tables
from services.reporting.stalls import StalledRun, quality_mark, stall_counts, stalled_behind, stalled_runs
from services.reporting.tables import DECISION_MARK, MARK_COLLAPSE, MARK_HIGH_CV, MARK_UNTESTED
from services.reporting.verdicts import Verdict

#: The metrics stored per cell: the ones every result row holds as columns.
STORED_METRICS = ("qps", "tps", "p95_ms", "p99_ms")

_Key = tuple[str, str, int]


def _f(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) or math.isinf(x) else float(x)


def metric_verdicts(data: CampaignData, m: mc.Metric, opts: ReportOptions,
                    collapsed: tuple[CollapseFinding, ...] = (), stalled: tuple[StalledRun, ...] = (),
                    cells: Mapping[_Key, CellRuns] | None = None) -> dict[_Key, Verdict]:
    """Each compared cell's verdict for metric ``m``, judged as ``collector report --metric`` judges
    its page: the metric's ratio table over the whole campaign as one family."""
    if len(data.targets) < 2:
        return {}
    table = build(data, m, "ratio", opts, collapsed, stalled, cells)
    page = judge_tables([NamedTable(m.key, m.description, m, table)], alpha=opts.alpha, min_effect=opts.min_effect)
    judged = page.tables[0].table
    return {(row.target, row.workload, t): c.verdict for row in judged.rows
            for t, c in zip(judged.threads, row.cells) if c.verdict is not None}


def cell_stat_rows(data: CampaignData, opts: ReportOptions = ReportOptions(),
                   unstored_failures: Mapping[_Key, int] | None = None, *,
                   known_collapse: Mapping[_Key, CellStatRow] | None = None, judged: bool = True) -> list[CellStatRow]:
    """Every (metric, workload, threads, target) cell of ``data`` that has runs; a cell's failed
    count adds ``unstored_failures`` (runs failed with no result: dead-lettered or reaped).
    ``known_collapse`` gives the stored q/s row of cells whose collapse ``data`` cannot tell
    (their target's other thread counts were not read): their collapse is taken from it.
    ``judged`` False when ``data`` holds only part of the campaign: no decisions, no q-values."""
    findings = tuple(collapse_findings(data, opts))
    # Collapsed cells and their ratio (None where it is not finite).
    collapsed = {(f.target, f.workload, f.threads): _f(f.ratio) for f in findings}
    for cell, stored in (known_collapse or {}).items():
        if stored.collapsed:
            collapsed[cell] = stored.collapse_ratio
        else:
            collapsed.pop(cell, None)
    unstored = unstored_failures or {}
    # As the report's ~ and <: runs flagged for a stall, an overrun or a short window (RunQuality).
    found = tuple(stalled_runs(data.runs))
    hits = stall_counts(found)
    out: list[CellStatRow] = []
    for key in STORED_METRICS:
        m = mc.BUILTIN[key]
        cells = cell_runs(data, m)
        verdicts = metric_verdicts(data, m, opts, findings, found, cells) if judged else {}
        for cell in sorted({c for c, runs in cells.items() if runs.values or runs.failed} | set(unstored),
                           key=lambda c: (c[1], c[2], c[0])):
            target, workload, threads = cell
            runs = cells.get(cell)
            own = runs.stats if runs is not None else None
            base_cell = (data.baseline, workload, threads)
            base = cells.get(base_cell)
            compared = target != data.baseline
            # The ratio as the report's ratio table shows it: over the blocks its paired test keeps.
            ratio = est = None
            high_cv = bool(own and own.high_cv(opts.cv_threshold))
            if compared and own is not None and runs is not None and base is not None and base.stats is not None:
                mine, theirs = as_judged(runs, base)
                a, b = mine.stats or own, theirs.stats or base.stats
                ratio = a.mean / b.mean if b.mean else math.nan
                high_cv = a.high_cv(opts.cv_threshold) or b.high_cv(opts.cv_threshold)
                est = log_ratio(runs.by_block(), base.by_block())
            v = verdicts.get(cell)
            col = key in ("qps", "tps") and cell in collapsed
            # The report's marks, in its order; a high CV (the seeds' *, opt-in there) is its own column.
            mark = ""
            if own is not None:
                if v is not None and ratio is not None and not math.isnan(ratio):
                    mark = DECISION_MARK[v.decision]
                # A target with no baseline cell is untested, and its noise is not weighed (tables.cell_mark).
                mark = MARK_UNTESTED if compared and ratio is None else \
                    mark + (MARK_HIGH_CV if opts.mark_high_cv and high_cv else "")
            mark += MARK_COLLAPSE if col else ""
            # As the report's ratio table: the baseline's stalled runs weigh on the comparison too.
            stalled = stalled_behind(hits, cell, data.baseline)
            mark += quality_mark(found, cell, data.baseline) if stalled and own is not None else ""
            excluded = (len(runs.left_out) if runs else 0) + (len(base.left_out) if compared and base else 0)
            low, high = est.interval(1 - opts.alpha) if est is not None else (None, None)
            failed = (runs.failed if runs is not None else 0) + unstored.get(cell, 0)
            out.append(CellStatRow(
                campaign_id=data.campaign_id, metric=key, workload=workload, threads=threads, target=target,
                baseline=data.baseline, higher_is_better=m.higher_is_better, n=own.n if own else 0,
                failed=failed, mean=_f(own.mean) if own else None, stdev=_f(own.stdev) if own else None,
                cv=_f(own.cv) if own else None, ci_low=_f(own.ci_low) if own else None,
                ci_high=_f(own.ci_high) if own else None, ratio=_f(ratio), ratio_low=_f(low), ratio_high=_f(high),
                p_value=_f(est.p) if est is not None else None, verdict=v.decision if v else None, mark=mark,
                high_cv=high_cv, collapsed=col, collapse_ratio=collapsed[cell] if col else None,
                stalled_runs=stalled, alpha=opts.alpha, min_effect=opts.min_effect,
                q_value=_f(v.q) if v else None, interval_low=_f(v.low) if v else None,
                interval_high=_f(v.high) if v else None, interval_level=_f(v.level) if v else None,
                excluded_runs=excluded))
    return out
