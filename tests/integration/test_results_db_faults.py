"""The results DB going away and poison messages, with real RabbitMQ, MariaDB, collector and
worker processes (issue 13): a killed connection, a restarted results DB, an idle pause longer
than wait_timeout and a result bigger than max_allowed_packet lose no result and dead-letter
none; poison bodies on both queues are dead-lettered with the reason and store nothing.

Faults that restart or kill a results DB use a private, throwaway mariadbd (its own datadir and
port); the targets the workers measure stay on the shared local server, which is never touched.
"""

from __future__ import annotations

import json
import random
import subprocess
import time
import urllib.request
from typing import Iterator

import mysql.connector
import pytest

from services.common.bus.rabbitmq import RabbitBus
from services.common.config import Settings
from services.common.errors import StoreRefused
from services.common.messages.results import Series
from services.common.store import Store

from tests.integration.faults import ThrowawayMariadb, free_port
from tests.integration.fleet import TEST_TARGET_PASSWORD, Fleet, assert_exactly_once, claim, target_yaml, wait_for
from tests.integration.test_faults import counts, finished, spec_text, submit, submit_waiting
from tests.unit.consumer_fixtures import SPEC, result, runs
from tests.unit.poison import result_bodies, run_bodies

pytestmark = [pytest.mark.integration]

#: The measured targets' database on the shared server (prepared once, reused by each run).
TARGET_DB = "bf_it_results_db"
#: Where a private fleet keeps its collector's /metrics port (workers pick free ports).
COLLECTOR_PORT = "BF_TEST_COLLECTOR_METRICS_PORT"


def private_fleet(base: Settings, db: ThrowawayMariadb, workdir) -> Fleet:
    """A test fleet whose results DB is the throwaway server ``db``, measuring targets on the
    shared server with the base settings' credentials, its collector's /metrics on a known port."""
    fleet = Fleet.create(base, workdir)
    fleet.settings = db.settings(fleet.settings)
    fleet.extra_env.update({
        TEST_TARGET_PASSWORD: base.db_password,  # the targets' password, not the private DB's
        "BENCHFLEET_DB_PASSWORD_FILE": "",
        COLLECTOR_PORT: str(free_port()),
        # The collector's look for cancelled campaigns (every second by default) would keep its
        # results-DB connection from ever idling past the private server's wait_timeout.
        "BENCHFLEET_CANCEL_CHECK_S": "60",
    })
    return fleet


def start_collector(fleet: Fleet) -> subprocess.Popen:
    return fleet.start("collector", "serve", "--metrics-port", fleet.extra_env[COLLECTOR_PORT])


def db_up_gauge(fleet: Fleet) -> str | None:
    """The collector's benchfleet_collector_results_db_up, None while /metrics does not answer."""
    url = f"http://127.0.0.1:{fleet.extra_env[COLLECTOR_PORT]}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    return next((str(float(line.split()[1])) for line in text.splitlines()
                 if line.startswith("benchfleet_collector_results_db_up ")), None)


def kill_connections(db: ThrowawayMariadb) -> list[int]:
    """KILL every client connection of the private results DB (the collector's, the waiting
    scheduler's) but this one; their ids."""
    admin = mysql.connector.connect(host="127.0.0.1", port=db.port, user="root", autocommit=True)
    try:
        cur = admin.cursor()
        cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID()"
                    " AND USER <> 'system user' AND COMMAND NOT IN ('Daemon', 'Binlog Dump')")
        ids = [int(r[0]) for r in cur.fetchall()]
        for i in ids:
            cur.execute(f"KILL {i}")
        return ids
    finally:
        admin.close()


def dead_letters(fleet: Fleet) -> list[tuple[str, str]]:
    """(queue, reason) of every dead letter, taken off the dead-letter queue."""
    out = []
    with RabbitBus(fleet.settings) as bus:
        while (d := bus.get(bus.names.dead)) is not None:
            out.append((str(d.headers.get("x-benchfleet-queue")), d.dead_letter_reason or ""))
            bus.ack(d.delivery_tag)
    return out


def logged(fleet: Fleet, service: str, event: str) -> int:
    """How many log lines of ``service`` carry ``event``."""
    return sum(line.count(f'"{event}"') for p in fleet.workdir.glob(f"{service}-*.log")
               for line in p.read_text(errors="replace").splitlines())


def log_entries(fleet: Fleet, service: str, event: str) -> list[dict]:
    """The log entries of ``service`` with ``event``, decoded."""
    return [json.loads(line) for p in fleet.workdir.glob(f"{service}-*.log")
            for line in p.read_text(errors="replace").splitlines() if f'"{event}"' in line and line.startswith("{")]


@pytest.mark.slow
def test_results_db_connections_killed_and_the_db_restarted_mid_campaign(rabbitmq, mariadb_params, settings, tmp_path):
    """Mid-campaign, every connection to the results DB is KILLed, later the results DB is
    SIGKILLed and started again: every result is stored once, nothing is dead-lettered, the
    campaign finishes and `scheduler submit --wait` exits 0; the collector exports the DB as
    down during the outage and logs the outage and the recovery once each."""
    db = ThrowawayMariadb().start()
    fleet = private_fleet(settings, db, tmp_path)
    waiter: subprocess.Popen | None = None
    try:
        start_collector(fleet)
        fleet.start_worker("w1")
        text = spec_text(fleet, name="dbfaults", targets=target_yaml(settings, "A", TARGET_DB), threads="[1, 2]",
                         duration="2s", repeat=3)
        waiter = submit_waiting(fleet, text)
        wait_for(lambda: _campaign(fleet, "dbfaults") is not None, 60, "the campaign recorded")
        cid = _campaign(fleet, "dbfaults")
        wait_for(lambda: counts(fleet, cid)["done"] >= 1, 120, "a first stored result")
        killed = kill_connections(db)
        assert len(killed) >= 2, f"the collector's and the waiting scheduler's connections: {killed}"
        wait_for(lambda: counts(fleet, cid)["done"] >= 3, 120, "results stored after the KILL")
        assert not finished(fleet, cid, 6), "the campaign ended before the restart: make it longer"
        db.kill()
        wait_for(lambda: db_up_gauge(fleet) == "0.0", 60, "the collector to export the results DB as down")
        # Down until a result is published meanwhile: the collector must hold it for the DB.
        published = logged(fleet, "worker", "run_finished")
        wait_for(lambda: logged(fleet, "worker", "run_finished") > published, 120, "a result during the outage")
        db.start()
        out, err = waiter.communicate(timeout=300)
        assert waiter.returncode == 0, err + fleet.logs()
        assert "results DB away" in err, err
        assert_exactly_once(fleet, cid, 6)
        wait_for(lambda: db_up_gauge(fleet) == "1.0", 30, "the collector to export the results DB as up")
        assert dead_letters(fleet) == []
        assert logged(fleet, "collector", "results_db_unavailable") == 1, fleet.logs()
        [back] = log_entries(fleet, "collector", "results_db_available")
        assert back["held"] >= 1, back
        assert logged(fleet, "collector", "result_not_storable") == 0, fleet.logs()
        assert all(p.poll() is None for p in fleet.procs), "a consumer exited\n" + fleet.logs()
    finally:
        if waiter is not None and waiter.poll() is None:
            waiter.kill()
        try:
            fleet.teardown()
        finally:
            db.cleanup()


def _campaign(fleet: Fleet, name: str) -> str | None:
    try:
        with Store(fleet.settings) as store:
            c = store.campaigns.get(name)
    except Exception:  # the DB may not have the schema yet
        return None
    return None if c is None else c.campaign_id


@pytest.fixture(scope="module")
def small_db() -> Iterator[ThrowawayMariadb]:
    """A private results DB that drops idle connections after 2 s and takes packets of 64 KB."""
    db = ThrowawayMariadb("--wait-timeout=2", "--max-allowed-packet=64K").start()
    yield db
    db.cleanup()


@pytest.fixture
def small_fleet(rabbitmq, settings, small_db, tmp_path) -> Iterator[Fleet]:
    fleet = private_fleet(settings, small_db, tmp_path)
    yield fleet
    fleet.teardown()


def publish_results(fleet: Fleet, *bodies: bytes) -> None:
    """Publish results as a worker does."""
    with RabbitBus(fleet.settings) as bus:
        bus.declare((fleet.pool,))
        for body in bodies:
            claim(bus, body)
            bus.publish_result(body)


def stored(fleet: Fleet, run_id: str) -> bool:
    with Store(fleet.settings) as store:
        return store.results.count(run_id) == 1


def aborted_clients(db: ThrowawayMariadb) -> int:
    conn = mysql.connector.connect(host="127.0.0.1", port=db.port, user="root")
    try:
        cur = conn.cursor()
        cur.execute("SHOW GLOBAL STATUS LIKE 'Aborted_clients'")
        return int(cur.fetchall()[0][1])
    finally:
        conn.close()


def test_an_idle_pause_longer_than_wait_timeout_loses_nothing(small_fleet, small_db):
    """The results DB closes the collector's idle connection (wait_timeout 2 s): the next
    result is stored in the right database, nothing is dead-lettered, and no outage is logged
    (a dropped idle connection is made again in place)."""
    fleet = small_fleet
    planned = runs("c-idle")
    with Store(fleet.settings) as store:
        store.campaigns.record("c-idle", SPEC, planned)
    start_collector(fleet)
    publish_results(fleet, result(planned[0]).encode())
    wait_for(lambda: stored(fleet, planned[0].run_id), 60, "the first result")
    before = aborted_clients(small_db)
    time.sleep(6)  # idle: longer than wait_timeout, and than the collector's check interval
    assert aborted_clients(small_db) > before, "the server should have closed an idle connection"
    publish_results(fleet, result(planned[1]).encode())
    wait_for(lambda: stored(fleet, planned[1].run_id), 60, "the result after the idle pause")
    assert dead_letters(fleet) == []
    assert logged(fleet, "collector", "results_db_unavailable") == 0, fleet.logs()
    assert db_up_gauge(fleet) == "1.0"


def test_results_bigger_than_max_allowed_packet(small_fleet):
    """A result whose JSON is over twice the server's max_allowed_packet is stored compressed
    and reads back equal; one that does not fit even compressed is refused by the store with a
    reason naming max_allowed_packet, dead-lettered by the collector with it, and the result
    behind it is stored."""
    fleet = small_fleet
    planned = runs("c-big")
    big = result(planned[0]).model_copy(update={"series": Series(
        transactions=[4000 + (i * 7919) % 97 for i in range(30_000)], queries=[40_000 + i % 13 for i in range(30_000)])})
    rnd = random.Random(13)
    too_big = result(planned[1]).model_copy(update={"versions": {f"v{i}": f"{rnd.getrandbits(64):016x}"
                                                                 for i in range(8_000)}})
    assert len(big.encode()) > 2 * 64 * 1024
    with Store(fleet.settings) as store:
        store.campaigns.record("c-big", SPEC, planned)
        store.results.store(big)
        assert store.results.get(big.run_id) == big
        with pytest.raises(StoreRefused, match="max_allowed_packet"):
            store.results.store(too_big)
        assert store.results.get(too_big.run_id) is None
    start_collector(fleet)
    publish_results(fleet, too_big.encode(), result(planned[2]).encode())
    wait_for(lambda: stored(fleet, planned[2].run_id), 60, "the result behind the too-big one")
    [(queue, reason)] = dead_letters(fleet)
    assert queue == fleet.settings.namespace + ".results"
    assert reason.startswith("cannot store message: result of run ") and "max_allowed_packet" in reason, reason
    assert not stored(fleet, too_big.run_id)


@pytest.mark.slow
def test_poison_messages_on_both_queues(rabbitmq, mariadb_params, settings, tmp_path):
    """Deep nesting, numbers beyond 64 bits or not finite, negative counts, unknown run ids and
    wrong cells, on the runs queue and on the results queue: each is dead-lettered with the
    reason, nothing of them is stored or measured, and both consumers stay up and take the
    next good campaign."""
    fleet = Fleet.create(settings, tmp_path)
    try:
        planned = runs("c-poison")
        with Store(fleet.settings) as store:
            store.campaigns.record("c-poison", SPEC, planned)
        poison_runs = run_bodies(planned[0])
        poison_results = result_bodies(planned[0], planned[1])
        with RabbitBus(fleet.settings) as bus:
            bus.declare((fleet.pool,))
            for _, body, _ in poison_runs:
                bus.publish(bus.names.runs_exchange, fleet.pool, body)
            for _, body, _ in poison_results:
                bus.publish_result(body)
        fleet.start_collector()
        fleet.start_worker("w1")
        cid = submit(fleet, spec_text(fleet, name="afterpoison", targets=target_yaml(settings, "A", TARGET_DB),
                                      threads="[1]", duration="1s", repeat=1))
        wait_for(lambda: finished(fleet, cid, 1), 120, "a good run after the poison")
        assert counts(fleet, cid)["done"] == 1
        letters = dead_letters(fleet)
        runs_q, results_q = fleet.settings.namespace + ".runs." + fleet.pool, fleet.settings.namespace + ".results"
        by_queue = {q: [r for qq, r in letters if qq == q] for q in (runs_q, results_q)}
        assert len(letters) == len(poison_runs) + len(poison_results), letters
        for name, _, reason in poison_runs:
            assert any(reason in r for r in by_queue[runs_q]), (name, reason, by_queue[runs_q])
        for name, _, reason in poison_results:
            assert any(reason in r for r in by_queue[results_q]), (name, reason, by_queue[results_q])
        with Store(fleet.settings) as store:
            assert store.results.rows("c-poison") == []
            states = dict(store.db.rows("SELECT run_id, state FROM runs WHERE campaign_id=%s", ("c-poison",)))
        # A poison message that still names a planned run and its cell fails that run with its
        # reason (every run ends in a final state); the runs no message named still wait.
        named = {planned[0].run_id, planned[1].run_id}
        assert all(states[r.run_id] == "pending" for r in planned if r.run_id not in named), states
        assert all(states[r] in ("pending", "failed") for r in named), states
        assert logged(fleet, "worker", "run_started") == 1, "only the good run is measured"
        assert all(p.poll() is None for p in fleet.procs), "a consumer exited\n" + fleet.logs()
    finally:
        fleet.teardown()


def test_a_results_db_that_accepts_and_never_answers_is_unavailable_not_a_hang():
    """A peer that takes the TCP connection and never says a word (a hung server, a half-open
    firewall): Store.open() gives up after the connect timeout with StoreUnavailable naming the
    DB, instead of blocking the collector or scheduler for ever."""
    import socket
    import threading

    from services.common.errors import StoreUnavailable

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    taken: list[socket.socket] = []
    threading.Thread(target=lambda: [taken.append(listener.accept()[0]) for _ in range(8)], daemon=True).start()
    outcome: list[BaseException | None] = []

    def open_store() -> None:
        try:
            Store(Settings(db_host="127.0.0.1", db_port=port, db_name="bf_silent", db_connect_timeout_s=2)).open()
            outcome.append(None)
        except BaseException as e:  # noqa: BLE001 (reported below)
            outcome.append(e)

    t = threading.Thread(target=open_store, daemon=True)
    t.start()
    t.join(120)  # not a timing assertion: only that open() comes back at all
    try:
        assert not t.is_alive(), "Store.open() still blocked on a results DB that never answers"
        assert isinstance(outcome[0], StoreUnavailable), outcome
        assert f"127.0.0.1:{port}" in str(outcome[0])
        assert taken, "the listener should have taken the connection"
    finally:
        listener.close()
        for conn in taken:
            conn.close()


def test_a_statement_the_results_db_does_not_answer_within_the_read_timeout_is_unavailable(settings, mariadb_params):
    """A statement the server sits on longer than db_read_timeout_s (a stuck server, a lock) ends
    as StoreUnavailable (the DB is away: hold and retry), not a connection blocked for ever."""
    from dataclasses import replace as dc_replace

    from services.common.errors import StoreUnavailable

    name = f"bf_readtimeout_{random.randrange(16**6):06x}"
    store = Store(dc_replace(settings, db_name=name, db_read_timeout_s=1), attempts=1).open(migrate=True)
    try:
        with pytest.raises(StoreUnavailable, match="2013"):
            store.db.execute("SELECT SLEEP(30)")
        assert store.reachable(), "a new connection answers again"
    finally:
        store.close()
        conn = mysql.connector.connect(**mariadb_params)
        conn.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
        conn.close()
