"""The collector's consumer against the in-memory bus, with a fake results store: what is
stored, acked and dead-lettered, and that a results DB going away loses nothing."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from typing import Iterator

import pytest
from structlog.testing import capture_logs

from services.collector.consumer import Collector
from services.common import logs
from services.common.errors import StoreError, StoreRefused, StoreUnavailable
from services.common.messages.runs import Cell, RunSpec
from services.common.messages.events import RunEvent
from services.common.messages.results import RunResult
from services.common.messages.announcements import WorkerAnnouncement
from services.common.bus.stub import StubBroker
from services.common.store.takers import Binding, Claim, DeadLetterFrom, Taker, judge_claim, judge_result, may_fail

from tests.unit.consumer_fixtures import result, runs, wait_until
from tests.unit.poison import result_bodies


class FakeStore:
    """The results DB as the collector sees it: results by run id (an upsert, like the real
    one), runs marked running; like the real store it refuses a result whose run was not planned
    or differs from it (when ``planned`` is given), and results of the run ids in ``refuse`` (a
    value the DB rejects); it is away for the next ``away`` writes and while ``down`` is set.
    One object plays every part of the store (runs, results, workers)."""

    def __init__(self, db: "FakeDb"):
        self.db = db

    @property
    def runs(self) -> "FakeStore":
        return self

    @property
    def results(self) -> "FakeStore":
        return self

    @property
    def workers(self) -> "FakeStore":
        return self

    def mark_running(self, event: RunEvent) -> None:
        self.db.write()
        self.db.running.append(event.run_id)

    def binding(self, run_id: str, part: int | None = None) -> Binding | None:
        # Every run here is whole (a part's message is judged on the run's binding, and refused).
        if self.db.planned is not None and run_id not in self.db.planned:
            return None
        taker, attempt = self.db.takers.get(run_id, (self.db.default_taker, 1))
        stored = self.db.results.get(run_id)
        state = ("done" if stored is not None and stored.status == "ok" else "failed" if run_id in self.db.failed
                 else "running" if run_id in self.db.running else "pending")
        return Binding(taker, attempt, False, state, self.db.publisher)

    def bind(self, run_id: str, taker: Taker, attempt: int, was: Taker | None) -> bool:
        if self.binding(run_id).taker != was:
            return False
        self.db.takers[run_id] = (taker, attempt)
        return True

    def claim(self, event: RunEvent, sender: Taker) -> Claim:
        binding = self.binding(event.run_id)
        if binding is None:
            return Claim.REFUSE
        decision = judge_claim(binding, sender, event.attempt, event.part)
        if decision in (Claim.BIND, Claim.RETAKE):
            self.bind(event.run_id, sender, event.attempt, binding.taker)
        if decision is not Claim.REFUSE:
            self.mark_running(event)
        return decision

    def store(self, result: RunResult, *, sender: Taker | None = None) -> bool:
        self.db.write(result.run_id)
        if self.db.planned is not None:
            run = self.db.planned.get(result.run_id)
            if run is None:
                raise StoreRefused(f"run_id: no run {result.run_id!r} was planned in the results DB")
            if (problem := result.mismatch(run.campaign_id, run.cell, run.repetition)) is not None:
                raise StoreRefused(problem)
        if sender is not None:
            decision = judge_result(self.binding(result.run_id), sender, ok=result.status == "ok", part=False)
            if decision is Claim.BIND:
                raise StoreRefused(f"run {result.run_id}: no worker claimed it")
            if decision is Claim.REFUSE:
                logs.get(__name__).warning("result_refused", run_id=result.run_id, sender=str(sender))  # as the store
                return False
        if result.run_id in self.db.crash:
            raise RuntimeError("a bug met on this result")
        kept = self.db.results.get(result.run_id)
        if kept is not None and kept.status == "ok" and kept != result:
            return False  # like the real store: an ok result is replaced by nothing else
        self.db.results[result.run_id] = result
        self.db.order.append(result.run_id)
        return True

    def get(self, run_id: str) -> RunResult | None:
        return self.db.results.get(run_id)

    def reachable(self) -> bool:
        return not self.db.gone and not self.db.down.is_set()

    def fail(self, run_id: str, campaign_id: str, reason: str, cell: Cell | None = None, *,
             by: DeadLetterFrom | None = None) -> bool:
        if self.db.fail_away:
            self.db.fail_away -= 1
            raise StoreUnavailable("results DB: 2013 Lost connection to MySQL server during query")
        run = self.db.runs.get(run_id)
        if run is None or run.campaign_id != campaign_id or (cell is not None and run.cell != cell):
            return False
        if run_id in self.db.results or run_id in self.db.failed:
            return False
        binding = self.binding(run_id)
        if by is not None and (binding is None or not may_fail(binding, by)):
            return False
        self.db.failed[run_id] = reason
        return True

    def overdue(self, now: float, grace_s: float) -> list:
        return [o for o in self.db.overdue if o.run_id not in self.db.failed and o.run_id not in self.db.results]

    def recent(self, campaigns: int) -> list:
        return []

    def ended_at(self, campaign_id: str) -> float | None:
        return self.db.ended.get(campaign_id)

    def record_announcement(self, announcement: WorkerAnnouncement) -> None:
        self.db.write()
        self.db.announcements[announcement.worker] = announcement

    def announcements(self) -> list[WorkerAnnouncement]:
        return list(self.db.announcements.values())

    def close(self) -> None:
        self.db.closed += 1


class FakeDb:
    def __init__(self, *, refuse: set[str] = frozenset(), away: int = 0, unavailable: bool = False,
                 planned: list[RunSpec] | None = None, crash: set[str] = frozenset()):
        self.results: dict[str, RunResult] = {}
        #: Run ids in the order their results were stored (again on a redelivery).
        self.order: list[str] = []
        self.running: list[str] = []
        #: Each run's taker and the attempt it claimed (store/takers.py).
        self.takers: dict[str, tuple[Taker, int]] = {}
        #: The broker user that published the runs (the scheduler's).
        self.publisher = "guest"
        #: The taker of a run with none in ``takers``: worker w1 of the stub's default user, as
        #: if its run-started event had come (None: such runs are not claimed).
        self.default_taker: Taker | None = Taker("guest", "w1")
        self.announcements: dict[str, WorkerAnnouncement] = {}
        #: The planned runs (runs.fail fails only these), the failed ones with their reasons,
        #: and what runs.overdue answers.
        self.runs: dict[str, RunSpec] = {}
        self.failed: dict[str, str] = {}
        self.overdue: list = []
        #: What runs.ended_at answers: when each ended campaign's last run ended.
        self.ended: dict[str, float] = {}
        self.refuse = set(refuse)
        self.crash = set(crash)
        self.planned = None if planned is None else {r.run_id: r for r in planned}
        self.away = away
        self.unavailable = unavailable
        #: runs.fail finds the DB away this many times.
        self.fail_away = 0
        self.opened = self.closed = 0
        #: Whether the last write found the DB away (what reachable() answers).
        self.gone = False
        #: The DB is down (connections refused) while set.
        self.down = threading.Event()

    def open(self) -> FakeStore:
        if self.down.is_set():
            raise StoreUnavailable("cannot connect to the results DB at db:3306: 2003 Can't connect")
        self.opened += 1
        return FakeStore(self)

    def write(self, run_id: str | None = None) -> None:
        if self.down.is_set():
            raise StoreUnavailable("results DB: 2013 Lost connection to MySQL server during query")
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
def collecting(broker: StubBroker, db: FakeDb, **kw) -> Iterator[Collector]:
    c = Collector(connect=broker.bus, open_store=db.open, pools=("default",), backoff_s=0.01, **kw)
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
    """Run events mark runs running; results are stored by run id (a redelivered result never
    duplicates, and an ok one stored is replaced by no other) and acked only once stored."""
    a, b = runs()[:2]
    event = RunEvent(run_id=a.run_id, campaign_id="c1", state="running", worker="w1", at=1.0)
    db = FakeDb()
    publish(broker, event.encode(), result(a).encode(), result(b).encode(), result(a).encode(),
            result(a, queries=2000).encode())
    with collecting(broker, db) as c:
        broker.join(broker.names.results)
    assert db.running == [a.run_id]
    assert sorted(db.results) == sorted([a.run_id, b.run_id])
    assert db.results[a.run_id].qps == 100, "an ok result stored is never replaced by another measurement"
    assert c.stored == 3, "the same result delivered again counts, the other one does not"
    assert broker.unacked() == 0 and broker.messages(broker.names.dead) == []


def test_each_stored_result_refreshes_its_cell_statistics_before_the_ack(broker):
    """After storing a result, the collector updates the statistics of its workload's cells (cell_stats)."""
    a, b = runs()[:2]
    seen: list[tuple[str, int]] = []
    db = FakeDb()

    def after(store, r):
        seen.append((r.run_id, broker.unacked()))

    publish(broker, result(a).encode(), result(b).encode())
    with collecting(broker, db, after_store=after):
        broker.join(broker.names.results)
    assert [run_id for run_id, _ in seen] == [a.run_id, b.run_id]
    assert all(unacked >= 1 for _, unacked in seen), "statistics are refreshed before the result is acked"


@pytest.mark.parametrize("error", [RuntimeError("a bug in the statistics"), StoreError("campaigns: spec of c1 does not decode"),
                                   StoreRefused("results DB: 1406 Data too long")], ids=["bug", "StoreError", "refused"])
def test_a_stored_result_whose_statistics_fail_is_acked_not_dead_lettered(broker, error):
    """An error refreshing the cell statistics after a result was stored is logged: the result is
    acked and counted as stored, never dead-lettered (its run is not failed)."""
    a = runs()[0]
    db = FakeDb()

    def after(store, r):
        raise error

    publish(broker, result(a).encode())
    with capture_logs() as logged, collecting(broker, db, after_store=after) as c:
        broker.join(broker.names.results)
    assert list(db.results) == [a.run_id] and c.stored == 1
    assert broker.messages(broker.names.dead) == [] and broker.unacked() == 0
    assert [e["event"] for e in logged if e["event"] == "after_store_failed"] == ["after_store_failed"]


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


def test_the_end_of_a_campaign_is_exported_once_the_results_db_says_so(broker, monkeypatch):
    """While its runs are open a campaign exports no end; once the results DB says its last run
    ended, the collector exports when (the collapse alert resolves after it)."""
    from services.collector import consumer

    monkeypatch.setattr(consumer, "CAMPAIGN_CHECK_EVERY_S", 0.01)
    db = FakeDb()
    publish(broker, result(runs()[0]).encode())
    with collecting(broker, db) as c:
        broker.join(broker.names.results)
        time.sleep(0.1)
        assert b"benchfleet_campaign_ended_timestamp_seconds{" not in c.metrics.scrape()
        db.ended["c1"] = 1700000000.0
        wait_until(lambda: b'benchfleet_campaign_ended_timestamp_seconds{campaign="c1"} 1.7e+09' in c.metrics.scrape(),
                   "the campaign's end")


def db_up(c: Collector) -> str:
    """The value of the results-DB gauge the collector exports."""
    line = next(x for x in c.metrics.scrape().decode().splitlines() if x.startswith("benchfleet_collector_results_db_up "))
    return line.split()[1]


def test_an_outage_holds_results_in_the_broker_logs_once_and_loses_nothing():
    """The results DB goes down with results arriving: the collector stores none and
    dead-letters none, keeps them unacked (returned to no queue: this broker would dead-letter
    any return), exports the DB as down, logs the outage once; back up, it stores each result
    once, in the order they came, logs the recovery once and exports the DB as up."""
    broker = StubBroker(delivery_limit=0)
    planned = runs()
    db = FakeDb(planned=planned)
    with capture_logs() as logged, collecting(broker, db) as c:
        publish(broker, result(planned[0]).encode())
        wait_until(lambda: planned[0].run_id in db.results and db_up(c) == "1.0", "the first result")
        db.down.set()
        publish(broker, *[result(r).encode() for r in planned[1:5]])
        wait_until(lambda: db_up(c) == "0.0", "the gauge to show the outage")
        wait_until(lambda: broker.unacked(broker.names.results) == 4, "four results held")
        opened = db.opened
        wait_until(lambda: sum(1 for e in logged if e["event"] == "results_db_still_unavailable") >= 3,
                   "the collector to try the DB again")
        assert list(db.results) == [planned[0].run_id]
        db.down.clear()
        wait_until(lambda: len(db.results) == 5, "the held results to be stored")
        broker.join(broker.names.results)
        assert db_up(c) == "1.0"
    assert db.order == [r.run_id for r in planned[:5]], "each result once, in the order it came"
    assert db.opened > opened, "the collector should have connected to the results DB again"
    assert broker.messages(broker.names.dead) == []
    events = [e["event"] for e in logged]
    assert events.count("results_db_unavailable") == 1 and events.count("results_db_available") == 1, events


def test_an_idle_collector_notices_the_db_going_and_coming_back(broker):
    """With nothing to store, the collector still checks the results DB: the gauge drops to 0
    while it is down and comes back to 1, with one log line each way."""
    db = FakeDb()
    with capture_logs() as logged, collecting(broker, db, db_check_every_s=0.01) as c:
        wait_until(lambda: db_up(c) == "1.0", "the DB to be up")
        db.down.set()
        wait_until(lambda: db_up(c) == "0.0", "the gauge to show the outage")
        db.down.clear()
        wait_until(lambda: db_up(c) == "1.0", "the gauge to show the DB back")
    events = [e["event"] for e in logged]
    assert events.count("results_db_unavailable") == 1 and events.count("results_db_available") == 1, events


def test_a_collector_started_while_the_db_is_down_waits_for_it(broker):
    """Started with the results DB down, the collector takes nothing from the queue until the
    DB answers, then stores what waited."""
    run = runs()[0]
    db = FakeDb()
    db.down.set()
    publish(broker, result(run).encode())
    with collecting(broker, db) as c:
        wait_until(lambda: db.opened == 0 and db_up(c) == "0.0", "the outage to be noticed")
        assert broker.unacked() == 0 and len(broker.messages(broker.names.results)) == 1
        db.down.clear()
        wait_until(lambda: run.run_id in db.results, "the result to be stored")
    assert broker.messages(broker.names.dead) == []


@pytest.mark.parametrize("name", [name for name, _, _ in result_bodies(runs()[0], runs()[1])])
def test_poison_results_are_dead_lettered_with_the_reason_and_nothing_stored(broker, name):
    """Deep nesting, numbers beyond 64 bits or not finite, negative totals, a run that was never
    planned and a result for another cell: each is parked with a reason naming the problem,
    nothing of it is stored, and the good result behind it is."""
    planned = runs()
    _, body, reason = next(p for p in result_bodies(planned[0], planned[1]) if p[0] == name)
    db = FakeDb(planned=planned)
    publish(broker, body, result(planned[2]).encode())
    with collecting(broker, db):
        broker.join(broker.names.results)
    parked = broker.messages(broker.names.dead)
    assert len(parked) == 1 and parked[0].body == body
    assert reason in parked[0].dead_letter_reason, parked[0].dead_letter_reason
    assert list(db.results) == [planned[2].run_id]


def test_a_result_that_trips_a_bug_is_dead_lettered_and_the_collector_goes_on(broker):
    """An unexpected error while storing one result parks it with the error instead of killing
    the collector or redelivering it for ever."""
    bad, good = runs()[:2]
    db = FakeDb(crash={bad.run_id})
    publish(broker, result(bad).encode(), result(good).encode())
    with collecting(broker, db):
        broker.join(broker.names.results)
    parked = broker.messages(broker.names.dead)
    assert [d.dead_letter_reason for d in parked] == ["cannot handle message: RuntimeError: a bug met on this result"]
    assert list(db.results) == [good.run_id]


def announcement(worker: str, state: str, at: float, address: str = "10.0.0.2:9464") -> WorkerAnnouncement:
    return WorkerAnnouncement(worker=worker, pool="default", state=state, address=address, at=at)  # type: ignore[arg-type]


def test_worker_announcements_are_listed_for_prometheus_and_survive_a_collector_restart(broker):
    """Workers announced on the results queue are stored and listed as HTTP SD target groups; a
    withdrawn worker leaves the list; a new collector lists the fleet from the results DB."""
    db = FakeDb()
    publish(broker, announcement("w1", "up", 1.0).encode(), announcement("w2", "up", 1.0, "[fd00::3]:9464").encode(),
            announcement("w3", "up", 1.0).encode(), announcement("w3", "down", 2.0).encode())
    with collecting(broker, db) as c:
        broker.join(broker.names.results)
        listed = json.loads(c.directory.render())
    assert listed == [{"targets": ["10.0.0.2:9464"], "labels": {"worker": "w1", "pool": "default"}},
                      {"targets": ["[fd00::3]:9464"], "labels": {"worker": "w2", "pool": "default"}}]
    assert c.stored == 0, "announcements are not results"
    with collecting(StubBroker(), db) as again:
        wait_until(lambda: len(again.directory.groups()) == 2, "the restarted collector lists the fleet")
    assert json.loads(again.directory.render()) == listed
