"""The dashboards' queries and the collapse alert against a real Prometheus and Alertmanager.

One Prometheus (1 s scrapes, the shipped rules with the collapse fraction set to 0.3) scrapes a
WorkerMetrics and a CollectorMetrics found through file-based discovery, and sends alerts to
a real Alertmanager whose webhook points at a recorder in this process.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from services.collector import dashboards
from services.collector.prometheus import CollectorMetrics
from services.common.results.histogram import Histogram
from services.common.messages.runs import RunSpec
from services.common.monitoring.discovery import write_sd_file
from services.worker.driver.contract import Counts, IntervalPercentile, Progress
from services.worker.metrics import WorkerMetrics

from tests.integration.monitoring import get_json, start_monitoring, wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
LIVE_CAMPAIGN, CELLS_CAMPAIGN = "live1", "cells1"
#: Set below the 0.5 default, so a 40% cell proves the threshold is the rule's, not hard-coded.
FRACTION = 0.3
#: (target, q/s at 16, 64, 256 threads): collapses (10%), dips to 40% (above 0.3), healthy.
CELLS = {"collapsing": (1000.0, 1200.0, 120.0), "dipping": (1000.0, 1200.0, 480.0),
         "healthy": (1000.0, 1400.0, 1350.0)}
#: A campaign on two pools: B's q/s at 16, 64, 256 threads on each (neither collapses).
POOLS_CAMPAIGN, POOL_CELLS = "pools1", {"suse": (900.0, 1000.0, 950.0), "rhel": (300.0, 400.0, 390.0)}


def live_run(target: str, threads: int) -> RunSpec:
    return RunSpec.model_validate({
        "schema": "benchfleet.run/1", "run_id": f"{LIVE_CAMPAIGN}.{target}.oltp_read_only.t{threads}.r1",
        "campaign_id": LIVE_CAMPAIGN, "campaign_name": LIVE_CAMPAIGN, "seq": 1, "total_runs": 2,
        "cell": {"target": target, "workload": "oltp_read_only", "threads": threads}, "repetition": 1,
        "target": {"kind": "dsn", "name": target, "user": "bench"}, "workload": {"name": "oltp_read_only"}, "data": {},
        "duration": 600, "warmup": 10, "seed": 1, "published_at": 0})


def feed_worker(m: WorkerMetrics, runs: list[RunSpec], second: int) -> None:
    for i, run in enumerate(runs):
        h = Histogram()
        for us in range(500, 500 + 300 * second * (i + 1), 7):
            h.record(us)
        tx = 1000 * second * (i + 1)
        counts = Counts(transactions=tx, reads=tx * 14, writes=0, other=tx * 2, errors=second,
                        errors_by_code={"1205": second}, reconnects=second)
        # Both live latency figures, so the latency panel's histogram and sysbench queries both find
        # series (a real run has one of the two, by its driver).
        m.observe_progress(run, Progress("measure", float(second), counts, latency=h,
                                         interval_percentile=IntervalPercentile(95.0, 2.5 * (i + 1))))


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """Prometheus + Alertmanager on free ports, scraping literal worker and collector metrics."""
    tmp = tmp_path_factory.mktemp("prom")

    worker, collector = WorkerMetrics("w1"), CollectorMetrics()
    runs = [live_run("mariadb", 64), live_run("mysql", 64)]
    for run in runs:
        worker.run_started(run)
    feed_worker(worker, runs, 1)
    for target, qps in CELLS.items():
        for threads, q in zip((16, 64, 256), qps):
            collector.cell_finished(CELLS_CAMPAIGN, target, "oltp_read_only", threads, [q, q], [q / 16, q / 16])
    for pool, qps in POOL_CELLS.items():
        for threads, q in zip((16, 64, 256), qps):
            collector.cell_finished(POOLS_CAMPAIGN, "B", "oltp_read_only", threads, [q], [q / 16], pool)
    collector.results_stored(18)
    collector.ingest_lag(0.5)
    collector.queue_depth("benchfleet.results", 0)
    write_sd_file(tmp / "targets", "worker", "127.0.0.1", worker.start_http())
    write_sd_file(tmp / "targets", "collector", "127.0.0.1", collector.start_http())

    mon = start_monitoring(tmp, fraction=FRACTION)
    prom, am = mon.prometheus, mon.alertmanager
    try:
        def both_up():
            res = get_json(f"{prom}/api/v1/query?query=up")["data"]["result"]
            return len(res) == 2 and all(r["value"][1] == "1" for r in res)

        wait_for("Prometheus to scrape both endpoints", both_up)
        # A second, later report, so rate() and histogram_quantile() have movement to show.
        time.sleep(2)
        feed_worker(worker, runs, 3)
        time.sleep(3)
        yield {"prometheus": prom, "alertmanager": am, "received": mon.received}
    finally:
        mon.close()
        worker.close()
        collector.close()


def substitute(expr: str, campaign: str) -> str:
    """What Grafana sends: the chosen campaign, 'All' (.*) for multi-value variables."""
    for var, val in (("$__rate_interval", "10s"), ("$campaign", campaign), ("$target", ".*"), ("$workload", ".*")):
        expr = expr.replace(var, val)
    return expr


def query(prom: str, expr: str) -> list:
    body = get_json(f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    assert body["status"] == "success", body
    return body["data"]["result"]


@pytest.mark.parametrize("board", sorted(dashboards.all_dashboards()))
def test_every_dashboard_query_returns_series(fleet, board):
    """Each Prometheus query of each panel (and variable) finds at least one series."""
    b = dashboards.all_dashboards()[board]
    campaign = LIVE_CAMPAIGN if "worker" in json.dumps(b) else CELLS_CAMPAIGN
    empty = [(where, substitute(expr, campaign)) for where, expr in dashboards.prometheus_queries(b)
             if not query(fleet["prometheus"], substitute(expr, campaign))]
    assert empty == []


def test_live_board_sees_one_series_per_target(fleet):
    """The q/s panel of the live board splits by target, as users compare targets side by side."""
    expr = next(q for w, q in dashboards.prometheus_queries(dashboards.campaign_live()) if "Queries per second" in w)
    series = query(fleet["prometheus"], substitute(expr, LIVE_CAMPAIGN))
    assert sorted(s["metric"]["target"] for s in series) == ["mariadb", "mysql"]


def test_threads_board_has_a_series_per_target_and_per_pool(fleet):
    """The q/s-vs-threads panel pivots on one column per target; a campaign on two pools has one per
    target and pool, each with that pool's figures, not a mean of both."""
    expr = next(q for w, q in dashboards.prometheus_queries(dashboards.throughput_vs_threads())
                if "Queries per second" in w)
    one = query(fleet["prometheus"], substitute(expr, CELLS_CAMPAIGN))
    assert {s["metric"]["series"] for s in one} == set(CELLS)
    two = query(fleet["prometheus"], substitute(expr, POOLS_CAMPAIGN))
    got = {(s["metric"]["series"], s["metric"]["threads"]): float(s["value"][1]) for s in two}
    assert got == {(f"B@{pool}", str(t)): q for pool, qps in POOL_CELLS.items() for t, q in zip((16, 64, 256), qps)}


def test_collapse_alert_reaches_alertmanager_and_webhook(fleet):
    """A collapsing cell pages through Alertmanager with campaign/target/workload; dips above the fraction do not."""

    def collapse_alerts():
        alerts = get_json(f"{fleet['alertmanager']}/api/v2/alerts")
        return [a for a in alerts if a["labels"]["alertname"] == "BenchfleetThroughputCollapse"]

    alerts = wait_for("the collapse alert in Alertmanager", collapse_alerts)
    assert [(a["labels"]["campaign"], a["labels"]["target"], a["labels"]["workload"]) for a in alerts] == [
        (CELLS_CAMPAIGN, "collapsing", "oltp_read_only")]
    assert alerts[0]["status"]["state"] == "active"
    # Prometheus has judged every cell by now; the dipping and healthy targets must not be pending either.
    firing = query(fleet["prometheus"], 'ALERTS{alertname="BenchfleetThroughputCollapse"}')
    assert {s["metric"]["target"] for s in firing} == {"collapsing"}

    def delivered():
        return [a for n in fleet["received"] for a in n["alerts"]
                if a["labels"]["alertname"] == "BenchfleetThroughputCollapse"]

    hooked = wait_for("the webhook notification", delivered, timeout=20)
    assert hooked[0]["labels"]["target"] == "collapsing"
