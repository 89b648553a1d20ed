"""The collector's consumer against the in-memory bus, with a fake results store: what is
stored, acked and dead-lettered, and that a results DB going away loses nothing."""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

import pytest

from services.collector.consumer import Collector
from services.common.errors import StoreError, StoreRefused, StoreUnavailable
from services.common.messages import RunEvent, RunResult
from services.common.stub_bus import StubBroker

from tests.unit.consumer_fixtures import result, runs, wait_until


class FakeStore:
    """The results DB as the collector sees it: results by run id (an upsert, like the real
    one), runs marked running; it refuses the run ids in ``refuse`` (a value the DB rejects)
    and is away for the next ``away`` writes."""

    def __init__(self, db: "FakeDb"):
        self.db = db

    def mark_running(self, event: RunEvent) -> None:
        self.db.write()
        self.db.running.append(event.run_id)

    def store_result(self, result: RunResult) -> None:
        self.db.write(result.run_id)
        self.db.results[result.run_id] = result

    def reachable(self) -> bool:
        return not self.db.gone

    def recent_results(self, campaigns: int) -> list:
        return []

    def close(self) -> None:
        self.db.closed += 1


class FakeDb:
    def __init__(self, *, refuse: set[str] = frozenset(), away: int = 0, unavailable: bool = False):
        self.results: dict[str, RunResult] = {}
        self.running: list[str] = []
        self.refuse = set(refuse)
        self.away = away
        self.unavailable = unavailable
        self.opened = self.closed = 0
        #: Whether the last write found the DB away (what reachable() answers).
        self.gone = False

    def open(self) -> FakeStore:
        self.opened += 1
        return FakeStore(self)

    def write(self, run_id: str | None = None) -> None:
        if self.away:
            self.away -= 1
            if self.unavailable:
                # The store knows the DB is away although a plain SELECT 1 still answers
                # (issue 13's "1046 No database selected" after a reconnect).
                raise StoreUnavailable("results DB: 1046 No database selected")
            self.gone = True
            raise StoreError("results DB: 2006 MySQL server has gone away")
        self.gone = False
        if run_id in self.refuse:
            raise StoreRefused("results DB: 1406 Data too long for column 'error' at row 1")


@pytest.fixture
def broker() -> StubBroker:
    return StubBroker()


@contextlib.contextmanager
def collecting(broker: StubBroker, db: FakeDb) -> Iterator[Collector]:
    c = Collector(connect=broker.bus, open_store=db.open, pools=("default",), backoff_s=0.01)
    t = threading.Thread(target=c.run_forever, daemon=True)
    t.start()
    try:
        yield c
    finally:
        c.stop()
        t.join(10)
    assert not t.is_alive(), "the collector did not stop"


def publish(broker: StubBroker, *bodies: bytes) -> None:
    with broker.bus("worker") as bus:
        bus.declare(("default",))
        for body in bodies:
            bus.publish_result(body)


def test_results_and_run_events_are_stored_then_acked(broker):
    """Run events mark runs running; results are stored by run id (a redelivered result
    replaces, never duplicates) and acked only once stored."""
    a, b = runs()[:2]
    event = RunEvent(run_id=a.run_id, campaign_id="c1", state="running", worker="w1", at=1.0)
    db = FakeDb()
    publish(broker, event.encode(), result(a).encode(), result(b).encode(), result(a, queries=2000).encode())
    with collecting(broker, db) as c:
        broker.join(broker.names.results)
    assert db.running == [a.run_id]
    assert sorted(db.results) == sorted([a.run_id, b.run_id])
    assert db.results[a.run_id].qps == 200, "the later delivery of a result replaces the earlier"
    assert c.stored == 3
    assert broker.unacked() == 0 and broker.messages(broker.names.dead) == []


def test_undecodable_results_are_dead_lettered_with_the_reason(broker):
    """Garbage, a wrong version and a run spec on the results queue are parked with the reason
    and the queue; the good result behind them is stored."""
    good = runs()[0]
    db = FakeDb()
    publish(broker, b"[1, 2]", b'{"schema": "benchfleet.result/9"}', good.encode(), result(good).encode())
    with collecting(broker, db):
        broker.join(broker.names.results)
    parked = broker.messages(broker.names.dead)
    assert [d.body for d in parked] == [b"[1, 2]", b'{"schema": "benchfleet.result/9"}', good.encode()]
    assert all(d.headers["x-benchfleet-queue"] == "benchfleet.results" for d in parked)
    reasons = [d.dead_letter_reason for d in parked]
    assert all(r.startswith("undecodable result message: ") for r in reasons), reasons
    assert "not a JSON object" in reasons[0] and "benchfleet.result/9" in reasons[1]
    assert "not expected on this queue" in reasons[2]
    assert list(db.results) == [good.run_id]


def test_a_result_the_db_refuses_is_dead_lettered_and_the_rest_stored(broker):
    """The DB is up but rejects one result: it is parked with the DB's error, the collector
    goes on with the next."""
    bad, good = runs()[:2]
    db = FakeDb(refuse={bad.run_id})
    publish(broker, result(bad).encode(), result(good).encode())
    with collecting(broker, db):
        broker.join(broker.names.results)
    parked = broker.messages(broker.names.dead)
    assert len(parked) == 1 and parked[0].body == result(bad).encode()
    assert parked[0].dead_letter_reason == "cannot store message: results DB: 1406 Data too long for column 'error' at row 1"
    assert list(db.results) == [good.run_id]


@pytest.mark.parametrize("unavailable", [False, True], ids=["gone-away", "StoreUnavailable"])
def test_results_wait_in_the_queue_while_the_db_is_away(broker, unavailable):
    """The results DB goes away: the collector stops consuming and reconnects instead of
    dead-lettering; the result waits in the queue and is stored once the DB is back."""
    run = runs()[0]
    db = FakeDb(away=2, unavailable=unavailable)
    publish(broker, result(run).encode())
    with collecting(broker, db):
        wait_until(lambda: run.run_id in db.results, "the result to be stored")
        broker.join(broker.names.results)
    assert list(db.results) == [run.run_id]
    assert db.opened >= 2, "the collector should have reconnected to the results DB"
    assert broker.messages(broker.names.dead) == []


def test_queue_depths_are_exported(broker):
    """Between deliveries the collector exports how many messages wait in each queue."""
    with broker.bus("scheduler") as bus:
        bus.declare(("default",))
        bus.publish(bus.names.runs_exchange, "default", runs()[0].encode())
        bus.dead_letter(b"x", "test", bus.names.results)
    with collecting(broker, FakeDb()) as c:
        wait_until(lambda: b'queue="benchfleet.runs.default"} 1.0' in c.metrics.scrape(), "the depth export")
    text = c.metrics.scrape().decode()
    assert 'benchfleet_collector_queue_messages{queue="benchfleet.dead"} 1.0' in text
    assert 'benchfleet_collector_queue_messages{queue="benchfleet.results"} 0.0' in text
