"""Keeps the results DB's ``cell_stats`` table current: after a result is stored, the cells it
can change are summarised again, as the report would, for SQL users and Grafana; and after the
collector failed a run that has no result (its failure counts in its cell's ``failed``).

A verdict belongs to a family (every compared cell of the campaign's metric, as the report judges
them), so a refresh of part of a campaign writes figures and empties the campaign's verdicts,
which no longer describe the family; the campaign's cells are judged together again by a whole
refresh: `collector stats`, and the refresh after the campaign's last run ended."""

from __future__ import annotations

import dataclasses
from typing import Sequence

from services.common.messages.runs import Cell
from services.common.results.cut_windows import rejudge_rows
from services.common.results.rows import CellStatRow
from services.common.store import Store
from services.reporting.analysis import CampaignData
from services.reporting.cell_stats import cell_stat_rows
from services.reporting.load import load
from services.reporting.options import ReportOptions


def refresh_cell_stats(store: Store, campaign_id: str, workload: str | None = None,
                       opts: ReportOptions = ReportOptions(), *, cell: Cell | None = None,
                       pool: str | None = None) -> int:
    """Recompute and store the statistics of a campaign's cells (of one workload when given; with
    ``cell``, only of the cells a new result of that cell changes); the whole campaign's, verdicts
    and all, when no part is given or when the campaign has ended. A campaign on several pools is
    summarised per pool, as its report reads each (of ``pool`` alone when a result of it arrived).
    How many rows were written."""
    c = store.campaigns.get(campaign_id)
    whole = (cell is None and workload is None) or store.runs.ended_at(campaign_id) is not None
    if c is not None and c.spec.pools:
        return _pools(store, campaign_id, c.spec.pools if whole or pool is None else (pool,), opts, judged=whole)
    if whole:
        # The whole campaign, or its last run ended (with this result or failure): its cells make their family.
        return _whole(store, campaign_id, opts)
    if cell is None:
        data = load(store, campaign_id, with_results=False, workload=workload)
        rows = cell_stat_rows(data, opts, store.runs.unstored_failures(data.campaign_id, workload), judged=False)
    else:
        rows = _cell_rows(store, campaign_id, cell, opts)
    store.results.save_cell_stats(rows)
    store.results.clear_verdicts(campaign_id)
    return len(rows)


def _pools(store: Store, campaign_id: str, pools: Sequence[str], opts: ReportOptions, *, judged: bool) -> int:
    """Each pool's cells as that pool's report judges them (one family per pool, as `collector
    report --pool`); figures only while the campaign runs. Each pool's whole runs are read: a
    campaign on several pools is read by pool, not by cell."""
    n = 0
    for pool in pools:
        data = load(store, campaign_id, with_results=False, pool=pool)
        rows = cell_stat_rows(data, opts, store.runs.unstored_failures(data.campaign_id, pool=pool), judged=judged)
        store.results.save_cell_stats([dataclasses.replace(r, pool=pool) for r in rows])
        n += len(rows)
    if not judged:
        store.results.clear_verdicts(campaign_id)
    return n


def _whole(store: Store, campaign_id: str, opts: ReportOptions) -> int:
    data = load(store, campaign_id, with_results=False)
    rows = cell_stat_rows(data, opts, store.runs.unstored_failures(data.campaign_id, None))
    store.results.save_cell_stats(rows)
    return len(rows)


def _cell_rows(store: Store, campaign_id: str, cell: Cell, opts: ReportOptions) -> list[CellStatRow]:
    """The rows a result of ``cell`` changes: its target's cells of the workload at every thread
    count (collapse compares them with each other), and, for the baseline, every target's cell at
    its thread count (their ratios); read from those cells' results only, so the refresh after
    each result does not read the campaign's other cells."""
    c = store.campaigns.get(campaign_id)
    if c is None:
        raise LookupError(f"no campaign {campaign_id!r} in the results DB")
    baseline = c.spec.baseline_name
    mine = cell.target == baseline
    runs = rejudge_rows(store.results.rows(c.campaign_id, cell.workload, tuple({cell.target, baseline}),
                                           or_threads=cell.threads if mine else None), c.spec)
    data = CampaignData(campaign_id=c.campaign_id, name=c.name, state=c.state,
                        targets=tuple(t.name for t in c.spec.targets), baseline=baseline,
                        workloads=(cell.workload,), threads=tuple(sorted(c.spec.threads)), runs=tuple(runs))
    known = None
    if mine:
        # Another target's collapse needs its other thread counts, not read here; the baseline's
        # result leaves it as that target's own last refresh stored it. Not stored yet (results
        # stored without a refresh): read the whole workload instead.
        others = {(r.target, r.workload, r.threads) for r in runs if r.target != baseline}
        known = {(s.target, s.workload, s.threads): s
                 for s in store.results.cell_stats(c.campaign_id, metric="qps", workload=cell.workload, threads=cell.threads)
                 if s.target != baseline}
        if not others <= set(known):
            data = dataclasses.replace(data, runs=tuple(rejudge_rows(store.results.rows(c.campaign_id, cell.workload),
                                                                     c.spec)))
            known = None
    failures = store.runs.unstored_failures(c.campaign_id, cell.workload)
    return [r for r in cell_stat_rows(data, opts, failures, known_collapse=known, judged=False)
            if r.target == cell.target or (mine and r.threads == cell.threads)]
