"""Keeps the results DB's ``cell_stats`` table current: after a result is stored, the cells of its
workload are summarised and compared again, as the report would, for SQL users and Grafana; and
after the collector failed a run that has no result (its failure counts in its cell's ``failed``)."""

from __future__ import annotations

from services.common.run_finality import unstored_failures
from services.common.store import Store
from services.reporting.cell_stats import cell_stat_rows
from services.reporting.load import load
from services.reporting.options import ReportOptions


def refresh_cell_stats(store: Store, campaign_id: str, workload: str | None = None,
                       opts: ReportOptions = ReportOptions()) -> int:
    """Recompute and store the statistics of a campaign's cells (of one workload when given: a
    new result changes only those); how many rows were written."""
    data = load(store, campaign_id, with_results=False, workload=workload)
    rows = cell_stat_rows(data, opts, unstored_failures(store, data.campaign_id, workload))
    store.save_cell_stats(rows)
    return len(rows)
