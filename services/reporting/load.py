"""Read a campaign from the results DB into ``analysis.CampaignData`` (the reports' only I/O)."""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from services.common.errors import UsageError
from services.common.messages.runs import pool_of_run_id
from services.common.results.cut_windows import rejudge_rows
from services.common.results.rows import ResultRow, TargetBuild
from services.common.store import Store
from services.reporting.analysis import CampaignData
from services.reporting.options import ReportOptions
from services.reporting.pools_compared import PoolsReport, pools_report
from services.reporting.render.plots import series_runs
from services.reporting.report import Report, analyse


class SeveralPools(UsageError):
    """A campaign that ran on several pools read as if it ran on one: its cells would mix them
    (not a ValueError: a comparison that skips what it cannot judge must not skip this)."""


def load(store: Store, ref: str, *, with_results: bool = True, workload: str | None = None,
         figures: bool = False, series: bool = False, pool: str | None = None) -> CampaignData:
    """The campaign ``ref`` (id, or name for the latest) with its result rows (of one workload
    when ``workload`` is given).

    ``with_results`` also reads and decodes every whole stored result (series, histogram, server
    report) into its row; text tables of q/s, tps or p95/p99 need only the columns and skip that cost.
    ``figures`` (without ``with_results``) reads instead the figure columns every table of a full
    report needs, and ``series`` (with ``figures``) the whole results of the runs the time plots
    draw: the HTML, JSON and ODS reports equal those read from every whole result, at a fraction
    of the cost. A campaign on several pools is read one ``pool`` at a time (SeveralPools without).
    """
    c = store.campaigns.get(ref)
    if c is None:
        raise LookupError(f"no campaign {ref!r} in the results DB")
    check_pool(c.campaign_id, c.spec.pools, pool)
    # A pool's rows are read alone (results.pool), not the whole campaign once per pool.
    pool_filter = pool if c.spec.pools else None
    rows = store.results.rows(c.campaign_id, workload, figures=figures and not with_results, pool=pool_filter)
    if with_results:
        whole = {r.run_id: r for r in store.results.whole(c.campaign_id, workload=workload, pool=pool_filter)}
        rows = [row.with_result(whole.get(row.run_id)) for row in rows]
    elif figures:
        rows = _whole_where_no_figures(store, c.campaign_id, rows)
    if not with_results:
        rows = _whole_where_behind(store, c.campaign_id, rows)
    spec = c.spec
    rows = rejudge_rows(rows, spec)
    settings = spec.public_dump()  # no password_env/password_file in reports and exports
    settings["campaign_id"] = c.campaign_id
    describe_builds(settings, store.results.target_builds(c.campaign_id))
    data = CampaignData(
        campaign_id=c.campaign_id, name=c.name, state=c.state,
        targets=tuple(t.name for t in spec.targets), baseline=spec.baseline_name,
        workloads=tuple(w.key for w in spec.workloads), threads=tuple(sorted(spec.threads)),
        settings=settings, runs=tuple(rows), created_at=c.created_at,
    )
    if series and not with_results:
        data = _with_series(store, data)
    return data


def check_pool(campaign_id: str, pools: Sequence[str] | None, pool: str | None) -> None:
    """SeveralPools when ``pool`` does not pick one of a campaign's several pools (or picks one of a one-pool campaign)."""
    if pools and pool is None:
        raise SeveralPools(f"campaign {campaign_id} ran on pools {', '.join(pools)}: its cells would mix them; "
                           f"read one with --pool ({' or '.join(pools)})")
    if pool is not None and pool not in (pools or ()):
        raise SeveralPools(f"--pool: campaign {campaign_id} ran on "
                           + (f"pools {', '.join(pools)}, not {pool}" if pools else "one pool, not on several"))


def without_pools(rows: Sequence[ResultRow], what: str) -> tuple[list[ResultRow], str | None]:
    """``rows`` (results across campaigns) less those of campaigns on several pools, which one series
    would mix, and a note naming what was left out (None when nothing was)."""
    several = sorted({r.campaign_id for r in rows if pool_of_run_id(r.run_id) is not None})
    if not several:
        return list(rows), None
    return ([r for r in rows if pool_of_run_id(r.run_id) is None],
            f"note: {what} leaves out campaign(s) {', '.join(several)}: they ran on several pools, whose runs one "
            "series would mix (`collector report CAMPAIGN` compares their pools)")


def _whole_where_behind(store: Store, campaign_id: str, rows: list[ResultRow]) -> list[ResultRow]:
    """The rows, those of runs that fell behind their open-loop rate with their whole results
    (how far behind is there, not in a column); such runs are few."""
    behind = [r.run_id for r in rows if "behind" in r.flags and r.result is None]
    if not behind:
        return rows
    whole = {r.run_id: r for r in store.results.whole(campaign_id, behind)}
    return [row.with_result(whole[row.run_id]) if row.run_id in whole else row for row in rows]


def _whole_where_no_figures(store: Store, campaign_id: str, rows: list[ResultRow]) -> list[ResultRow]:
    """The rows, those stored before the figure columns (schema 16) with their whole results."""
    missing = [r.run_id for r in rows if r.figures is None]
    if not missing:
        return rows
    whole = {r.run_id: r for r in store.results.whole(campaign_id, missing)}
    return [row.with_result(whole[row.run_id]) if row.run_id in whole else row for row in rows]


def _with_series(store: Store, data: CampaignData) -> CampaignData:
    """``data`` with the whole results of the runs whose series the time plots draw."""
    drawn = {r.run_id for w in data.workloads for r in series_runs(data, w)[0] if r.result is None}
    if not drawn:
        return data
    whole = {r.run_id: r for r in store.results.whole(data.campaign_id, sorted(drawn))}
    runs = tuple(r.with_result(whole[r.run_id]) if r.run_id in whole else r for r in data.runs)
    return dataclasses.replace(data, runs=runs)


def describe_builds(settings: dict[str, Any], builds: Sequence[TargetBuild]) -> None:
    """Add what each target ran (version, binary digest, allocator) to its settings line; a
    target that ran more than one (hosts with different builds) lists each value."""
    for t in settings.get("targets", []):
        items: dict[str, list[str]] = {}
        for b in builds:
            if b.target == t.get("name"):
                for key, value in b.describe().items():
                    items.setdefault(key, [])
                    if value not in items[key]:
                        items[key].append(value)
        for key, values in items.items():
            t[key] = values[0] if len(values) == 1 else values


def load_report(store: Store, ref: str, opts: ReportOptions, *, plots: bool = False) -> Report:
    """The report of campaign ``ref``, reading of the stored results only what ``opts`` (and
    ``plots``) need."""
    return analyse(load_for(store, ref, opts, plots=plots), opts)


def load_pools(store: Store, ref: str, opts: ReportOptions, *, plots: bool = False) -> PoolsReport:
    """Campaign ``ref``'s page of several pools: each pool's report and the pools compared."""
    c = store.campaigns.get(ref)
    if c is None:
        raise LookupError(f"no campaign {ref!r} in the results DB")
    if not c.spec.pools:
        raise SeveralPools(f"campaign {c.campaign_id} ran on one pool, not on several")
    return pools_report({p: load_for(store, c.campaign_id, opts, plots=plots, pool=p) for p in c.spec.pools}, opts)


def load_for(store: Store, ref: str, opts: ReportOptions, *, plots: bool = False, pool: str | None = None) -> CampaignData:
    """The campaign (one ``pool`` of it) as a report with ``opts`` reads it: the columns for a text
    table of a column metric, else the figure columns, and with ``plots`` the plotted runs' series too."""
    if not (opts.needs_results() or plots):
        return load(store, ref, with_results=False, pool=pool)
    return load(store, ref, with_results=False, figures=True, series=plots, pool=pool)
