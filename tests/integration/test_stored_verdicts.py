"""Migration 23 on a results DB that holds cell statistics judged by the old per-cell test: the
verdict column takes the shared decisions, the new columns appear, the old verdicts are cleared
(never read as the report's), a second run changes nothing, and a whole refresh judges again."""

from __future__ import annotations

import pytest

from services.collector.statistics import refresh_cell_stats
from services.common.store import Store
from services.reporting.load import load
from services.reporting.options import ReportOptions
from services.reporting.report import analyse
from services.scheduler.plan import run_specs
from tests.unit.report_sample import CAMPAIGN_ID, REPEAT, TARGETS, THREADS, WORKLOADS, sample_results
from bench.synthetic import synthetic_spec

pytestmark = pytest.mark.integration

_NEW = ("q_value", "interval_low", "interval_high", "interval_level", "excluded_runs")


def _as_before_22(store: Store) -> None:
    """The cell_stats table as migration 11 made it, with rows the Welch test judged."""
    store.db.execute("ALTER TABLE cell_stats " + ", ".join(f"DROP COLUMN {c}" for c in _NEW)
                     + ", MODIFY verdict VARCHAR(8) NULL")
    store.db.execute("DELETE FROM schema_migrations WHERE version = 23")
    old = "({}, 'qps', 'w', {}, '{}', 'A', 1, 3, 0, 100, 1, 0.01, 99, 101, {}, 0.9, 1.1, {}, {}, '{}', 0, 0, NULL, 0, 0.05, 0.01, 1)"
    store.db.execute(
        "INSERT INTO cell_stats (campaign_id, metric, workload, threads, target, baseline, higher_is_better, n, failed,"
        " mean, stdev, cv, ci_low, ci_high, ratio, ratio_low, ratio_high, p_value, verdict, mark, high_cv, collapsed,"
        " collapse_ratio, stalled_runs, alpha, min_effect, computed_at) VALUES "
        + ", ".join(old.format(*x) for x in (("'old'", 1, "B", 1.2, 0.01, "'faster'", "+~"),
                                             ("'old'", 2, "B", 1.0, 0.6, "'same'", "!"),
                                             ("'old'", 3, "B", 1.0, "NULL", "'n/a'", "?"),
                                             ("'old'", 1, "A", "NULL", "NULL", "NULL", "~"))))


def _columns(store: Store) -> dict[str, str]:
    return {name: kind for name, kind in store.db.rows(
        "SELECT column_name, column_type FROM information_schema.columns"
        " WHERE table_schema = DATABASE() AND table_name = 'cell_stats'")}


def test_migration_23_widens_the_verdict_and_clears_what_the_old_test_said(results_db):
    """An existing results DB migrates: the decisions fit, the new columns exist, each old verdict,
    its p and interval are gone with its mark (the other marks kept), and migrating again changes nothing."""
    with Store(results_db) as store:
        _as_before_22(store)
        assert store.migrate() >= 23
        cols = _columns(store)
        assert cols["verdict"] == "varchar(16)" and set(_NEW) <= set(cols)
        got = {(threads, target): rest for threads, target, *rest in store.db.rows(
            "SELECT threads, target, verdict, p_value, ratio_low, mark, ratio, excluded_runs FROM cell_stats"
            " WHERE campaign_id='old'")}
        assert got == {(1, "B"): [None, None, None, "~", 1.2, 0], (2, "B"): [None, None, None, "!", 1.0, 0],
                       (3, "B"): [None, None, None, "", 1.0, 0], (1, "A"): [None, None, 0.9, "~", None, 0]}  # no verdict: left alone
        # Run again (as after a crash between its statements): nothing changes.
        store.db.execute("DELETE FROM schema_migrations WHERE version = 23")
        assert store.migrate() >= 23
        assert {(t, g): r for t, g, *r in store.db.rows(
            "SELECT threads, target, verdict, p_value, ratio_low, mark, ratio, excluded_runs FROM cell_stats"
            " WHERE campaign_id='old'")} == got


def test_a_whole_refresh_stores_the_reports_decisions_which_a_partial_one_empties(results_db):
    """`collector stats` stores every decision the report of each metric gives (the longest, `equivalent`
    and `undecided`, fit); a refresh after one more result empties them and the marks they gave."""
    spec = synthetic_spec("sample", TARGETS, WORKLOADS, THREADS, REPEAT, duration=12, warmup=2)
    results = sample_results()
    with Store(results_db) as store:
        store.campaigns.record(CAMPAIGN_ID, spec, run_specs(spec, CAMPAIGN_ID), now=1_700_000_000.0)
        for r in results[:-1]:
            store.results.store(r)
        refresh_cell_stats(store, CAMPAIGN_ID)
        table = analyse(load(store, CAMPAIGN_ID, with_results=False), ReportOptions(metric="p95_ms")).main.table
        report = {(row.workload, t, row.target): (c.verdict.decision if c.verdict else None, c.mark)
                  for row in table.rows for t, c in zip(table.threads, row.cells)}
        stored = {(s.workload, s.threads, s.target): (s.verdict, s.mark)
                  for s in store.results.cell_stats(CAMPAIGN_ID, metric="p95_ms") if s.target != TARGETS[0]}
        assert stored == report and "undecided" in {v for v, _ in stored.values()}
        store.results.store(results[-1])
        # Not the campaign's end yet (one run still pending): the verdicts' family has changed.
        store.db.execute("UPDATE runs SET state='pending' WHERE run_id=%s", (results[0].run_id,))
        refresh_cell_stats(store, CAMPAIGN_ID, results[-1].cell.workload, cell=results[-1].cell)
        after = store.results.cell_stats(CAMPAIGN_ID, metric="p95_ms")
        assert {s.verdict for s in after} == {None} and {s.q_value for s in after} == {None}
        assert not any(m[:1] in "+-=°≠" and m for m in (s.mark for s in after))


def test_the_results_board_shows_the_stored_decisions_and_q(results_db):
    """The results board's comparison and cell statistics tables read each cell's decision and q from
    cell_stats on real MariaDB: the baseline's row reads `baseline`, a cell not judged since its
    figures changed `not judged yet`."""
    import mysql.connector

    from services.collector.dashboards import CELL_STATS_SQL, RESULTS_SQL

    spec = synthetic_spec("sample", TARGETS, WORKLOADS, THREADS, REPEAT, duration=12, warmup=2)
    with Store(results_db) as store:
        store.campaigns.record(CAMPAIGN_ID, spec, run_specs(spec, CAMPAIGN_ID), now=1_700_000_000.0)
        for r in sample_results():
            store.results.store(r)
        refresh_cell_stats(store, CAMPAIGN_ID)
        stored = {(s.metric, s.workload, s.threads, s.target): s for s in store.results.cell_stats(CAMPAIGN_ID)}

    def rows(sql: str) -> list[dict]:
        conn = mysql.connector.connect(**results_db.db_params())
        try:
            cur = conn.cursor(dictionary=True)
            cur.execute(sql.replace("$campaign", CAMPAIGN_ID))
            return cur.fetchall()
        finally:
            conn.close()

    shown = rows(RESULTS_SQL)
    assert len(shown) == len(TARGETS) * len(WORKLOADS) * len(THREADS)
    for r in shown:
        s = stored[("qps", r["workload"], r["threads"], r["target"])]
        assert (r["verdict"], r["q"], r["ratio_to_baseline"]) == (
            "baseline" if r["target"] == TARGETS[0] else s.verdict, s.q_value, s.ratio)
    every = rows(CELL_STATS_SQL)
    assert {r["verdict"] for r in every} >= {"baseline", "faster", "undecided"}
    assert all(r["q"] is not None and r["interval_level"] is not None for r in every if r["verdict"] == "faster")
    with Store(results_db) as store:
        store.results.clear_verdicts(CAMPAIGN_ID)
    assert {r["verdict"] for r in rows(CELL_STATS_SQL)} == {"baseline", "not judged yet"}
