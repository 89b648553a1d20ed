"""Cross-check of error semantics: a workload that must hit duplicate keys ends the same way with
the native driver as with sysbench 1.0.20, on the same throwaway server.

Delete-then-insert of the same id from four connections on a four-row MyISAM table: MyISAM has no
transactions, so two connections that delete the same id both insert it and the second gets
error 1062 (the seeds' "oltp_complex_rw: Dup key errors (due to sysbench)" on MyISAM). 1062 is
not in sysbench's default ignore list, so both drivers fail the run with it; with 1062 in the
list, both finish and count the duplicates as ignored errors.
"""

from __future__ import annotations

import shutil

import pytest

from bench.scratch_server import ScratchServer
from services.common.errors import LoadError
from services.common.spec.workloads import DataShape, WorkloadSpec
from services.worker import prepare
from services.common.spec.ignore_errors import DEFAULT as IGNORE_DEFAULT
from services.common.spec.ignore_errors import IgnoreErrors
from services.worker.driver.contract import ConnectParams, LoadRequest
from services.worker.driver.native.parent import run_load
from services.worker.driver.sysbench.driver import run_sysbench

pytestmark = pytest.mark.integration

SHAPE = DataShape(tables=1, table_size=4, engine="MyISAM")
#: Only the delete+insert pair, in autocommit: each event is DELETE id, INSERT id.
DELETE_INSERT = WorkloadSpec(name="oltp_write_only", options={
    "index_updates": 0, "non_index_updates": 0, "delete_inserts": 1, "skip_trx": True})
EVENTS = 3000
THREADS = 4
DRIVERS = {"native": run_load, "sysbench": run_sysbench}


@pytest.fixture(scope="module")
def server(mariadb_params):
    if shutil.which("sysbench") is None:
        pytest.fail("sysbench is not installed (deploy/ensure-services sysbench)", pytrace=False)
    with ScratchServer() as srv:
        srv.db = ConnectParams(**srv.params, database="sbtest")  # type: ignore[attr-defined]
        yield srv


def _run(server, driver: str, ignore_errors: IgnoreErrors = IGNORE_DEFAULT, processes: int | None = None):
    # Back to four rows before each run, so no driver inherits the other's missing ids.
    prepare.cleanup(server.db, SHAPE)
    prepare.ensure_tables(server.db, SHAPE)
    request = LoadRequest(server.db, DELETE_INSERT, SHAPE, THREADS, 0.0, None, 11, events=EVENTS,
                          ignore_errors=ignore_errors)
    return run_load(request, processes=processes) if driver == "native" else DRIVERS[driver](request)


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_duplicate_keys_end_the_run_with_error_1062_by_default(server, driver):
    """Error 1062 is outside sysbench's default ignore list: the run fails with that code and the
    server's message, never a number in a table."""
    with pytest.raises(LoadError) as e:
        _run(server, driver)
    assert e.value.code == 1062, str(e.value)
    assert str(e.value).startswith("MySQL error 1062: Duplicate entry"), str(e.value)


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_duplicate_keys_in_the_ignore_list_are_counted_and_the_run_finishes(server, driver):
    """With 1062 in ignore_errors the run finishes every event; the duplicates are ignored errors
    (each restarting its event), in the totals and the per-second series alike."""
    out = _run(server, driver, ignore_errors=(1020, 1062, 1205, 1213))
    t = out.totals
    assert t.transactions == EVENTS and t.errors == 0
    assert t.ignored_errors > 0 and t.reconnects == 0
    assert sum(out.series.ignored_errors) == t.ignored_errors


def test_one_blocking_connection_per_load_process_has_the_same_error_semantics(server):
    """A load process with a single connection drives it with blocking calls; a duplicate key still
    ends the run with 1062 by default, and with 1062 ignored every event is restarted and finishes."""
    with pytest.raises(LoadError) as e:
        _run(server, "native", processes=THREADS)
    assert e.value.code == 1062, str(e.value)
    out = _run(server, "native", ignore_errors=(1020, 1062, 1205, 1213), processes=THREADS)
    assert out.totals.transactions == EVENTS and out.totals.errors == 0
    assert out.totals.ignored_errors > 0 and sum(out.series.ignored_errors) == out.totals.ignored_errors
