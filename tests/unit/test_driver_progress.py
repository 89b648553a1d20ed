"""Live progress of both drivers through the worker's metrics: what a Prometheus scrape shows."""

from __future__ import annotations

from pathlib import Path

from services.worker.driver.sysbench import driver as sysbench_driver
from services.worker.driver.sysbench import output as so
from services.worker.metrics import WorkerMetrics
from tests.unit.test_metrics import run_spec, value

FIXTURES = Path(__file__).parent / "fixtures" / "sysbench"


def test_sysbench_progress_exports_running_totals_and_the_last_seconds_rate():
    """sysbench prints per-second rates (653.79, 660.86, 700.08 tx/s); the worker exports their
    running total (2015) and the last second's rate (700), not the last rate as a total."""
    m, run = WorkerMetrics("w1"), run_spec()
    m.run_started(run)
    for line in (FIXTURES / "oltp_read_write_pareto_histogram.txt").read_text().splitlines():
        iv = so.parse_interval(line)
        if iv is not None:
            m.observe_second(run, sysbench_driver._progress(iv))
    text = m.scrape()
    assert value(text, "benchfleet_worker_transactions_total") == 2015
    assert value(text, "benchfleet_worker_transactions_per_second") == 700
