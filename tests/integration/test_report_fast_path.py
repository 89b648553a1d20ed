"""The full reports' fast path against a real results DB: the figure columns (schema 16) give the
same HTML, JSON and ODS as every whole result decoded, also for rows stored before the columns
existed (read whole, then backfilled by `collector stats`), and the cell_stats refresh after each
result leaves the figures a whole refresh writes, and the report's verdicts once the campaign ended."""

from __future__ import annotations


import pytest

from services.collector.statistics import refresh_cell_stats
from services.common.store import Store
from services.reporting.cell_stats import STORED_METRICS, cell_stat_rows
from services.reporting.load import load, load_for
from services.reporting.render import html as html_module
from services.reporting.render.html import render_html_report
from services.reporting.render.machine_formats import render_json, render_ods
from services.reporting.report import ReportOptions, analyse
from services.scheduler.plan import run_specs
from tests.unit.report_sample import CAMPAIGN_ID, REPEAT, TARGETS, THREADS, WORKLOADS, sample_results
from bench.synthetic import synthetic_spec

pytestmark = pytest.mark.integration


@pytest.fixture
def results_db(results_db, monkeypatch):
    """The test's own results DB (tests/integration/conftest.py), with a fixed rendering time."""
    monkeypatch.setattr(html_module.time, "strftime", lambda fmt, *a: "2026-01-01 00:00:00 UTC")
    return results_db


def _store(store: Store) -> None:
    spec = synthetic_spec("sample", TARGETS, WORKLOADS, THREADS, REPEAT, duration=12, warmup=2)
    store.campaigns.record(CAMPAIGN_ID, spec, run_specs(spec, CAMPAIGN_ID), now=1_700_000_000.0)
    for r in sample_results():
        store.results.store(r)


def _reports(store: Store) -> tuple[str, str, str, bytes]:
    """The HTML of the fast path, and the HTML, JSON and ODS from every whole result."""
    html = ReportOptions(all_tables=True)
    fast = render_html_report(analyse(load_for(store, CAMPAIGN_ID, html, plots=True), html))
    whole = load(store, CAMPAIGN_ID, with_results=True)
    return (fast, render_html_report(analyse(whole, html)), render_json(analyse(whole, ReportOptions(all_tables=True))),
            render_ods(analyse(whole, ReportOptions(all_tables=True))))


def test_full_reports_from_figure_columns_equal_those_from_whole_results(results_db):
    """HTML, JSON and ODS read through the figure columns equal those read from every whole result,
    for results stored with the columns and for results stored before them."""
    with Store(results_db) as store:
        _store(store)
        fast, html, js, ods = _reports(store)
        assert fast == html
        for fmt, expected in (("json", js), ("ods", ods)):
            opts = ReportOptions(all_tables=True)
            got = analyse(load_for(store, CAMPAIGN_ID, opts), opts)
            assert (render_json(got) if fmt == "json" else render_ods(got)) == expected, fmt
        # Rows stored before schema 16 have no figures: the report reads their whole results.
        store.db.execute("UPDATE results SET series_seconds=NULL, status_deltas_json=NULL WHERE campaign_id=%s",
                       (CAMPAIGN_ID,))
        assert {r.figures for r in store.results.rows(CAMPAIGN_ID, figures=True)} == {None}
        assert render_html_report(analyse(load_for(store, CAMPAIGN_ID, ReportOptions(all_tables=True), plots=True),
                                          ReportOptions(all_tables=True))) == html
        # `collector stats` fills them in.
        store.results.rewrite_series(CAMPAIGN_ID)
        assert all(r.figures is not None for r in store.results.rows(CAMPAIGN_ID, figures=True))
        assert _reports(store)[0] == html


def test_cell_stats_refreshed_after_each_result_equal_a_whole_refresh(results_db):
    """After every stored result, the collector's refresh of the cells it changes leaves cell_stats'
    figures as a refresh of the whole campaign computes them (collapse, stalls and ratios included),
    with no verdict while the campaign runs; once its last result is stored, every cell's stored
    decision, q-value and adjusted interval are the report's of that metric."""
    def key(r):
        return (r.metric, r.workload, r.threads, r.target)

    spec = synthetic_spec("sample", TARGETS, WORKLOADS, THREADS, REPEAT, duration=12, warmup=2)
    results = sample_results()
    with Store(results_db) as store:
        store.campaigns.record(CAMPAIGN_ID, spec, run_specs(spec, CAMPAIGN_ID), now=1_700_000_000.0)
        # A whole refresh in mid-campaign (`collector stats`) judges what is there; the next result's
        # refresh empties those verdicts, whose family has changed.
        half = len(results) // 2
        for r in results[:half]:
            store.results.store(r)
        refresh_cell_stats(store, CAMPAIGN_ID)
        assert any(s.verdict for s in store.results.cell_stats(CAMPAIGN_ID))
        for r in results[half:-1]:
            store.results.store(r)
            refresh_cell_stats(store, CAMPAIGN_ID, r.cell.workload, cell=r.cell)
            whole = cell_stat_rows(load(store, CAMPAIGN_ID, with_results=False), judged=False)
            assert sorted(store.results.cell_stats(CAMPAIGN_ID), key=key) == sorted(whole, key=key), r.run_id
        during = store.results.cell_stats(CAMPAIGN_ID)
        assert len(during) == 4 * len(TARGETS) * len(WORKLOADS) * len(THREADS)
        assert any(r.collapsed for r in during) and any(r.stalled_runs for r in during)
        assert any(r.p_value is not None for r in during) and not any(r.verdict or r.q_value for r in during)

        # The last result ends the campaign: its refresh judges every cell.
        store.results.store(results[-1])
        refresh_cell_stats(store, CAMPAIGN_ID, results[-1].cell.workload, cell=results[-1].cell)
        assert store.runs.ended_at(CAMPAIGN_ID) is not None
        data = load(store, CAMPAIGN_ID, with_results=False)
        stored = {key(s): s for s in store.results.cell_stats(CAMPAIGN_ID)}
        assert sorted(stored.values(), key=key) == sorted(cell_stat_rows(data), key=key)
        compared = 0
        for metric in STORED_METRICS:
            table = analyse(data, ReportOptions(metric=metric)).main.table
            for row in table.rows:
                for t, c in zip(table.threads, row.cells):
                    s = stored[(metric, row.workload, t, row.target)]
                    report = (c.verdict.decision, c.verdict.q, c.verdict.low, c.verdict.high) if c.verdict else (None,) * 4
                    assert (s.verdict, s.q_value, s.interval_low, s.interval_high) == report, (metric, row.target, t)
                    compared += c.verdict is not None
        assert compared == len(STORED_METRICS) * (len(TARGETS) - 1) * len(WORKLOADS) * len(THREADS)
        assert {"faster", "slower", "undecided"} <= {s.verdict for s in stored.values()}


def test_a_baseline_result_after_results_stored_without_statistics_reads_the_whole_workload(results_db):
    """Results stored with no cell_stats (a campaign older than the table): a baseline result's
    refresh still writes the other targets' rows at its thread count with their collapse."""
    spec = synthetic_spec("sample", TARGETS, WORKLOADS, THREADS, REPEAT, duration=12, warmup=2)
    results = sample_results()
    last_baseline = next(r for r in reversed(results) if r.cell.target == TARGETS[0] and r.cell.threads == THREADS[-1])
    with Store(results_db) as store:
        store.campaigns.record(CAMPAIGN_ID, spec, run_specs(spec, CAMPAIGN_ID), now=1_700_000_000.0)
        for r in results:
            store.results.store(r)
        # Still running (a run not ended), so the refresh reads the cells it changes, not the campaign.
        store.db.execute("UPDATE runs SET state='running' WHERE run_id=%s", (results[0].run_id,))
        refresh_cell_stats(store, CAMPAIGN_ID, last_baseline.cell.workload, cell=last_baseline.cell)
        written = store.results.cell_stats(CAMPAIGN_ID, workload=last_baseline.cell.workload, threads=THREADS[-1])
        whole = [s for s in cell_stat_rows(load(store, CAMPAIGN_ID, with_results=False), judged=False)
                 if s.workload == last_baseline.cell.workload and s.threads == THREADS[-1]]
        key = lambda s: (s.metric, s.target)  # noqa: E731
        assert sorted(written, key=key) == sorted(whole, key=key)
        assert any(s.collapsed for s in written)
