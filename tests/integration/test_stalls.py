"""A real stall on the real MariaDB, with both drivers: the run is marked, its cell is marked in
the report and the stall counter is exported.

The stall is made on this test's own database only: another connection holds ``LOCK TABLES
sbtest1 WRITE`` on it for a few seconds from the first measured second, past the run's end, so
the write workload completes nothing meanwhile and its last transactions finish late. Nobody
else's tables are touched (no global read lock on the shared server).
"""

from __future__ import annotations

import secrets
import shutil
import threading
import time
import urllib.request

import mysql.connector
import pytest

from services.common.messages.results import RunResult
from services.common.messages.runs import RunSpec
from services.common.spec.loading import parse_spec
from services.common.store import Store
from services.reporting.load import load_report
from services.reporting.options import ReportOptions
from services.reporting.report import render_lines
from services.scheduler import plan
from services.worker import runner
from services.worker.driver.contract import Progress
from services.worker.metrics import WorkerMetrics

from tests.integration.fleet import TARGET_PASSWORD_ENV, TEST_PASSWORD_PREFIX, TEST_TARGET_PASSWORD, target_yaml

pytestmark = pytest.mark.integration

DB = "bf_test_stalls"
#: Planned: 1 s warm-up + 5 s measured. The lock is taken at the first measured second and held
#: HOLD_S, so about 4 measured seconds are empty and the run ends about 2 s past its plan.
WARMUP_S, DURATION_S, HOLD_S = 1, 5, 6.0


def spec_text(settings, driver: str) -> str:
    return (
        f"name: stalls-{driver}\n"
        "pool: itest\n"
        f"driver: {driver}\n"
        "targets:\n" + target_yaml(settings, "local", DB) +
        "workloads: [oltp_update_index]\n"
        "data: {tables: 1, table_size: 1000}\n"
        "threads: [2]\n"
        f"duration: {DURATION_S}s\n"
        f"warmup: {WARMUP_S}s\n"
        "repeat: 2\n"
        "seed: 18\n"
    )


class TableLock:
    """Holds LOCK TABLES sbtest1 WRITE on the test's database for ``hold_s`` once ``start`` is
    called; the connection is opened beforehand, so the lock follows the call at once."""

    def __init__(self, params: dict, hold_s: float):
        self.conn = mysql.connector.connect(**params, database=DB, autocommit=True)
        self.hold_s = hold_s
        self.thread: threading.Thread | None = None
        self.locked_at: float | None = None

    def start(self) -> None:
        if self.thread is None:
            self.thread = threading.Thread(target=self._hold, daemon=True)
            self.thread.start()

    def _hold(self) -> None:
        cur = self.conn.cursor()
        cur.execute("LOCK TABLES sbtest1 WRITE")
        self.locked_at = time.time()
        time.sleep(self.hold_s)
        cur.execute("UNLOCK TABLES")

    def close(self) -> None:
        if self.thread is not None:
            self.thread.join(self.hold_s + 10)
        self.conn.close()


@pytest.fixture
def results_settings(results_db, settings, monkeypatch):
    """The test's own results DB (tests/integration/conftest.py); the worker may read the target's password."""
    monkeypatch.setenv(TARGET_PASSWORD_ENV, TEST_PASSWORD_PREFIX + "*")
    monkeypatch.setenv(TEST_TARGET_PASSWORD, settings.db_password or "")
    return results_db


def execute(run: RunSpec, metrics: WorkerMetrics, lock: TableLock | None) -> RunResult:
    """Run ``run`` as a worker does, feeding the metrics; take the lock at the first measured second."""

    def on_progress(p: Progress) -> None:
        metrics.observe_progress(run, p)
        if lock is not None and p.phase == "measure" and p.elapsed_s >= 1:
            lock.start()

    metrics.run_started(run)
    result = runner.execute(run, runner.WorkerIdentity("w1"), on_progress=on_progress)
    metrics.run_finished(run, result)
    return result


@pytest.mark.parametrize("driver", ["native", "sysbench"])
def test_a_locked_table_marks_the_run_its_cell_and_the_counter(driver, results_settings, mariadb_params):
    """Repetition 1 runs clean; repetition 2 has its table write-locked for 6 s from the first
    measured second: that run (only) is marked for a stall and an overrun, its stalled seconds are
    in the results columns, the report puts ~ on the cell and lists the run, and the worker's
    stall counter has the run's stalled seconds."""
    if driver == "sysbench" and shutil.which("sysbench") is None:
        pytest.fail("sysbench is not installed (deploy/ensure-services sysbench)", pytrace=False)
    setup = mysql.connector.connect(**mariadb_params)
    setup.cursor().execute(f"CREATE DATABASE IF NOT EXISTS {DB}")
    setup.close()
    spec = parse_spec(spec_text(results_settings, driver))
    campaign_id = f"stalls-{driver}-{secrets.token_hex(3)}"
    clean_run, stalled_run = plan.run_specs(spec, campaign_id)
    metrics = WorkerMetrics("w1")
    with Store(results_settings) as store:
        store.campaigns.record(campaign_id, spec, [clean_run, stalled_run])
        clean = execute(clean_run, metrics, None)
        lock = TableLock(mariadb_params, HOLD_S)
        try:
            stalled = execute(stalled_run, metrics, lock)
        finally:
            lock.close()
        for r in (clean, stalled):
            assert r.status == "ok", r.error
            store.results.store(r)
        rows = {r.repetition: r for r in store.results.rows(campaign_id)}

    assert lock.locked_at is not None
    # The clean repetition: transactions every second, on time.
    assert clean.quality is not None and clean.quality.flags == [], clean.quality
    assert rows[1].stalled_s == 0 and rows[1].quality_flags == ""
    # The locked one: seconds with no transaction, a slowest transaction as long as the lock, late.
    q = stalled.quality
    assert q is not None and q.flags == ["stall", "overrun"], (q, stalled.series.transactions)
    assert 2 <= q.stalled_s <= DURATION_S - 1 and q.longest_stall_s >= 2
    assert q.overrun_s > 1.0
    if driver == "native":
        # Counted when they complete: the transactions the lock held complete after the window,
        # so they are in flight at its end, the oldest about as old as the lock, and not counted.
        w = stalled.window
        assert w is not None and w.in_flight_at_end >= 1 and w.oldest_in_flight_s > 2.0, w
    else:
        # sysbench checks the time only before an event: it counts its last ones, held by the lock.
        assert stalled.window is None and stalled.latency.max_ms > 2000
    assert (rows[2].stalled_s, rows[2].longest_stall_s, rows[2].quality_flags) == (
        q.stalled_s, q.longest_stall_s, "stall,overrun")
    assert rows[2].overrun_s == pytest.approx(q.overrun_s)

    with Store(results_settings) as store:
        lines = render_lines(load_report(store, campaign_id, ReportOptions(mode="absolute")))
    cell = next(line for line in lines if line.startswith("    local "))
    assert cell.rstrip().endswith("~"), lines
    assert any(line.startswith(" ~  stall:") for line in lines)
    listed = [line for line in lines if f"(run {stalled_run.run_id})" in line]
    assert len(listed) == 1 and f"stalled {q.stalled_s} s" in listed[0], lines
    assert not any(f"(run {clean_run.run_id})" in line for line in lines)

    port = metrics.start_http()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            body = resp.read().decode()
    finally:
        metrics.close()
    counter = [line for line in body.splitlines() if line.startswith("benchfleet_worker_stalled_seconds_total{")]
    assert len(counter) == 1 and f'campaign="{campaign_id}"' in counter[0] and 'target="local"' in counter[0]
    assert float(counter[0].rsplit(" ", 1)[1]) == q.stalled_s
