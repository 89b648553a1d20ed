"""The per-second thread-pool monitor on a real managed pool-of-threads mariadbd: a run's result
holds the pool's gauges and information_schema figures second by second, read through the
worker's extra_port, and the HTML report of such runs draws them."""

from __future__ import annotations

import time

import pytest

from services.common.messages.results import RunResult
from services.common.messages.runs import Cell, RunSpec
from services.common.results.rows import ResultRow
from services.common.spec.targets import ManagedTarget
from services.common.spec.workloads import DataShape, WorkloadSpec
from services.reporting.analysis import CampaignData
from services.reporting.options import ReportOptions
from services.reporting.render.html import render_html_report
from services.reporting.report import analyse
from services.worker import runner
from services.worker.target import managed

pytestmark = pytest.mark.integration

SHAPE = DataShape(tables=1, table_size=10000, engine="InnoDB")
#: The study's pool options, small: exact queueing times and a listener per group.
POOLED = ManagedTarget(kind="managed", name="pool", options={
    "innodb_buffer_pool_size": "64M", "max_connections": "200", "thread_handling": "pool-of-threads",
    "thread_pool_size": "1", "thread_pool_exact_stats": True, "thread_pool_dedicated_listener": True})




def _run(servers: managed.ServerManager, threads: int, seq: int) -> RunResult:
    run = RunSpec(run_id=f"pool.pool.oltp_read_write.t{threads}.r1", campaign_id="pool", campaign_name="pool", seq=seq,
                  total_runs=2, cell=Cell(target="pool", workload="oltp_read_write", threads=threads), repetition=1,
                  target=POOLED, workload=WorkloadSpec(name="oltp_read_write"), data=SHAPE, duration=3.0,
                  warmup=1.0, seed=seq, published_at=time.time())
    result = runner.execute(run, runner.WorkerIdentity("w-pool"), servers=servers)
    assert result.status == "ok", result.error
    return result


def test_a_pool_run_stores_its_monitor_series_and_the_report_plots_it(servers):
    results = [_run(servers, 16, 1), _run(servers, 64, 2)]
    assert servers.current is not None and servers.current.extra_port, "the monitor reaches the pool by extra_port"
    for r in results:
        pool = r.server.pool
        assert pool is not None and pool.tables_reason is None, pool
        window = pool.window()
        # 3 s of window (and 1 s of warm-up before it), each second read by the monitor.
        assert len(window) == 3 and [s.second for s in pool.seconds][:2] == [-1, 0], pool.seconds
        read = [s for s in window if s.groups is not None]
        assert read and all(s.groups == 1 for s in read), window
        assert any(s.threads for s in window) and all(s.threads_connected and s.threads_connected >= r.cell.threads
                                                       for s in window if s.threads_connected is not None)
        assert sum(s.commits_per_s or 0 for s in window) > 0, window
        assert all(s.queue_length is not None and s.oldest_queued_ms is not None for s in read)
    data = CampaignData("pool", "pool", "finished", ("pool",), "pool", ("oltp_read_write",), (16, 64),
                        {"name": "pool"}, tuple(ResultRow.of(r) for r in results))
    page = render_html_report(analyse(data, ReportOptions()))
    assert 'id="plot-pool-oltp_read_write"' in page and 'id="pool"' in page
    assert "pool / oltp_read_write: the pool" in page
