"""Per-cell statistics of a campaign as rows for the results DB's ``cell_stats`` table: what
the report's tables show (n, mean, stdev, CV, interval, ratio to the baseline, verdict, marks),
so SQL users and Grafana read them without recomputing Welch tests.

Pure: the campaign comes in as ``CampaignData``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Mapping

from services.common.results.rows import CellStatRow
from services.reporting import metrics_catalog as mc
from services.reporting.analysis import CampaignData, collapse_findings
from services.reporting.options import ReportOptions
from services.reporting.stats import CellStats, compare_stats, describe
from services.reporting.tables import (
    MARK_COLLAPSE,
    MARK_FASTER,
    MARK_HIGH_CV,
    MARK_SLOWER,
    MARK_STALL,
    MARK_UNTESTED,
)

_VERDICT_MARK = {"faster": MARK_FASTER, "slower": MARK_SLOWER, "same": "", "n/a": MARK_UNTESTED}
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
    out: list[CellStatRow] = []
    for key in STORED_METRICS:
        m = mc.BUILTIN[key]
        values: dict[tuple[str, str, int], list[float]] = defaultdict(list)
        failed: dict[tuple[str, str, int], int] = defaultdict(int, unstored_failures or {})
        stalls: dict[tuple[str, str, int], int] = defaultdict(int)
        for r in data.runs:
            cell = (r.target, r.workload, r.threads)
            v = mc.row_value(m, r)
            if r.status != "ok":
                failed[cell] += 1
            elif v is not None:
                values[cell].append(v)
                # As the report's ~: a run flagged for a stall or an overrun (RunQuality).
                stalls[cell] += bool(r.flags)
        summaries: dict[tuple[str, str, int], CellStats] = {c: describe(v) for c, v in values.items()}
        for cell in sorted(set(values) | set(failed), key=lambda c: (c[1], c[2], c[0])):
            target, workload, threads = cell
            own = summaries.get(cell)
            base = summaries.get((data.baseline, workload, threads))
            comp = (compare_stats(own, base, alpha=opts.alpha, min_effect=opts.min_effect,
                                  higher_is_better=m.higher_is_better)
                    if own is not None and base is not None and target != data.baseline else None)
            high_cv = bool(own and own.high_cv(opts.cv_threshold)) or bool(comp and comp.high_cv(opts.cv_threshold))
            col = key in ("qps", "tps") and cell in collapsed
            # As in the tables: a target without a baseline cell to compare with cannot be tested.
            untested = own is not None and target != data.baseline
            mark = _VERDICT_MARK[comp.verdict] if comp else (MARK_UNTESTED if untested else "")
            # The report's default marks; a high CV (the seeds' *, opt-in there) is its own column.
            mark += (MARK_HIGH_CV if high_cv and opts.mark_high_cv else "") + (MARK_COLLAPSE if col else "")
            # As the report's ratio table: the baseline's stalled runs weigh on the comparison too.
            stalled = stalls.get(cell, 0) + (stalls.get((data.baseline, workload, threads), 0)
                                             if target != data.baseline else 0)
            mark += MARK_STALL if stalled and own is not None else ""
            out.append(CellStatRow(
                campaign_id=data.campaign_id, metric=key, workload=workload, threads=threads, target=target,
                baseline=data.baseline, higher_is_better=m.higher_is_better, n=own.n if own else 0,
                failed=failed.get(cell, 0), mean=_f(own.mean) if own else None, stdev=_f(own.stdev) if own else None,
                cv=_f(own.cv) if own else None, ci_low=_f(own.ci_low) if own else None,
                ci_high=_f(own.ci_high) if own else None, ratio=_f(comp.ratio) if comp else None,
                ratio_low=_f(comp.ratio_low) if comp else None, ratio_high=_f(comp.ratio_high) if comp else None,
                p_value=_f(comp.test.p) if comp else None, verdict=comp.verdict if comp else None, mark=mark,
                high_cv=high_cv, collapsed=col, collapse_ratio=collapsed[cell] if col else None,
                stalled_runs=stalled, alpha=opts.alpha, min_effect=opts.min_effect))
    return out
