"""A spec can make a worker neither root nor a holder of more than a run needs on a server, nor
send a password where its operator did not bind it or in clear text: real accounts on the local
MariaDB, a real worker, and a rogue server that asks for what it should not get."""

from __future__ import annotations

import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import mysql.connector
import pytest

from services.common.errors import DbError
from services.common.messages.runs import RunSpec
from services.worker import runner
from services.worker.driver.contract import ConnectParams, LoadError, LoadRequest
from services.worker.driver.native.core import connect_once
from services.worker.driver.sysbench import driver as sysbench_driver
from services.common.spec.workloads import DataShape, WorkloadSpec

from tests.integration.fleet import ROOT
from tests.integration.rogue_server import RogueServer

pytestmark = pytest.mark.integration

PW_VAR = "BF_ACCOUNT_TEST_PW"
#: What docs/security.md lists as a run's needs on its database.
MINIMAL = "SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, LOCK TABLES"


def root_sql(sql: str) -> None:
    """As the local server's root, over its socket (the tests run as the OS root)."""
    r = subprocess.run(["mariadb", "--protocol=socket", "-uroot", "-e", sql], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        pytest.fail(f"cannot run SQL as the local MariaDB's root over its socket: {r.stderr.strip()}", pytrace=False)


@pytest.fixture
def accounts(settings):
    """Two accounts on one scratch database: `big` with ALL PRIVILEGES on it, `small` with what a
    run needs; both (and the database) dropped afterwards. Names are unique per test."""
    tag = secrets.token_hex(3)
    db, password = f"bf_acct_{tag}", "Acct-" + secrets.token_hex(8)
    big, small = f"bf_big_{tag}", f"bf_small_{tag}"
    root_sql(f"CREATE USER '{big}'@'127.0.0.1' IDENTIFIED BY '{password}';"
             f" GRANT ALL PRIVILEGES ON `{db}`.* TO '{big}'@'127.0.0.1';"
             f" CREATE USER '{small}'@'127.0.0.1' IDENTIFIED BY '{password}';"
             f" GRANT {MINIMAL} ON `{db}`.* TO '{small}'@'127.0.0.1';")
    yield {"db": db, "password": password, "big": big, "small": small}
    root_sql(f"DROP USER IF EXISTS '{big}'@'127.0.0.1'; DROP USER IF EXISTS '{small}'@'127.0.0.1';"
             f" DROP DATABASE IF EXISTS `{db}`;")


@pytest.fixture
def strict_worker(monkeypatch, settings):
    """This process as a worker whose operator allows no over-privileged account and binds the
    test password to the local server."""
    monkeypatch.delenv("BENCHFLEET_TARGET_PRIVILEGED_USERS", raising=False)
    monkeypatch.setenv("BENCHFLEET_TARGET_PASSWORD_ENV", f"{PW_VAR}@127.0.0.1:{settings.db_port}")
    monkeypatch.delenv("BENCHFLEET_TARGET_PASSWORD_DIRS", raising=False)


def run_as(user: str, database: str, **target) -> RunSpec:
    return RunSpec.model_validate({
        "schema": "benchfleet.run/1", "run_id": "c1.t.oltp_point_select.t1.r1", "campaign_id": "c1",
        "campaign_name": "c", "seq": 1, "total_runs": 1,
        "cell": {"target": "t", "workload": "oltp_point_select", "threads": 1}, "repetition": 1,
        "target": {"kind": "dsn", "name": "t", "user": user, "database": database, **target},
        "workload": {"name": "oltp_point_select"}, "data": {"tables": 1, "table_size": 200},
        "duration": 1, "warmup": 0, "seed": 1, "published_at": 0})


def database_exists(mariadb_params: dict, name: str) -> bool:
    conn = mysql.connector.connect(**mariadb_params)
    try:
        cur = conn.cursor()
        cur.execute("SHOW DATABASES LIKE %s", (name,))
        return bool(cur.fetchall())
    finally:
        conn.close()


def test_an_over_privileged_account_is_refused_and_a_minimal_one_runs(accounts, strict_worker, settings,
                                                                    mariadb_params, monkeypatch):
    """ALL PRIVILEGES on the run's own database is refused before prepare (the database is never
    created), naming targets.t.user and the grants to give instead; the same run as an account
    with just those grants prepares and measures."""
    monkeypatch.setenv(PW_VAR, accounts["password"])
    where = {"host": "127.0.0.1", "port": settings.db_port, "password_env": PW_VAR}
    refused = runner.execute(run_as(accounts["big"], accounts["db"], **where), runner.WorkerIdentity("w1"))
    assert refused.status == "failed", refused
    assert refused.error.startswith(f"targets.t.user: the account {accounts['big']}@127.0.0.1 holds more than a run "
                                    f"needs (ALL PRIVILEGES ON `{accounts['db']}`)"), refused.error
    assert f"GRANT {MINIMAL} ON `{accounts['db']}`.*" in refused.error
    assert not database_exists(mariadb_params, accounts["db"]), "prepare ran for a refused account"
    ok = runner.execute(run_as(accounts["small"], accounts["db"], **where), runner.WorkerIdentity("w1"))
    assert ok.status == "ok", ok.error
    assert ok.totals.transactions > 0


def test_root_over_the_servers_socket_is_refused(strict_worker, monkeypatch, mariadb_params):
    """The attack of an unguarded worker: `user: root` through the local server's socket, where
    unix_socket authentication takes the worker's OS root for MariaDB's root. Without the socket's
    directory allowed the run fails naming targets.t.socket; with it, the worker logs in and then
    refuses root, naming targets.t.user; nothing is prepared either way."""
    sock = "/run/mysqld/mysqld.sock"
    if not Path(sock).exists():
        pytest.fail(f"the local MariaDB has no socket at {sock}", pytrace=False)
    database = f"bf_acct_root_{secrets.token_hex(3)}"
    first = runner.execute(run_as("root", database, socket=sock), runner.WorkerIdentity("w1"))
    assert first.status == "failed" and first.error.startswith("targets.t.socket: "), first.error
    assert "BENCHFLEET_TARGET_SOCKET_DIRS: none configured" in first.error
    monkeypatch.setenv("BENCHFLEET_TARGET_SOCKET_DIRS", "/run/mysqld")
    second = runner.execute(run_as("root", database, socket=sock), runner.WorkerIdentity("w1"))
    assert second.status == "failed", second
    assert second.error.startswith("targets.t.user: the account root@localhost holds more than a run needs (it is root"), \
        second.error
    assert not database_exists(mariadb_params, database)


def test_a_password_aimed_at_another_host_never_leaves_the_worker(fleet, tmp_path):
    """A fleet whose worker binds a password to the local server: a spec pointing it at another
    address (127.0.0.2, where a listener waits) fails its run naming targets.T.host, and the
    listener sees no connection at all."""
    listener = RogueServer(host="127.0.0.2")
    try:
        password = "Bound-" + secrets.token_hex(8)
        fleet.extra_env.update({PW_VAR: password,
                                "BENCHFLEET_TARGET_PASSWORD_ENV": f"{PW_VAR}@127.0.0.1:{fleet.settings.db_port}"})
        fleet.start_collector()
        fleet.start_worker("w1")
        spec = tmp_path / "elsewhere.yaml"
        spec.write_text(
            f"name: elsewhere\npool: {fleet.pool}\n"
            f"targets:\n  - {{name: T, host: 127.0.0.2, port: {listener.port}, user: bench, password_env: {PW_VAR},"
            " database: bf_elsewhere}\n"
            "workloads: [oltp_point_select]\ndata: {tables: 1, table_size: 100}\n"
            "threads: [1]\nduration: 2s\nwarmup: 0\nrepeat: 1\n")
        r = subprocess.run([sys.executable, "-m", "services.scheduler.cli", "submit", str(spec), "--wait", "--poll", "0.3"],
                           env=fleet.env(), cwd=ROOT, capture_output=True, text=True, timeout=180)
        assert r.returncode == 1, r.stderr + fleet.logs()
        assert f"targets.T.host: 127.0.0.2:{listener.port} is not where {PW_VAR} may be sent" in r.stderr, \
            r.stderr + fleet.logs()
        assert f"binds it to 127.0.0.1:{fleet.settings.db_port}" in r.stderr, r.stderr
        assert listener.connections == 0
        assert password not in r.stderr + fleet.logs()
    finally:
        listener.close()


@pytest.fixture
def clear_text_server():
    server = RogueServer(clear_text=True)
    yield server
    server.close()


def test_no_client_sends_a_password_in_clear_text_to_a_server_asking_for_it(clear_text_server):
    """A server that switches authentication to mysql_clear_password gets nothing from the native
    driver's compiled core, the worker's own mysql.connector connections or sysbench's libmariadb;
    the native driver sends it once the operator allows clear text (so the test can fail)."""
    from services.worker.target import dsn

    rogue = clear_text_server
    params = ConnectParams(host="127.0.0.1", port=rogue.port, user="bench", password="Clear-Canary-1", database="sbtest")
    with pytest.raises(DbError):
        connect_once(params)
    with pytest.raises(mysql.connector.Error):
        dsn.connect(params)
    if shutil.which("sysbench") is None:
        pytest.fail("sysbench is not installed (deploy/ensure-services sysbench)", pytrace=False)
    with pytest.raises(LoadError):
        sysbench_driver.run_sysbench(LoadRequest(params, WorkloadSpec(name="oltp_point_select"), DataShape(tables=1),
                                                 1, 0.0, 1.0, 1))
    assert rogue.connections >= 3
    # sysbench's libmariadb, failing to load the plugin, answers with an empty packet.
    assert all(b"Clear-Canary-1" not in answer for answer in rogue.passwords), rogue.passwords
    before = len(rogue.passwords)
    allowed = ConnectParams(host="127.0.0.1", port=rogue.port, user="bench", password="Clear-Canary-1",
                            database="sbtest", allow_cleartext=True)
    try:
        connect_once(allowed)
    except DbError:
        pass  # the rogue answers the connection's first statements oddly; the password went before
    assert rogue.passwords[before:] == [b"Clear-Canary-1\0"]


def test_worker_prepare_and_cleanup_refuse_an_over_privileged_account(accounts, strict_worker, settings,
                                                                      mariadb_params, tmp_path):
    """The operator's `worker prepare` and `worker cleanup` check a spec's account as a run does:
    ALL PRIVILEGES on the database exits 2 naming targets.t.user and creates nothing; the minimal
    account prepares, and cleans up, the same spec."""
    import os

    def spec(user: str) -> Path:
        f = tmp_path / f"{user}.yaml"
        f.write_text(f"name: prep\ntargets:\n  - {{name: t, host: 127.0.0.1, port: {settings.db_port}, user: {user},"
                     f" database: {accounts['db']}, password_env: {PW_VAR}}}\nworkloads: [oltp_point_select]\n"
                     "data: {tables: 1, table_size: 100}\nthreads: [1]\nduration: 1s\n")
        return f

    env = {**os.environ, PW_VAR: accounts["password"], "PYTHONPATH": str(ROOT)}

    def worker(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "services.worker.cli", *args], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=120)

    for action in ("prepare", "cleanup"):
        refused = worker(action, str(spec(accounts["big"])))
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert f"targets.t.user: the account {accounts['big']}@127.0.0.1 holds more than a run needs" in refused.stderr
        assert not database_exists(mariadb_params, accounts["db"]), f"{action} acted for a refused account"
    made = worker("prepare", str(spec(accounts["small"])))
    assert made.returncode == 0, made.stderr
    assert database_exists(mariadb_params, accounts["db"])
    dropped = worker("cleanup", str(spec(accounts["small"])))
    assert dropped.returncode == 0, dropped.stderr
