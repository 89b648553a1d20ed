"""driver: sysbench against the real MariaDB: the sysbench binary runs and its reports become a result."""

from __future__ import annotations

import dataclasses
import shutil
import time

import pytest

from services.common.messages.runs import Cell, RunSpec
from services.common.spec.targets import DsnTarget
from services.common.spec.workloads import DataShape, WorkloadSpec
from services.worker import prepare, runner
from services.worker.driver.contract import ConnectParams, LoadRequest, Progress
from services.worker.driver.sysbench import driver as sysbench_driver
from services.common.errors import LoadError

from tests.metered_run import metered_run

pytestmark = pytest.mark.integration

DB = "bf_test_sysbench"
SHAPE = DataShape(tables=2, table_size=1000)


@pytest.fixture(scope="module")
def params(mariadb_params) -> ConnectParams:
    if shutil.which("sysbench") is None:
        pytest.fail("sysbench is not installed (deploy/ensure-services sysbench)", pytrace=False)
    p = ConnectParams(**mariadb_params, database=DB)
    prepare.ensure_tables(p, SHAPE)
    return p


# Serial: it asserts the measured window's length and per-second series, which other load stretches.
@pytest.mark.serial
def test_sysbench_run_becomes_a_result_with_series_and_histogram(params):
    """A sysbench run yields totals, one series entry per second and a latency histogram, like a native run."""
    seconds: list[Progress] = []
    out = sysbench_driver.run_sysbench(LoadRequest(params, WorkloadSpec(name="oltp_read_only"), SHAPE, 2, 1.0, 2.0,
                                                   7, on_progress=seconds.append))
    t = out.totals
    assert t.transactions > 0 and t.reads == 14 * t.transactions and t.other == 2 * t.transactions
    assert len(out.series.transactions) == 2
    # Live progress is sysbench's report lines; it drops the last one when the run ends on it.
    assert [s.elapsed_s for s in seconds] in ([1.0], [1.0, 2.0])
    assert sum(out.latency.histogram["buckets"].values()) == t.transactions
    assert 0 < out.latency.p50_ms <= out.latency.p95_ms <= out.latency.p99_ms <= out.latency.max_ms
    assert 1.9 < out.measured_s < 2.5 and out.warmup_s >= 1.0 and out.client_cpu_s > 0


def test_sysbench_fixed_events_runs_exactly_that_many(params):
    """--events=N --time=0 runs exactly N transactions, the fidelity tests' reference mode."""
    out = sysbench_driver.run_sysbench(LoadRequest(params, WorkloadSpec(name="oltp_point_select"), SHAPE, 2, 0.0,
                                                   None, 1, events=300))
    assert out.totals.transactions == 300 and out.totals.reads == 300


def test_runner_dispatches_driver_sysbench_and_fails_clearly_without_it(params, monkeypatch, tmp_path):
    """A run spec with driver sysbench runs sysbench; on a worker without sysbench the run fails naming the package."""
    target = DsnTarget(name="local", host=params.host, port=params.port, user=params.user,
                       password_env="BF_TEST_SB_PW", database=DB)
    monkeypatch.setenv("BF_TEST_SB_PW", params.password)
    monkeypatch.setenv("BENCHFLEET_TARGET_PASSWORD_ENV", "BF_TEST_SB_PW")  # the worker operator allows it
    run = RunSpec(run_id="c1.local.oltp_point_select.t1.r1", campaign_id="c1", campaign_name="c", seq=1, total_runs=1,
                  cell=Cell(target="local", workload="oltp_point_select", threads=1), repetition=1, target=target,
                  workload=WorkloadSpec(name="oltp_point_select"), data=SHAPE, driver="sysbench", duration=1.0,
                  warmup=0.0, seed=3, published_at=time.time())
    res = runner.execute(run, runner.WorkerIdentity("w1"))
    assert res.status == "ok", res.error
    assert res.totals.transactions > 0 and res.measured_s > 0.9

    monkeypatch.setenv("PATH", str(tmp_path))  # a worker without sysbench installed
    res = runner.execute(run, runner.WorkerIdentity("w1"))
    assert res.status == "failed" and "Debian package 'sysbench'" in res.error


def test_sysbench_failure_is_a_load_error_with_the_mysql_code(params):
    """When sysbench cannot run (here: no such database), the error carries its FATAL message and MySQL code."""
    with pytest.raises(LoadError) as e:
        sysbench_driver.run_sysbench(LoadRequest(dataclasses.replace(params, database="bf_test_sb_nodb"),
                                                 WorkloadSpec(name="oltp_point_select"), SHAPE, 1, 0.0, 1.0, 1))
    assert e.value.code == 1049 and "Unknown database 'bf_test_sb_nodb'" in str(e.value)


@pytest.fixture
def rogue(tmp_path):
    """A rogue server asking every client for a canary file only the worker can read."""
    from tests.integration.rogue_server import RogueServer

    canary = tmp_path / "canary"
    canary.write_text("worker-secret-canary\n")
    canary.chmod(0o600)
    server = RogueServer(str(canary))
    yield server
    server.close()


def test_a_rogue_server_reads_no_file_through_sysbench(rogue):
    """sysbench's client library (libmariadb, built to accept LOAD DATA LOCAL only after the
    client itself sent one) refuses the server's file request: the run fails with error 2000
    and the canary never leaves the worker. This guards the worker's package: a client library
    built with local infile always on would fail this test."""
    if shutil.which("sysbench") is None:
        pytest.fail("sysbench is not installed (deploy/ensure-services sysbench)", pytrace=False)
    params = ConnectParams(host="127.0.0.1", port=rogue.port, user="bench", password="", database="sbtest")
    with pytest.raises(LoadError) as e:
        sysbench_driver.run_sysbench(LoadRequest(params, WorkloadSpec(name="oltp_point_select"), DataShape(tables=1),
                                                 1, 0.0, 2.0, 1))
    assert rogue.requests >= 1, "the rogue server was never asked a query"
    assert e.value.code == 2000 and "Load data local infile forbidden" in str(e.value), e.value
    assert rogue.received == []


def test_a_rogue_server_reads_no_file_through_the_workers_own_connections(rogue):
    """The connections the worker opens itself (server identity, quiesce, status sampling) do
    not send a local file either."""
    from services.worker.target import dsn

    import mysql.connector

    with pytest.raises(mysql.connector.Error) as e:
        # The connector's first statement (autocommit) already meets the request.
        dsn.connect(ConnectParams(host="127.0.0.1", port=rogue.port, user="bench", password="", database="sbtest"))
    assert e.value.errno == 2068, e.value  # "LOAD DATA LOCAL INFILE file request rejected"
    assert rogue.requests >= 1 and rogue.received == []


def test_a_short_sysbench_run_exports_its_per_second_percentile(params):
    """With driver: sysbench the live panel shows what sysbench printed each second: its 95th
    percentile of that second, as a gauge labelled percentile="95" (no histogram: sysbench prints none live)."""
    from services.worker.metrics import WorkerMetrics

    seconds: list[Progress] = []
    sysbench_driver.run_sysbench(LoadRequest(params, WorkloadSpec(name="oltp_point_select"), SHAPE, 2, 0.0, 3.0,
                                             7, on_progress=seconds.append))
    assert seconds and all(s.interval_percentile is not None for s in seconds)
    assert {s.interval_percentile.percentile for s in seconds} == {95.0}
    run = metered_run(duration=3, seed=7)
    metrics = WorkerMetrics("w1")
    metrics.run_started(run)
    for progress in seconds:
        metrics.observe_progress(run, progress)
    line = next(x for x in metrics.scrape().decode().splitlines()
                if x.startswith("benchfleet_worker_interval_latency_seconds{"))
    assert 'percentile="95"' in line
    assert float(line.rsplit(" ", 1)[1]) == seconds[-1].interval_percentile.ms / 1000 > 0
