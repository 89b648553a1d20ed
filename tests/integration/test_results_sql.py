"""The results DB as SQL users and Grafana read it (schema migration 11): DATETIME views, one row
per measured second, and per-cell statistics with verdicts that match the report's."""

from __future__ import annotations

import re
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Iterator

import mysql.connector
import pytest
from structlog.testing import capture_logs

from services.collector import dashboards
from services.collector.statistics import refresh_cell_stats
from services.common.messages.runs import pool_of_run_id
from services.common.messages.results import RunQuality, RunResult
from services.common.spec.loading import parse_spec
from services.common.config import Settings
from services.common.store import Store
from services.common.store.views import VIEWS
from services.reporting.load import load_report
from services.reporting.options import ReportOptions
from services.scheduler import plan

from tests.integration.fleet import Fleet, target_yaml
from tests.missing import missing

pytestmark = pytest.mark.integration


def _spec(fleet: Fleet, head: str = ""):
    s = fleet.settings
    return parse_spec("name: sql\n" + head + "targets:\n" + target_yaml(s, "A", "bf_sql_a") + target_yaml(s, "B", "bf_sql_b")
                      + "workloads: [oltp_point_select]\ndata: {tables: 1, table_size: 100}\nthreads: [1, 8]\n"
                        "duration: 3s\nwarmup: 0s\nrepeat: 3\nseed: 1\n")


def _result(r, campaign_id: str, queries: list[int], started: float = 1_700_000_000.0) -> RunResult:
    stalls = queries.count(0)
    quality = RunQuality(planned_s=len(queries), wall_s=len(queries), overrun_s=0, stalled_s=stalls,
                         longest_stall_s=min(stalls, 1), flags=["stall"] if stalls else [])
    return RunResult(quality=quality,run_id=r.run_id, campaign_id=campaign_id, cell=r.cell, repetition=r.repetition, status="ok",
                     worker="w", host="h", started_at=started, ended_at=started + len(queries), measured_s=len(queries),
                     totals={"transactions": sum(queries) // 10, "reads": sum(queries)},
                     # Measured latency: a run without any has none (n/a), and no p95/p99 cell statistics.
                     latency={"p50_ms": 1.0, "p95_ms": 2.0, "p99_ms": 3.0, "max_ms": 4.0},
                     series={"transactions": [q // 10 for q in queries], "queries": queries,
                             "errors": [0] * len(queries)})


def _query(fleet: Fleet, sql: str, params: tuple = ()) -> list[tuple]:
    conn = mysql.connector.connect(**fleet.settings.db_params())
    try:
        cur = conn.cursor()
        cur.execute("SET time_zone = '+00:00'")
        cur.execute(sql, params)
        return cur.fetchall()
    finally:
        conn.close()


def test_series_times_and_cell_statistics_are_plain_sql(fleet):
    """Per-second q/s, DATETIME times and each cell's n, mean, ratio and verdict are rows SQL can read;
    the verdicts are the report's."""
    spec = _spec(fleet)
    runs = plan.run_specs(spec, "c-sql")
    with Store(fleet.settings) as store:
        store.campaigns.record("c-sql", spec, runs, now=1_700_000_000.0)
        for r in runs:
            # B is twice as fast as A, with a little noise; A/8 threads stalls for one second.
            base = 1000 * (2 if r.cell.target == "B" else 1) + 7 * r.repetition
            queries = [base, base + 3, base - 2]
            if r.cell.target == "A" and r.cell.threads == 8 and r.repetition == 1:
                queries[1] = 0
            store.results.store(_result(r, "c-sql", queries))
        assert refresh_cell_stats(store, "c-sql") == 4 * 4  # 4 metrics x (2 targets x 2 thread counts)
        report = load_report(store, "c-sql", ReportOptions())

    rows = _query(fleet, "SELECT target, threads, repetition, second, time, qps FROM series_v"
                         " WHERE campaign_id='c-sql' AND target='B' AND threads=1 AND repetition=1 ORDER BY second")
    assert [(r[3], r[5]) for r in rows] == [(0, 2007), (1, 2010), (2, 2005)]
    assert str(rows[0][4]) == "2023-11-14 22:13:20"
    (created,), = _query(fleet, "SELECT created_time FROM campaigns_v WHERE campaign_id='c-sql'")
    assert str(created) == "2023-11-14 22:13:20"
    assert _query(fleet, "SELECT COUNT(*) FROM results_v WHERE campaign_id='c-sql' AND started_time IS NOT NULL")[0][0] == 12
    assert _query(fleet, "SELECT COUNT(*) FROM runs_v WHERE campaign_id='c-sql'")[0][0] == 12

    stats = {(t, th): (n, round(ratio, 1) if ratio else None, verdict, mark, stalled)
             for t, th, n, ratio, verdict, mark, stalled in _query(
                 fleet, "SELECT target, threads, n, ratio, verdict, mark, stalled_runs FROM cell_stats_v"
                        " WHERE campaign_id='c-sql' AND metric='qps'")}
    assert stats[("B", 1)][:3] == (3, 2.0, "faster") and stats[("B", 1)][3].startswith("+")
    assert stats[("A", 1)] == (3, None, None, "", 0)
    assert stats[("A", 8)][4] == 1 and stats[("A", 8)][3] == "~"  # the run with a second without a query
    # The same verdict marks as the report's table.
    table_marks = {(row.target, th): c.mark for row in report.main.table.rows for th, c in
                   zip(report.main.table.threads, row.cells)}
    assert table_marks[("B", 1)] == stats[("B", 1)][3] and table_marks[("B", 8)] == stats[("B", 8)][3]


def test_a_campaign_on_two_pools_has_each_pools_cell_statistics_in_sql_and_grafana(fleet):
    """Each pool's cells are summarised and judged apart (B faster on suse, slower on rhel), while
    the campaign runs (the pool a result came from) and once it ended; the Grafana results table
    has a row per pool with that pool's verdict, not a mean of both."""
    spec = _spec(fleet, "pools: [suse, rhel]\n")
    runs = plan.run_specs(spec, "c-pools")
    factor = {"suse": 2.0, "rhel": 0.5}
    with Store(fleet.settings) as store:
        store.campaigns.record("c-pools", spec, runs, now=1_700_000_000.0)
        for i, r in enumerate(runs):
            base = int(1000 * (factor[pool_of_run_id(r.run_id)] if r.cell.target == "B" else 1) + 7 * r.repetition)
            store.results.store(_result(r, "c-pools", [base, base + 3, base - 2]))
            if i == 0:
                # A result of one pool while the campaign runs: that pool's figures only, nothing judged.
                pool = pool_of_run_id(r.run_id)
                assert refresh_cell_stats(store, "c-pools", r.cell.workload, cell=r.cell, pool=pool) > 0
                assert set(_query(fleet, "SELECT pool, verdict FROM cell_stats WHERE campaign_id='c-pools'")) == {(pool, None)}
        assert refresh_cell_stats(store, "c-pools", r.cell.workload, cell=r.cell, pool=pool_of_run_id(r.run_id)) == 2 * 16

    verdicts = dict(_query(fleet, "SELECT pool, verdict FROM cell_stats WHERE campaign_id='c-pools' AND metric='qps'"
                                  " AND target='B' AND threads=1"))
    assert verdicts == {"suse": "faster", "rhel": "slower"}, verdicts
    board = _query(fleet, dashboards.RESULTS_SQL.replace("$campaign", "c-pools"))
    b1 = {row[0]: (round(row[7], 1), row[8]) for row in board if row[3] == "B" and row[2] == 1}
    assert b1 == {"suse": (2.0, "faster"), "rhel": (0.5, "slower")}, board


def test_a_replacing_shorter_result_hides_the_seconds_it_no_longer_has(fleet):
    """A result replaced (an import with --replace) by one with fewer seconds shows only its own
    seconds in series_v."""
    spec = _spec(fleet)
    runs = plan.run_specs(spec, "c-red")
    with Store(fleet.settings) as store:
        store.campaigns.record("c-red", spec, runs)
        store.results.store(_result(runs[0], "c-red", [10, 20, 30, 40]))
        store.results.store(_result(runs[0], "c-red", [11, 21]), replace_ok=True)
    assert _query(fleet, "SELECT second, qps FROM series_v WHERE run_id=%s ORDER BY second",
                  (runs[0].run_id,)) == [(0, 11), (1, 21)]


def test_migration_11_and_collector_stats_fill_what_was_stored_before(fleet):
    """A results DB at an older schema with stored results (compressed, as results are stored since
    migration 5) migrates, and `collector stats` gives its campaign per-second rows and statistics."""
    spec = _spec(fleet)
    runs = plan.run_specs(spec, "c-old")
    with Store(fleet.settings) as store:
        store.campaigns.record("c-old", spec, runs)
        store.results.store(_result(runs[0], "c-old", [5, 6, 7]))
        # Back to how a pre-11 database looked: no series table, no views, version 11 not applied.
        for stmt in ("DROP VIEW IF EXISTS campaigns_v, runs_v, results_v, series_v, cell_stats_v",
                     "DROP TABLE result_series", "DROP TABLE cell_stats",
                     # cell_stats as 11 makes it is changed by 23 and 27: a pre-11 database had none of them.
                     "DELETE FROM schema_migrations WHERE version IN (11, 23, 27)"):
            store.db.execute(stmt)
        assert store.migrate() >= 11
    r = fleet.cli("collector", "stats", "c-old")
    assert r.returncode == 0 and r.stdout.startswith("4 cell statistics stored"), r.stderr
    assert _query(fleet, "SELECT second, qps, tps FROM series_v WHERE run_id=%s ORDER BY second",
                  (runs[0].run_id,)) == [(0, 5, 0), (1, 6, 0), (2, 7, 0)]
    assert _query(fleet, "SELECT n FROM cell_stats_v WHERE campaign_id='c-old' AND metric='qps'") == [(1,)]


def test_migration_27_keys_cell_stats_by_pool_and_keeps_what_was_there(fleet):
    """A results DB from before pools had cell statistics: they stay, as the one pool's (''), the key
    takes the pool, and migrating again (after a crash before it was recorded) changes nothing."""
    spec = _spec(fleet)
    runs = plan.run_specs(spec, "c-27")
    with Store(fleet.settings) as store:
        store.campaigns.record("c-27", spec, runs)
        store.results.store(_result(runs[0], "c-27", [5, 6, 7]))
        assert refresh_cell_stats(store, "c-27") == 4
        store.db.execute("ALTER TABLE cell_stats DROP PRIMARY KEY, DROP COLUMN pool,"
                         " ADD PRIMARY KEY (campaign_id, metric, workload, threads, target)")
        for _ in range(2):
            store.db.execute("DELETE FROM schema_migrations WHERE version = 27")
            assert store.migrate() >= 27
            key = [c for (c,) in store.db.rows(
                "SELECT column_name FROM information_schema.key_column_usage WHERE table_schema = DATABASE()"
                " AND table_name = 'cell_stats' AND constraint_name = 'PRIMARY' ORDER BY ordinal_position")]
            assert key == ["campaign_id", "metric", "workload", "threads", "target", "pool"]
            assert store.db.rows("SELECT pool, COUNT(*) FROM cell_stats WHERE campaign_id='c-27' GROUP BY pool") == [("", 4)]


def test_a_campaign_stored_before_build_names_still_reads(fleet):
    """A campaign recorded when managed targets named a binary: and basedir: (the spec model then)
    still gives its report, status and export; the old binary is said in its description."""
    import json

    s = fleet.settings
    spec = parse_spec("name: old\ntargets:\n" + target_yaml(s, "A", "bf_sql_a")
                      + "  - {name: B, kind: managed}\nworkloads: [oltp_point_select]\nthreads: [1]\n"
                        "duration: 3s\nrepeat: 1\n")
    runs = plan.run_specs(spec, "c-oldspec")
    doc = json.loads(spec.model_dump_json())
    doc["targets"][1].update(binary="/opt/mariadb-10.6/bin/mariadbd", basedir="/opt/mariadb-10.6")
    with Store(fleet.settings) as store:
        store.campaigns.record("c-oldspec", spec, runs)
        for r in runs:
            store.results.store(_result(r, "c-oldspec", [100, 110, 120]))
        store.db.execute("UPDATE campaigns SET spec_json=%s WHERE campaign_id='c-oldspec'", (json.dumps(doc),))
        assert "binary: /opt/mariadb-10.6/bin/mariadbd" in store.campaigns.get("c-oldspec").spec.description
    report = fleet.cli("collector", "report", "c-oldspec")
    assert report.returncode == 0 and "oltp_point_select" in report.stdout, report.stderr
    status = fleet.cli("scheduler", "status")
    assert status.returncode == 0 and "c-oldspec" in status.stdout, status.stderr
    one = fleet.cli("scheduler", "status", "c-oldspec")
    assert one.returncode == 0 and "done 2" in one.stdout, one.stderr
    exported = fleet.cli("collector", "export", "c-oldspec", "--json", str(fleet.workdir / "old.json"))
    assert exported.returncode == 0, exported.stderr


def test_a_stored_spec_that_cannot_be_read_is_an_error_naming_the_campaign(fleet):
    """A stored spec beyond what the compatibility pass knows: `collector report` says which
    campaign and field (a results-DB error, exit 3, as a stored result that does not decode), no traceback."""
    import json

    spec = _spec(fleet)
    with Store(fleet.settings) as store:
        store.campaigns.record("c-badspec", spec, plan.run_specs(spec, "c-badspec"))
        doc = json.loads(spec.model_dump_json())
        doc["threads"] = "many"
        store.db.execute("UPDATE campaigns SET spec_json=%s WHERE campaign_id='c-badspec'", (json.dumps(doc),))
    r = fleet.cli("collector", "report", "c-badspec")
    assert r.returncode == 3 and "Traceback" not in r.stderr, r.stderr
    assert "campaign c-badspec" in r.stderr and "threads" in r.stderr, r.stderr


def test_runs_failed_without_a_result_count_in_cell_stats(fleet):
    """A run the collector fails with no result (dead-lettered, reaped) counts in its cell's failed
    runs once the statistics are refreshed, as the collector does after failing it."""

    spec = _spec(fleet)
    runs = plan.run_specs(spec, "c-reap")
    with Store(fleet.settings) as store:
        store.campaigns.record("c-reap", spec, runs)
        for r in runs[1:]:
            store.results.store(_result(r, "c-reap", [100, 110, 120]))
        assert store.runs.fail(runs[0].run_id, "c-reap", "no result: its worker is gone", now=1.0)
        refresh_cell_stats(store, "c-reap", runs[0].cell.workload)
    c = runs[0].cell
    assert _query(fleet, "SELECT failed, n FROM cell_stats WHERE campaign_id='c-reap' AND metric='qps'"
                         " AND target=%s AND threads=%s", (c.target, c.threads)) == [(1, 2)]


def test_views_gain_the_columns_their_tables_gain(fleet):
    """results_v shows migration 14's build columns, also in a results DB whose views migration 11
    made before them; a column added to a table later reaches its view at the next migrate."""
    spec = _spec(fleet)
    runs = plan.run_specs(spec, "c-views")
    with Store(fleet.settings) as store:
        store.campaigns.record("c-views", spec, runs)
        store.results.store(_result(runs[0], "c-views", [10, 20]))
        # As a results DB migrated before migration 18: results_v as migration 11 made it.
        store.db.execute("DROP VIEW results_v")
        store.db.execute("""CREATE VIEW results_v AS
               SELECT r.run_id, r.campaign_id, r.target, r.workload, r.threads, r.repetition, r.status, r.measured_s,
                      r.transactions, r.queries, r.errors, r.qps, r.tps, r.p50_ms, r.p95_ms, r.p99_ms, r.max_ms,
                      r.worker, r.host, r.error, r.started_at, r.ended_at, r.stored_at,
                      FROM_UNIXTIME(r.started_at) AS started_time, FROM_UNIXTIME(r.ended_at) AS ended_time,
                      FROM_UNIXTIME(r.stored_at) AS stored_time
               FROM results r""")
        store.db.execute("DROP TABLE schema_views")
        store.db.execute("DELETE FROM schema_migrations WHERE version = 18")
        store.migrate()
    cols = [r[0] for r in _query(fleet, "SELECT COLUMN_NAME FROM information_schema.COLUMNS"
                                        " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'results_v'")]
    assert {"build", "build_version", "server_sha256", "malloc", "stalled_s", "quiesce_s"} <= set(cols)
    assert "result_z" not in cols and "result_json" not in cols
    assert _query(fleet, "SELECT build, qps FROM results_v WHERE campaign_id='c-views'") == [(None, 15.0)]
    with Store(fleet.settings) as store:
        store.db.execute("ALTER TABLE results ADD COLUMN bf_test_extra INT NULL")
        store.db.execute("ALTER TABLE campaigns ADD COLUMN bf_test_extra INT NULL")
        store.migrate()
    for view in ("results_v", "campaigns_v"):
        assert _query(fleet, f"SELECT COUNT(bf_test_extra) FROM {view} WHERE campaign_id='c-views'") == [(0,)]


ENSURE_SERVICES = Path(__file__).resolve().parents[2] / "deploy" / "ensure-services"


def collector_db_privileges() -> str:
    """The privileges deploy/ensure-services grants the collectors' role on the results DB."""
    m = re.search(r"GRANT ([A-Z ,]+) ON \\`\$db_grant\\`\.\* TO \$\{p\}_collectors;", ENSURE_SERVICES.read_text())
    assert m, "deploy/ensure-services: no GRANT to the collectors' role on the results DB ($db_grant)"
    return m.group(1)


@pytest.fixture
def collector_on_fresh_db(mariadb_params, settings: Settings) -> Iterator[tuple[Settings, Settings]]:
    """A throwaway results DB (not created yet) and a throwaway DB user with exactly the collector's
    grants on it: (the collector's settings, root's settings), both dropped afterwards."""
    root = replace(settings, db_user="root", db_password="", db_socket="")
    try:
        admin = mysql.connector.connect(host=root.db_host, port=root.db_port, user="root", password="")
    except mysql.connector.Error as e:
        missing(f"MariaDB root without a password is needed to make a DB user: {e}")
    name = f"bf_views_{uuid.uuid4().hex[:12]}"
    password = uuid.uuid4().hex
    host = "127.0.0.1" if settings.db_host in ("127.0.0.1", "localhost") else "%"
    cur = admin.cursor()
    try:
        cur.execute(f"CREATE USER '{name}'@'{host}' IDENTIFIED BY %s", (password,))
        # In a GRANT's database name `_` is a wildcard: this database alone, as ensure-services does.
        cur.execute(f"GRANT {collector_db_privileges()} ON `{name.replace('_', chr(92) + '_')}`.* TO '{name}'@'{host}'")
        yield (replace(settings, db_user=name, db_password=password, db_name=name, db_socket=""),
               replace(root, db_name=name))
    finally:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        cur.execute(f"DROP USER IF EXISTS '{name}'@'{host}'")
        admin.close()


def _views(s: Settings) -> dict[str, list[str]]:
    """Each view of the results DB and its columns, read by ``s``'s user."""
    with Store(s).open(migrate=False) as store:
        rows = store.db.rows("SELECT c.TABLE_NAME, c.COLUMN_NAME FROM information_schema.COLUMNS c"
                           " JOIN information_schema.VIEWS v ON v.TABLE_SCHEMA = c.TABLE_SCHEMA"
                           " AND v.TABLE_NAME = c.TABLE_NAME WHERE c.TABLE_SCHEMA = DATABASE()"
                           " ORDER BY c.TABLE_NAME, c.ORDINAL_POSITION")
    out: dict[str, list[str]] = {}
    for view, column in rows:
        out.setdefault(view, []).append(column)
    return out


def test_the_collectors_db_user_makes_every_view_of_a_new_results_db_and_a_missing_one(collector_on_fresh_db):
    """The collector's DB user (no DROP) opening a new results DB makes it with every view current
    (results_v with migration 14's build columns), logging none out of date; a view someone dropped
    is made again at its next start, and one out of date is logged and left, not a failed start."""
    collector, root = collector_on_fresh_db
    with capture_logs() as logged:
        with Store(collector):
            pass
    assert not [e for e in logged if e["event"] == "view_out_of_date"], logged
    views = _views(collector)
    assert set(views) == {name for name, _ in VIEWS}
    assert {"build", "build_version", "malloc", "started_time"} <= set(views["results_v"])
    with Store(root).open(migrate=False) as store:
        assert len(store.db.rows("SELECT name FROM schema_views")) == len(VIEWS)
        store.db.execute("DROP VIEW series_v")
        store.db.execute("UPDATE schema_views SET fingerprint = 'older' WHERE name = 'campaigns_v'")

    with capture_logs() as logged:
        with Store(collector):
            pass
    assert "series_v" in _views(collector)
    assert [e["view"] for e in logged if e["event"] == "view_out_of_date"] == ["campaigns_v"]
    assert [e["view"] for e in logged if e["event"] == "view_made"] == ["series_v"]


def test_a_result_whose_run_cannot_be_marked_is_not_stored_half(fleet):
    """Storing a result is one transaction: when its run's new state cannot be written, neither the
    result nor its series is there afterwards, and the run reads as it did; a reader never meets a
    result whose run still reads running (the collector once stored them in three commits)."""
    spec = _spec(fleet)
    r = plan.run_specs(spec, "c-atomic")[0]
    with Store(fleet.settings) as store:
        store.campaigns.record("c-atomic", spec, [r], now=1_700_000_000.0)
        # The server refuses the run's update, after the result and its series were written.
        store.db.execute("CREATE TRIGGER bf_test_refuse BEFORE UPDATE ON runs FOR EACH ROW"
                         " IF NEW.state = 'done' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused';"
                         " END IF")
        try:
            with pytest.raises(Exception, match="refused"):
                store.results.store(_result(r, "c-atomic", [100, 110, 90]))
        finally:
            store.db.execute("DROP TRIGGER bf_test_refuse")
        assert _query(fleet, "SELECT COUNT(*) FROM results WHERE run_id=%s", (r.run_id,)) == [(0,)]
        assert _query(fleet, "SELECT COUNT(*) FROM result_series WHERE run_id=%s", (r.run_id,)) == [(0,)]
        assert _query(fleet, "SELECT state FROM runs WHERE run_id=%s", (r.run_id,)) == [("pending",)]
        # The same store goes on: the next try stores all of it.
        assert store.results.store(_result(r, "c-atomic", [100, 110, 90]))
    assert _query(fleet, "SELECT COUNT(*) FROM result_series WHERE run_id=%s", (r.run_id,)) == [(3,)]
    assert _query(fleet, "SELECT state FROM runs WHERE run_id=%s", (r.run_id,)) == [("done",)]
