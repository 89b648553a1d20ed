"""sysbench's options as a spec says them, run by the real sysbench binary and by the native driver
against MariaDB, checked where the server can see them: statements as text or prepared, the
compressed protocol, a fixed number of events, the key distribution's parameters, the prepared
table shape and engine, the reported percentile and custom Lua scripts."""

from __future__ import annotations

import shutil
import time
from typing import Iterator

import mysql.connector
import pytest

from services.common.errors import DbError
from services.common.messages.results import RunResult
from services.common.messages.runs import Cell, RunSpec
from services.common.spec.targets import DsnTarget, ManagedTarget
from services.common.spec.workloads import DataShape, WorkloadSpec
from services.worker import prepare, runner
from services.worker.driver.contract import ConnectParams, LoadRequest, Progress
from services.worker.driver.native.parent import run_load
from services.worker.driver.sysbench import driver as sysbench_driver
from services.worker.driver.sysbench import scripts

pytestmark = pytest.mark.integration

DRIVERS = ["native", "sysbench"]
#: A managed server of the module's own: its global counters see this module's load only.
SERVER = ManagedTarget(kind="managed", name="opts", options={"innodb_buffer_pool_size": "64M"})
SHAPE = DataShape(tables=1, table_size=2000)
DB = "bf_test_sb_options"

_seq = iter(range(1, 1000))


@pytest.fixture(scope="module", autouse=True)
def _sysbench_installed() -> None:
    if shutil.which("sysbench") is None:
        pytest.fail("sysbench is not installed (deploy/ensure-services sysbench)", pytrace=False)


def _run(servers, workload: WorkloadSpec, driver: str, *, target=SERVER, data: DataShape = SHAPE,
         duration: float = 1.5, events: int | None = None, percentile: int | None = None) -> RunResult:
    seq = next(_seq)
    run = RunSpec(run_id=f"opts.{target.name}.{workload.key}.t2.r{seq}", campaign_id="opts", campaign_name="opts",
                  seq=seq, total_runs=999, cell=Cell(target=target.name, workload=workload.key, threads=2),
                  repetition=seq, target=target, workload=workload, data=data, driver=driver, duration=duration,
                  warmup=0.5, seed=seq, published_at=time.time(), events=events, percentile=percentile)
    return runner.execute(run, runner.WorkerIdentity("w-opts"), servers=servers)


def _deltas(result: RunResult) -> dict[str, float]:
    assert result.status == "ok", result.error
    assert result.server is not None
    return result.server.status_deltas


@pytest.mark.parametrize("driver", DRIVERS)
def test_ps_mode_disable_sends_text_the_server_counts_as_such(servers, driver):
    """db_ps_mode: disable (--db-ps-mode=disable): the server executes no prepared statement, its
    Com_select counts every point select; with the default each select is a Com_stmt_execute."""
    text = _deltas(_run(servers, WorkloadSpec(name="oltp_point_select", label="text",
                                              options={"db_ps_mode": "disable"}), driver))
    assert text["Com_select"] > 100 and text.get("Com_stmt_execute", 0) == 0, text
    prepared = _deltas(_run(servers, WorkloadSpec(name="oltp_point_select"), driver))
    assert prepared["Com_stmt_execute"] >= prepared["Com_select"] > 100, prepared


@pytest.mark.parametrize("driver", DRIVERS)
def test_compression_shrinks_what_the_server_sends(servers, driver):
    """mysql_compression: true (--mysql-compression=on): the server sends fewer bytes per transaction
    of oltp_read_only (its ranges return rows of digits, which compress)."""
    def bytes_per_trx(options: dict) -> float:
        result = _run(servers, WorkloadSpec(name="oltp_read_only", label=f"ro{len(options)}", options=options), driver)
        return _deltas(result)["Bytes_sent"] / result.totals.transactions

    plain, packed = bytes_per_trx({}), bytes_per_trx({"mysql_compression": True})
    assert packed < 0.8 * plain, (packed, plain)


@pytest.mark.parametrize("driver", DRIVERS)
def test_events_end_the_run_at_that_many_transactions(servers, driver):
    """events: N (--events=N beside --time): the run measures exactly N and ends before its duration."""
    result = _run(servers, WorkloadSpec(name="oltp_point_select"), driver, duration=30.0, events=400)
    assert result.status == "ok", result.error
    assert result.totals.transactions == 400 and result.measured_s < 20, (result.totals, result.measured_s)


@pytest.fixture(scope="module")
def local(mariadb_params) -> Iterator[ConnectParams]:
    p = ConnectParams(**mariadb_params, database=DB)
    yield p
    conn = mysql.connector.connect(**mariadb_params)
    conn.cursor().execute(f"DROP DATABASE IF EXISTS `{DB}`")
    conn.close()


def _connect(params: ConnectParams):
    return mysql.connector.connect(host=params.host, port=params.port, user=params.user, password=params.password)


def _rows(params: ConnectParams) -> dict[int, int]:
    conn = _connect(params)
    try:
        cur = conn.cursor()
        cur.execute(f"SELECT id, k FROM `{params.database}`.sbtest1")
        return {int(i): int(k) for i, k in cur.fetchall()}
    finally:
        conn.close()


@pytest.mark.parametrize("driver", DRIVERS)
def test_special_parameters_decide_which_rows_are_touched(local, driver):
    """rand_spec_res: 100 with rand_spec_pct: 1 (--rand-spec-res, --rand-spec-pct) sends every key
    to the middle 1% of the table: only those rows' k changes under oltp_update_index."""
    data = DataShape(tables=1, table_size=1000)
    w = WorkloadSpec(name="oltp_update_index", options={"rand_spec_res": 100, "rand_spec_pct": 1, "rand_spec_iter": 3})
    prepare.ensure_workload_tables(local, data, w)
    before = _rows(local)
    out = (sysbench_driver.run_sysbench if driver == "sysbench" else run_load)(LoadRequest(local, w, data, 2, 0.0, 1.0, 5))
    after = _rows(local)
    touched = sorted(i for i in before if before[i] != after[i])
    assert out.totals.transactions > 0 and touched
    assert 490 <= touched[0] and touched[-1] <= 512, touched


def _indexes(params: ConnectParams) -> set[str]:
    conn = _connect(params)
    try:
        cur = conn.cursor()
        cur.execute("SELECT index_name FROM information_schema.statistics WHERE table_schema = %s AND "
                    "table_name = 'sbtest1'", (params.database,))
        return {str(r[0]) for r in cur.fetchall()}
    finally:
        conn.close()


@pytest.mark.parametrize("driver", DRIVERS)
def test_secondary_and_create_secondary_shape_the_tables_the_run_uses(local, driver):
    """secondary: true puts id under KEY xid instead of the PRIMARY KEY, create_secondary: false
    leaves k unindexed, as sysbench's prepare does; then the run goes on those tables."""
    w = WorkloadSpec(name="oltp_read_write", options={"secondary": True, "create_secondary": False})
    data = DataShape(tables=1, table_size=500)
    assert prepare.ensure_workload_tables(local, data, w) in (True, False)
    assert _indexes(local) == {"xid"}
    out = (sysbench_driver.run_sysbench if driver == "sysbench" else run_load)(
        LoadRequest(local, w, data, 1, 0.0, 1.0, 5))
    assert out.totals.transactions > 0
    assert prepare.ensure_workload_tables(local, data, WorkloadSpec(name="oltp_read_write")) is True
    assert _indexes(local) == {"PRIMARY", "k_1"}


def test_other_engines_are_prepared_or_refused_by_name(local):
    """data.engine takes any engine the server has (MEMORY here) and refuses one it lacks, naming
    data.engine, before any table is touched."""
    data = DataShape(tables=1, table_size=200, engine="memory")
    prepare.ensure_tables(local, data)
    conn = _connect(local)
    try:
        cur = conn.cursor()
        cur.execute("SELECT engine FROM information_schema.tables WHERE table_schema = %s AND table_name = 'sbtest1'",
                    (DB,))
        assert cur.fetchone()[0] == "MEMORY"
        cur.execute("SELECT COUNT(*) FROM information_schema.engines WHERE engine = 'ROCKSDB' "
                    "AND support IN ('YES', 'DEFAULT')")
        has_rocksdb = cur.fetchone()[0] > 0
    finally:
        conn.close()
    out = sysbench_driver.run_sysbench(LoadRequest(local, WorkloadSpec(name="oltp_point_select"), data, 1, 0.0, 1.0, 3))
    assert out.totals.transactions > 0
    if not has_rocksdb:
        with pytest.raises(DbError, match="data.engine: the target's server has no storage engine ROCKSDB"):
            prepare.ensure_tables(local, DataShape(tables=1, table_size=200, engine="rocksdb"))


def test_percentile_is_what_sysbench_reports(local):
    """percentile: 99 (--percentile=99): sysbench's per-second reports, and so the live gauge, give p99."""
    prepare.ensure_tables(local, SHAPE)
    seen: list[Progress] = []
    out = sysbench_driver.run_sysbench(LoadRequest(local, WorkloadSpec(name="oltp_point_select"), SHAPE, 1, 0.0, 2.0,
                                                   3, on_progress=seen.append, percentile=99))
    assert out.totals.transactions > 0
    pcts = {p.interval_percentile.percentile for p in seen if p.interval_percentile is not None}
    assert pcts == {99.0}, seen


POINTS = """\
-- A custom test on oltp_common.lua's tables and statements: point selects only.
require("oltp_common")

function prepare_statements()
   prepare_point_selects()
end

function event()
   execute_point_selects()
end
"""


def _script_run(local: ConnectParams, script: str, database: str, monkeypatch) -> RunResult:
    monkeypatch.setenv("BF_TEST_SBO_PW", local.password)
    monkeypatch.setenv("BENCHFLEET_TARGET_PASSWORD_ENV", "BF_TEST_SBO_PW")
    target = DsnTarget(name="local", host=local.host, port=local.port, user=local.user,
                       password_env="BF_TEST_SBO_PW", database=database)
    w = WorkloadSpec(script=script, options={"point_selects": 3})
    run = RunSpec(run_id=f"c1.local.{script}.t1.r1", campaign_id="c1", campaign_name="c", seq=1, total_runs=1,
                  cell=Cell(target="local", workload=script, threads=1), repetition=1, target=target, workload=w,
                  data=SHAPE, driver="sysbench", duration=1.0, warmup=0.0, seed=3, published_at=time.time())
    return runner.execute(run, runner.WorkerIdentity("w1"))


def test_a_custom_lua_script_from_the_workers_directory_runs(local, monkeypatch, tmp_path):
    """A script the operator installed runs on the prepared sbtest tables with the workload's options."""
    (tmp_path / "bf_points.lua").write_text(POINTS)
    monkeypatch.setenv(scripts.ENV, f"{tmp_path / 'none'}:{tmp_path}")
    res = _script_run(local, "bf_points", DB, monkeypatch)
    assert res.status == "ok", res.error
    t = res.totals
    assert t.transactions > 0 and t.reads == 3 * t.transactions


def test_a_script_the_worker_lacks_fails_before_anything_runs(mariadb_params, local, monkeypatch, tmp_path):
    """A run naming a script not installed fails naming the field and the installed ones; its
    database is never created (nothing was prepared)."""
    (tmp_path / "bf_points.lua").write_text(POINTS)
    monkeypatch.setenv(scripts.ENV, str(tmp_path))
    fresh = "bf_test_sbo_never"
    res = _script_run(local, "bf_missing", fresh, monkeypatch)
    assert res.status == "failed"
    assert "workloads.bf_missing.script: script 'bf_missing' is not installed" in res.error
    assert "installed: bf_points" in res.error
    conn = mysql.connector.connect(**mariadb_params)
    try:
        cur = conn.cursor()
        cur.execute("SHOW DATABASES LIKE %s", (fresh,))
        assert cur.fetchall() == []
    finally:
        conn.close()
