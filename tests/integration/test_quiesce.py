"""Quiesce between runs on the real MariaDB: a statement a failed run left running is ended
before the next run and the wait is recorded; a target that does not settle fails the run
naming what ran (a managed one is restarted); a retry ends it and waits instead of starting.

The leftover statements are connections these tests open themselves, as the bench user on a
database of their own, so nothing here can end another engineer's connection. The managed
target is a private mariadbd the worker starts under a temporary managed directory.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import mysql.connector
import pytest

from services.common.config import Settings
from services.common.messages.runs import Cell, RunSpec, run_id_of
from services.common.messages.results import RunResult
from services.common.messages.codec import decode
from services.common.spec.targets import MAX_HISTORY, DsnTarget, ManagedTarget, Quiesce
from services.common.spec.workloads import DataShape, WorkloadSpec
from services.common.bus.stub import StubBroker
from services.worker import prepare, runner
from services.worker.consumer import Worker
from services.worker.target.connect_params import ConnectParams
from services.worker.target.dsn import connector_kwargs

from tests.integration.fleet import wait_for

# Serial (run alone after the parallel pass): it waits for the shared server to settle and changes its global InnoDB settings.
pytestmark = [pytest.mark.integration, pytest.mark.serial]

SHAPE = DataShape(tables=1, table_size=1000)
PASSWORD_ENV = "BF_TEST_QUIESCE_PW"
WHO = runner.WorkerIdentity("w-quiesce", host="h")


@dataclass
class Leftover:
    """A statement of "an earlier run": a connection of this test running SELECT SLEEP as the
    bench user on the test's database, in a thread, until it ends or is ended."""

    params: dict[str, Any]
    seconds: int = 600
    conn: Any = None
    id: int = 0
    error: BaseException | None = None
    thread: threading.Thread | None = field(default=None, repr=False)

    def start(self) -> "Leftover":
        self.conn = mysql.connector.connect(use_pure=False, autocommit=True, **self.params)
        cur = self.conn.cursor()
        cur.execute("SELECT CONNECTION_ID()")
        self.id = int(cur.fetchone()[0])
        self.thread = threading.Thread(target=self._sleep, daemon=True)
        self.thread.start()
        wait_for(self.running, 10, f"connection {self.id} to run its SLEEP", interval=0.05)
        return self

    def _sleep(self) -> None:
        try:
            cur = self.conn.cursor()
            cur.execute(f"SELECT SLEEP({self.seconds})")
            cur.fetchall()
        except BaseException as e:  # ended by the worker: what the test looks for
            self.error = e

    def running(self) -> bool:
        return _running(self.params, self.id)

    def end(self) -> None:
        """Teardown: this test's own connection, ended if it still runs."""
        if self.thread is not None and self.thread.is_alive():
            try:
                with mysql.connector.connect(use_pure=False, **self.params) as c:
                    c.cursor().execute(f"KILL CONNECTION {self.id}")
            except mysql.connector.Error:
                pass
            self.thread.join(10)
        try:
            self.conn.close()
        except Exception:
            pass


#: A load process's statement, run by a child this test then SIGKILLs: a row lock wait, which
#: (unlike SLEEP, which looks at its client every few seconds) runs on after its client died.
_WAITER = """
import json, sys
import mysql.connector
c = mysql.connector.connect(use_pure=False, autocommit=True, **json.loads(sys.stdin.readline()))
cur = c.cursor()
cur.execute("SET SESSION innodb_lock_wait_timeout = 600")
cur.execute("SELECT CONNECTION_ID()")
print(cur.fetchone()[0], flush=True)
cur.execute("SELECT id FROM sbtest1 WHERE id = 1 FOR UPDATE")
"""


@dataclass
class DeadClient:
    """What a failed run leaves: a statement still running on the server after its client (a
    load process) was killed. This test's connections: an idle one holding a row lock, and a
    child's waiting for it as the bench user on the test's database until the child dies."""

    params: dict[str, Any]
    holder: Any = None
    id: int = 0

    def start(self) -> "DeadClient":
        self.holder = mysql.connector.connect(use_pure=False, **self.params)
        cur = self.holder.cursor()
        cur.execute("START TRANSACTION")
        cur.execute("SELECT id FROM sbtest1 WHERE id = 1 FOR UPDATE")
        cur.fetchall()
        child = subprocess.Popen([sys.executable, "-c", _WAITER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 text=True)
        try:
            child.stdin.write(json.dumps(self.params) + "\n")
            child.stdin.flush()
            self.id = int(child.stdout.readline())
            wait_for(self.running, 10, f"connection {self.id} to wait for the row lock", interval=0.05)
        finally:
            child.kill()
            child.wait(10)
        return self

    def running(self) -> bool:
        return _running(self.params, self.id)

    def end(self) -> None:
        """Teardown: this test's own connections."""
        try:
            with mysql.connector.connect(use_pure=False, **self.params) as c:
                c.cursor().execute(f"KILL CONNECTION {self.id}")
        except mysql.connector.Error:
            pass  # ended already, as the tests expect
        try:
            self.holder.rollback()
            self.holder.close()
        except Exception:
            pass


def _running(params: dict, cid: int) -> bool:
    """Whether connection ``cid`` is still running a statement on the server."""
    with mysql.connector.connect(use_pure=False, **params) as c:
        cur = c.cursor()
        cur.execute("SELECT COMMAND FROM information_schema.PROCESSLIST WHERE ID = %s", (cid,))
        row = cur.fetchone()
        return row is not None and row[0] in ("Query", "Killed")


@pytest.fixture(scope="module")
def params(mariadb_params) -> dict:
    """The bench user on a database of this module's own, with the sbtest tables."""
    db = f"bf_test_quiesce_{secrets.token_hex(3)}"
    p = dict(mariadb_params, database=db)
    prepare.ensure_tables(ConnectParams(**p), SHAPE)
    yield p
    with mysql.connector.connect(use_pure=False, **mariadb_params) as c:
        c.cursor().execute(f"DROP DATABASE IF EXISTS `{db}`")


@pytest.fixture
def target_password(params, monkeypatch) -> None:
    monkeypatch.setenv(PASSWORD_ENV, params["password"] or "")
    monkeypatch.setenv("BENCHFLEET_TARGET_PASSWORD_ENV", PASSWORD_ENV)  # the worker operator allows it


@pytest.fixture
def leftovers(params):
    """Makes statements of "an earlier run": ``dead=True`` one whose client is gone (what a
    failed run leaves), else one of a live client (this test's thread)."""
    made: list[Leftover | DeadClient] = []

    def make(dead: bool = False) -> Leftover | DeadClient:
        lo = DeadClient(dict(params)).start() if dead else Leftover(dict(params)).start()
        made.append(lo)
        return lo

    yield make
    for lo in made:
        lo.end()


def connections_only(timeout: float) -> Quiesce:
    """Quiesce rules for the shared server, whose dirty pages and history list are the other
    engineers' (the managed test below checks those on a server of its own)."""
    return Quiesce(timeout=timeout, max_dirty_pct=100, max_history=MAX_HISTORY)


def dsn(params: dict, quiesce: Quiesce) -> DsnTarget:
    return DsnTarget(name="local", host=params["host"], port=params["port"], user=params["user"],
                     password_env=PASSWORD_ENV if params["password"] else None, database=params["database"],
                     quiesce=quiesce)


def run_of(target, repetition: int = 1, data: DataShape = SHAPE, workload: str = "oltp_point_select",
           duration: float = 1.0) -> RunSpec:
    # The run id follows from campaign, cell and repetition (the message contract checks it).
    cell = Cell(target=target.name, workload=workload, threads=1)
    return RunSpec(run_id=run_id_of("c-quiesce", cell, repetition), campaign_id="c-quiesce", campaign_name="quiesce",
                   seq=1, total_runs=1, cell=cell, repetition=repetition, target=target,
                   workload=WorkloadSpec(name=workload), data=data, duration=duration, warmup=0.0, seed=5,
                   published_at=time.time())


def test_a_failed_runs_statement_is_ended_before_the_next_run_and_the_wait_recorded(params, target_password, leftovers):
    """After a failed run, its statement still running on the server for a client that is gone
    is ended (KILL), the worker waits for it to go, then measures; the result records the wait
    and what was ended."""
    left = leftovers(dead=True)
    seen_while_measuring: list[bool] = []

    def on_progress(_) -> None:
        if not seen_while_measuring:
            seen_while_measuring.append(left.running())

    res = runner.execute(run_of(dsn(params, connections_only(60)), duration=2.0), WHO, after_failure=True,
                         on_progress=on_progress)
    assert res.status == "ok", res.error
    q = res.quiesce
    assert q is not None and q.settled and q.ended_connections == 1 and q.unsettled == []
    # One look found it, a later one saw it gone: the wait is in the result.
    assert q.polls >= 2 and q.waited_s > 0
    assert seen_while_measuring == [False]
    assert res.totals.transactions > 0


def test_a_target_that_never_settles_fails_the_run_naming_what_runs(params, target_password, leftovers):
    """Without a failure before it the worker does not end the statement, it waits; at the
    bound the run fails naming the connection and its statement, and the statement runs on."""
    left = leftovers()
    res = runner.execute(run_of(dsn(params, connections_only(1))), WHO)
    assert res.status == "failed"
    assert res.error.startswith("targets.local.quiesce: the target did not settle within 1 s (quiesce.timeout): ")
    assert f"connection {left.id} ({params['user']}@" in res.error and "SELECT SLEEP(600)" in res.error
    assert res.quiesce is not None and not res.quiesce.settled and res.quiesce.ended_connections == 0
    assert any(f"connection {left.id} " in u for u in res.quiesce.unsettled)
    assert res.measured_s == 0 and res.totals.transactions == 0
    assert left.running()


def test_a_live_clients_statement_is_never_ended(params, target_password, leftovers):
    """Even after a failure, a statement whose client is still connected (another worker's, a
    user's) is waited for, never ended; the run fails naming it."""
    left = leftovers()
    res = runner.execute(run_of(dsn(params, connections_only(1))), WHO, after_failure=True)
    assert res.status == "failed" and f"connection {left.id} " in res.error
    assert res.quiesce.ended_connections == 0 and left.error is None and left.running()


def test_a_live_socket_clients_statement_on_a_dsn_target_is_never_ended(params, target_password, monkeypatch):
    """On a DSN target reached over its unix socket a client's liveness cannot be seen, so even
    after a failure the worker ends nothing there: a user's statement is waited for and the run
    fails naming it (only the worker's own managed server has its socket leftovers ended)."""
    with mysql.connector.connect(use_pure=False, **params) as c:
        cur = c.cursor()
        cur.execute("SELECT @@socket")
        sock = str(cur.fetchone()[0])
    if not os.path.exists(sock):
        pytest.skip(f"the server's socket {sock} is not on this host")
    over_socket = dict(params, unix_socket=sock)
    monkeypatch.setenv("BENCHFLEET_TARGET_SOCKET_DIRS", os.path.dirname(sock))  # the worker operator allows it
    left = Leftover(over_socket).start()
    try:
        target = dsn(params, connections_only(1)).model_copy(update={"socket": sock})
        res = runner.execute(run_of(target), WHO, after_failure=True)
        assert res.status == "failed" and f"connection {left.id} " in res.error, res.error
        assert res.quiesce.ended_connections == 0 and left.error is None and left.running()
    finally:
        left.end()


def test_quiesce_off_starts_at_once_and_records_nothing(params, target_password, leftovers):
    """A dsn target without quiesce (the default) neither waits nor ends anything."""
    left = leftovers(dead=True)
    res = runner.execute(run_of(dsn(params, Quiesce(enabled=False))), WHO, after_failure=True)
    assert res.status == "ok", res.error
    assert res.quiesce is None and left.running()


def test_a_retry_waits_for_the_target_instead_of_starting_at_once(params, target_password, leftovers):
    """A run whose target did not settle is retried (at once: no retry pause); the retry ends
    the statement that held it, waits for it to go, and only then measures."""
    left = leftovers(dead=True)
    broker = StubBroker()
    run = run_of(dsn(params, connections_only(1)), repetition=7)
    with broker.bus("scheduler") as bus:
        bus.declare(("default",))
        bus.publish_runs("default", [run.encode()])
    w = Worker(Settings(run_attempts=2), pool="default", identity=WHO, connect=broker.bus,
               retry_pause_s=0, backoff_s=0.01)
    t = threading.Thread(target=w.run_forever, daemon=True)
    t.start()
    try:
        broker.join(broker.names.runs_queue("default"), timeout=60)
    finally:
        w.stop()
        t.join(30)
    stored = [m for m in (decode(d.body) for d in broker.messages(broker.names.results)) if isinstance(m, RunResult)]
    assert [(r.status, r.attempt) for r in stored] == [("ok", 2)], [r.error for r in stored]
    q = stored[0].quiesce
    assert q is not None and q.settled and q.ended_connections == 1
    assert not left.running()


# ----------------------------------------------------------------------------- managed




def test_managed_target_that_does_not_settle_is_restarted_and_its_flushing_options_restored(servers):
    """A managed target settles by default: after a write run it is flushed before the next
    one, with its own dirty page options back in place; one that does not settle within the
    bound fails the run naming the statement and comes back as a fresh server."""
    # lwm 0 (MariaDB's default): the idle server would not flush by itself.
    target = ManagedTarget(kind="managed", name="m", options={"innodb_buffer_pool_size": "32M",
                                                              "innodb_max_dirty_pages_pct": 75,
                                                              "innodb_max_dirty_pages_pct_lwm": 0},
                           quiesce=Quiesce(timeout=5))
    first = runner.execute(run_of(target, 1, workload="oltp_write_only"), WHO, servers=servers)
    assert first.status == "ok", first.error
    assert first.quiesce is not None and first.quiesce.settled

    after_writes = runner.execute(run_of(target, 2), WHO, servers=servers)
    assert after_writes.status == "ok", after_writes.error
    q = after_writes.quiesce
    assert q is not None and q.settled and q.dirty_pct is not None and q.dirty_pct <= 1.0
    server = servers.current
    params = connector_kwargs(server.connect_params())

    def dirty_options() -> tuple:
        with mysql.connector.connect(use_pure=False, **params) as c:
            cur = c.cursor()
            cur.execute("SELECT @@innodb_max_dirty_pages_pct, @@innodb_max_dirty_pages_pct_lwm")
            return cur.fetchone()

    assert dirty_options() == (75.0, 0.0)
    # A low-water mark above 0 is lowered by the flush request (pct 0 < lwm) and put back too.
    with mysql.connector.connect(use_pure=False, **params) as c:
        c.cursor().execute("SET GLOBAL innodb_max_dirty_pages_pct_lwm = 5")
    assert runner.execute(run_of(target, 3), WHO, servers=servers).status == "ok"
    assert dirty_options() == (75.0, 5.0)

    pid = server.pid
    left = Leftover(params).start()
    try:
        res = runner.execute(run_of(target, 4), WHO, servers=servers)
        assert res.status == "failed"
        assert "did not settle within 5 s" in res.error and f"connection {left.id} " in res.error
        assert "SELECT SLEEP(600)" in res.error
        assert res.quiesce is not None and res.quiesce.restarted is True
        left.thread.join(30)
        assert left.error is not None  # its server went away
        assert servers.current is not None and servers.current.pid != pid
    finally:
        left.end()
    again = runner.execute(run_of(target, 5), WHO, servers=servers)
    assert again.status == "ok", again.error
    assert again.quiesce.settled and again.server.pid == servers.current.pid


def test_a_managed_server_whose_flushing_was_not_put_back_is_started_again(servers):
    """A managed server marked by a quiesce that could not restore its dirty page options is not
    reused with innodb_max_dirty_pages_pct = 0: the next run starts it again, with its own 75."""
    target = ManagedTarget(kind="managed", name="m2", options={"innodb_buffer_pool_size": "32M",
                                                               "innodb_max_dirty_pages_pct": 75},
                           quiesce=Quiesce(enabled=False))
    assert runner.execute(run_of(target, 1), WHO, servers=servers).status == "ok"
    server = servers.current
    pid, params = server.pid, connector_kwargs(server.connect_params())
    with mysql.connector.connect(use_pure=False, **params) as c:
        c.cursor().execute("SET GLOBAL innodb_max_dirty_pages_pct = 0")  # what the failed restore left
    server.restart_before_reuse = True
    again = runner.execute(run_of(target, 2), WHO, servers=servers)
    assert again.status == "ok", again.error
    assert servers.current.pid != pid
    with mysql.connector.connect(use_pure=False, **connector_kwargs(servers.current.connect_params())) as c:
        cur = c.cursor()
        cur.execute("SELECT @@innodb_max_dirty_pages_pct")
        assert cur.fetchone()[0] == 75.0


def test_the_wait_is_stored_in_its_own_column(mariadb_params, settings):
    """Migration 8: the results DB keeps each run's settling wait in results.quiesce_s (NULL
    when the target's quiesce was off), next to the whole record in result_json."""
    from dataclasses import replace

    from services.common.messages.results import QuiesceReport
    from services.common.store import Store

    from tests.unit.consumer_fixtures import SPEC, result, runs

    s = replace(settings, db_name=f"benchfleet_test_{secrets.token_hex(3)}")
    store = Store(s).open()
    try:
        store.campaigns.record("c1", SPEC, runs("c1"))
        waited, plain = runs("c1")[:2]
        store.results.store(result(waited).model_copy(update={"quiesce": QuiesceReport(waited_s=4.028, settled=True)}))
        store.results.store(result(plain))
        rows = dict(store.db.rows("SELECT run_id, quiesce_s FROM results"))
        assert rows == {waited.run_id: 4.028, plain.run_id: None}
        assert store.results.get(waited.run_id).quiesce.waited_s == 4.028
        assert store.migrate() >= 8
    finally:
        store.close()
        with mysql.connector.connect(use_pure=False, **mariadb_params) as c:
            c.cursor().execute(f"DROP DATABASE IF EXISTS `{s.db_name}`")
