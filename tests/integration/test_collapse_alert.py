"""A real campaign that collapses pages through real Prometheus and Alertmanager; a healthy one does not.

The collapsing target is a DSN target throttled the way thread-per-connection servers collapse:
a trigger serialises every update and makes it cost time in proportion to the number of
connected clients, so q/s at 64 clients falls far below the single-client figure. The shipped
rules and their default fraction (0.5) are used as they are.
"""

from __future__ import annotations

import mysql.connector
import pytest

from services.collector import dashboards

from tests.integration.fleet import Fleet, target_yaml
from tests.integration.monitoring import start_monitoring, wait_for
from tests.integration.test_prometheus_queries import substitute

pytestmark = pytest.mark.integration


#: Each update waits for one lock, then sleeps 0.5 ms per client connected to the database.
THROTTLE = """
CREATE TRIGGER bf_throttle BEFORE UPDATE ON sbtest1 FOR EACH ROW BEGIN
  DO GET_LOCK('bf_it_throttle', 30);
  DO SLEEP(0.0005 * (SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = 'bf_it_collapse'));
  DO RELEASE_LOCK('bf_it_throttle');
END"""


def campaign(fleet: Fleet, name: str, workload: str, table_size: int, threads: str, db: str) -> str:
    return (f"name: {name}\npool: {fleet.pool}\ntargets:\n" + target_yaml(fleet.settings, "A", db) +
            f"workloads: [{workload}]\ndata: {{tables: 1, table_size: {table_size}}}\n"
            f"threads: {threads}\nduration: 3s\nwarmup: 0.5s\nrepeat: 1\n")


def submit(fleet: Fleet, tmp_path, text: str) -> str:
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    done = fleet.cli("scheduler", "submit", str(spec), "--wait", "--poll", "0.5", timeout=300)
    assert done.returncode == 0, done.stderr + fleet.logs()
    return next(l.split()[1].rstrip(":") for l in done.stdout.splitlines() if l.startswith("campaign "))


def test_collapsing_campaign_alerts_and_healthy_one_does_not(rabbitmq, mariadb_params, settings, tmp_path):
    """The collapse alert reaches Alertmanager with the campaign, target and workload of the
    collapsing cell; the healthy campaign's cells are judged and raise nothing."""
    mon = start_monitoring(tmp_path)
    fleet = Fleet.create(settings, tmp_path)
    fleet.extra_env["BENCHFLEET_SD_DIR"] = str(mon.sd_dir)
    try:
        fleet.start_collector()
        fleet.start_worker("w1")
        wait_for("Prometheus to scrape the worker and the collector",
                 lambda: len([r for r in mon.query("up") if r["value"][1] == "1"]) == 2, timeout=60)
        healthy = submit(fleet, tmp_path, campaign(fleet, "healthy", "oltp_point_select", 1000, "[1, 4]", "bf_it_healthy"))
        throttled = campaign(fleet, "collapsing", "oltp_update_non_index", 100, "[1, 64]", "bf_it_collapse")
        (tmp_path / "throttled.yaml").write_text(throttled)
        prepared = fleet.cli("worker", "prepare", str(tmp_path / "throttled.yaml"))
        assert prepared.returncode == 0, prepared.stderr
        conn = mysql.connector.connect(database="bf_it_collapse", **mariadb_params)
        conn.cursor().execute("DROP TRIGGER IF EXISTS bf_throttle")
        conn.cursor().execute(THROTTLE)
        conn.close()
        collapsing = submit(fleet, tmp_path, throttled)

        cells = wait_for("the collapsing campaign's cells in Prometheus", lambda: mon.query(
            f'benchfleet_cell_queries_per_second{{campaign="{collapsing}"}}') if len(mon.query(
                f'benchfleet_cell_queries_per_second{{campaign="{collapsing}"}}')) == 2 else None, timeout=30)
        qps = {c["metric"]["threads"]: float(c["value"][1]) for c in cells}
        assert qps["64"] < 0.5 * qps["1"], f"the engineered collapse did not happen on this machine: {qps}"
        alerts = wait_for("the collapse alert in Alertmanager", lambda: mon.alerts("BenchfleetThroughputCollapse"),
                          timeout=60)
        assert [(a["labels"]["campaign"], a["labels"]["target"], a["labels"]["workload"]) for a in alerts] == [
            (collapsing, "A", "oltp_update_non_index")]
        # After a real campaign, every query of the finished-cells board finds its series.
        board = dashboards.throughput_vs_threads()
        for title, expr in dashboards.prometheus_queries(board):
            if "ALERTS" not in expr:
                assert mon.query(substitute(expr, collapsing)), (title, expr)
        # The healthy campaign was judged by the same rules: its ratio exists and is above the fraction.
        ratio = mon.query(f'benchfleet:cell_collapse_ratio{{campaign="{healthy}"}}')
        assert ratio and float(ratio[0]["value"][1]) > 0.5
        assert not mon.query(f'ALERTS{{alertname="BenchfleetThroughputCollapse",campaign="{healthy}"}}')
        # Four results stored, each counted once.
        stored = wait_for("the stored-results counter", lambda: mon.query("benchfleet_collector_results_stored_total"))
        assert float(stored[0]["value"][1]) == 4

        # A restarted collector exports the earlier campaigns' cells again, from the results DB.
        old = {c["metric"]["instance"] for c in cells}
        collector = next(p for p in fleet.procs if "collector" in " ".join(p.args))
        collector.terminate()
        collector.wait(30)
        fleet.start_collector()
        again = wait_for("the healthy campaign's cells from the restarted collector", lambda: [
            c for c in mon.query(f'benchfleet_cell_queries_per_second{{campaign="{healthy}"}}')
            if c["metric"]["instance"] not in old] or None, timeout=60)
        assert sorted(c["metric"]["threads"] for c in again) == ["1", "4"]
    finally:
        fleet.teardown()
        mon.close()
