"""Per-cell statistics of a campaign as rows for the results DB's ``cell_stats`` table: what
the report's tables show (n, mean, stdev, CV, interval, ratio to the baseline, verdict, marks),
so SQL users and Grafana read them without recomputing Welch tests.

Pure: the campaign comes in as ``CampaignData``; the cells, their statistics and their marks
are the report's own (analysis.cell_runs, tables.cell_mark, stalls.stalled_behind).
"""

from __future__ import annotations

import math
from typing import Mapping

from services.common.results.rows import CellStatRow
from services.reporting import metrics_catalog as mc
from services.reporting.analysis import CampaignData, cell_runs, collapse_findings
from services.reporting.options import ReportOptions
from services.reporting.stalls import quality_mark, stall_counts, stalled_behind, stalled_runs
from services.reporting.stats import compare_stats
from services.reporting.tables import MARK_COLLAPSE, cell_mark

#: The metrics stored per cell: the ones every result row holds as columns.
STORED_METRICS = ("qps", "tps", "p95_ms", "p99_ms")


def _f(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) or math.isinf(x) else float(x)


def cell_stat_rows(data: CampaignData, opts: ReportOptions = ReportOptions(),
                   unstored_failures: Mapping[tuple[str, str, int], int] | None = None, *,
                   known_collapse: Mapping[tuple[str, str, int], CellStatRow] | None = None) -> list[CellStatRow]:
    """Every (metric, workload, threads, target) cell of ``data`` that has runs; a cell's failed
    count adds ``unstored_failures`` (runs failed with no result: dead-lettered or reaped).
    ``known_collapse`` gives the stored q/s row of cells whose collapse ``data`` cannot tell
    (their target's other thread counts were not read): their collapse is taken from it."""
    # Collapsed cells and their ratio (None where it is not finite).
    collapsed = {(f.target, f.workload, f.threads): _f(f.ratio) for f in collapse_findings(data, opts)}
    for cell, stored in (known_collapse or {}).items():
        if stored.collapsed:
            collapsed[cell] = stored.collapse_ratio
        else:
            collapsed.pop(cell, None)
    unstored = unstored_failures or {}
    # As the report's ~: runs flagged for a stall or an overrun (RunQuality).
    found = stalled_runs(data.runs)
    hits = stall_counts(found)
    out: list[CellStatRow] = []
    for key in STORED_METRICS:
        m = mc.BUILTIN[key]
        cells = cell_runs(data, m)
        summaries = {c: runs.stats for c, runs in cells.items() if runs.values}
        for cell in sorted({c for c, runs in cells.items() if runs.values or runs.failed} | set(unstored),
                           key=lambda c: (c[1], c[2], c[0])):
            target, workload, threads = cell
            own = summaries.get(cell)
            base = summaries.get((data.baseline, workload, threads))
            compared = target != data.baseline
            comp = (compare_stats(own, base, alpha=opts.alpha, min_effect=opts.min_effect,
                                  higher_is_better=m.higher_is_better)
                    if own is not None and base is not None and compared else None)
            high_cv = bool(own and own.high_cv(opts.cv_threshold)) or bool(comp and comp.high_cv(opts.cv_threshold))
            col = key in ("qps", "tps") and cell in collapsed
            # The report's marks, in its order; a high CV (the seeds' *, opt-in there) is its own column.
            mark = cell_mark(own, comp, compared=compared, mark_high_cv=opts.mark_high_cv,
                             cv_threshold=opts.cv_threshold) if own is not None else ""
            mark += MARK_COLLAPSE if col else ""
            # As the report's ratio table: the baseline's stalled runs weigh on the comparison too.
            stalled = stalled_behind(hits, cell, data.baseline)
            mark += quality_mark(found, cell, data.baseline) if stalled and own is not None else ""
            failed = (cells[cell].failed if cell in cells else 0) + unstored.get(cell, 0)
            out.append(CellStatRow(
                campaign_id=data.campaign_id, metric=key, workload=workload, threads=threads, target=target,
                baseline=data.baseline, higher_is_better=m.higher_is_better, n=own.n if own else 0,
                failed=failed, mean=_f(own.mean) if own else None, stdev=_f(own.stdev) if own else None,
                cv=_f(own.cv) if own else None, ci_low=_f(own.ci_low) if own else None,
                ci_high=_f(own.ci_high) if own else None, ratio=_f(comp.ratio) if comp else None,
                ratio_low=_f(comp.ratio_low) if comp else None, ratio_high=_f(comp.ratio_high) if comp else None,
                p_value=_f(comp.test.p) if comp else None, verdict=comp.verdict if comp else None, mark=mark,
                high_cv=high_cv, collapsed=col, collapse_ratio=collapsed[cell] if col else None,
                stalled_runs=stalled, alpha=opts.alpha, min_effect=opts.min_effect))
    return out
