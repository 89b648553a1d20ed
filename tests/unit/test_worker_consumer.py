"""The worker's consumer against the in-memory bus, with a fake run executor: which runs are
measured, what is published, acked, handed back and dead-lettered, and how many attempts."""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

import pytest

from services.common.bus.broker import Delivery
from services.common.config import Settings
from services.common.bus.control import ControlMessage
from services.common.messages.events import RunEvent
from services.common.messages.results import RunResult, Series
from services.common.messages.runs import RunSpec
from services.common.bus.stub import StubBroker
from services.worker.consumer import AfterRun, Worker, after_run
from services.worker.runner import WorkerIdentity

from tests.unit.consumer_fixtures import publish_runs, published, result, runs, wait_until
from tests.unit.poison import run_bodies

POOL = "default"


class FakeRuns:
    """Stands in for the runner: each run ends with the status scripted for its attempt (ok when
    none is), and ``hold`` makes a run wait until released or stopped (then it is cancelled)."""

    def __init__(self, script: dict[str, list[str]] | None = None, *, hold: bool = False, crash: bool = False):
        self.script = script or {}
        self.hold = hold
        self.crash = crash
        self.calls: list[tuple[str, int]] = []
        #: after_failure of each call, in order.
        self.after_failure: list[bool] = []
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self, run: RunSpec, who: WorkerIdentity, *, servers, attempt, client_cpus, after_failure, stop,
                 on_progress, on_measuring) -> RunResult:
        self.calls.append((run.run_id, attempt))
        on_measuring(1000.0 + attempt)  # as the runner does before the warm-up
        self.after_failure.append(after_failure)
        self.started.set()
        if self.crash:
            raise RuntimeError("boom")
        if self.hold:
            while not (self.release.is_set() or stop.is_set()):
                stop.wait(0.005)
            if stop.is_set():
                return result(run, "cancelled", attempt=attempt, queries=300)
        steps = self.script.get(run.run_id, [])
        status = steps[attempt - 1] if attempt <= len(steps) else "ok"
        error = "MySQL error 2003: Can't connect to server on '127.0.0.1'" if status == "failed" else None
        return result(run, status, attempt=attempt, error=error)


@pytest.fixture
def broker() -> StubBroker:
    return StubBroker()


def worker(broker: StubBroker, fake: FakeRuns, *, attempts: int = 3) -> Worker:
    return Worker(Settings(run_attempts=attempts), pool=POOL, identity=WorkerIdentity("w1", host="h1"), connect=broker.bus,
                  run_executor=fake, retry_pause_s=0, backoff_s=0.01)


@contextlib.contextmanager
def serving(w: Worker) -> Iterator[None]:
    t = threading.Thread(target=w.run_forever, daemon=True)
    t.start()
    try:
        yield
    finally:
        w.stop()
        t.join(10)
    assert not t.is_alive(), "the worker did not stop"


def results(broker: StubBroker) -> list[RunResult]:
    return [m for m in published(broker, broker.names.results) if isinstance(m, RunResult)]


def events(broker: StubBroker) -> list[RunEvent]:
    return [m for m in published(broker, broker.names.results) if isinstance(m, RunEvent)]


def dead(broker: StubBroker) -> list[Delivery]:
    return broker.messages(broker.names.dead)


def test_every_run_is_measured_once_and_acked_after_its_result(broker):
    """Eight queued runs: each measured once, each with a 'running' event and an ok result,
    and nothing left in the runs queue or unacked."""
    planned = runs()
    publish_runs(broker, [r.encode() for r in planned])
    fake = FakeRuns()
    with serving(worker(broker, fake)):
        broker.join(broker.names.runs_queue(POOL))
    assert fake.calls == [(r.run_id, 1) for r in planned]
    assert [r.run_id for r in results(broker)] == [r.run_id for r in planned]
    assert all(r.status == "ok" and r.qps == 100 for r in results(broker))
    assert [e.run_id for e in events(broker) if e.state == "running"] == [r.run_id for r in planned]
    assert broker.unacked() == 0 and dead(broker) == []


def test_the_worker_tells_the_collector_when_a_runs_warm_up_begins(broker):
    """Besides 'running' when it takes a run (before server start, quiesce and prepare), the
    worker sends 'measuring' with the moment the warm-up began, which the collector's reaper
    counts warm-up + duration from; 'running' stays in the schema every collector reads."""
    run = runs()[0]
    publish_runs(broker, [run.encode()])
    with serving(worker(broker, FakeRuns())):
        broker.join(broker.names.runs_queue(POOL))
    wait_until(lambda: len(events(broker)) == 2, "both run events")
    running, measuring = sorted(events(broker), key=lambda e: e.state != "running")
    assert (running.state, running.schema_) == ("running", "benchfleet.run-event/1")
    assert (measuring.state, measuring.schema_, measuring.at) == ("measuring", "benchfleet.run-event/2", 1001.0)
    assert measuring.run_id == run.run_id and measuring.worker == "w1" and measuring.attempt == 1


def test_undecodable_runs_are_dead_lettered_with_the_reason_and_the_worker_goes_on(broker):
    """Garbage and a wrong-version run are parked with the reason and their queue; the next
    good run is measured."""
    good = runs()[0]
    with broker.bus("test") as bus:
        bus.declare((POOL,))
        bus.publish(bus.names.runs_exchange, POOL, b"\xff not json")
        bus.publish(bus.names.runs_exchange, POOL, b'{"schema": "benchfleet.run/9", "run_id": "x"}')
        bus.publish(bus.names.runs_exchange, POOL, good.encode())
    fake = FakeRuns()
    with serving(worker(broker, fake)):
        broker.join(broker.names.runs_queue(POOL))
    parked = dead(broker)
    assert [d.body for d in parked] == [b"\xff not json", b'{"schema": "benchfleet.run/9", "run_id": "x"}']
    assert all(d.headers["x-benchfleet-queue"] == "benchfleet.runs.default" for d in parked)
    assert "undecodable run message: not JSON" in parked[0].dead_letter_reason
    assert "benchfleet.run/9" in parked[1].dead_letter_reason
    assert fake.calls == [(good.run_id, 1)] and [r.run_id for r in results(broker)] == [good.run_id]


@pytest.mark.parametrize("name", [name for name, _, _ in run_bodies(runs()[0])])
def test_poison_runs_are_dead_lettered_unmeasured_and_the_worker_goes_on(broker, name):
    """Deep nesting, numbers beyond 64 bits or not finite, a negative repetition, a run id that
    is not its campaign's, cell and repetition's, and a cell naming another target: parked with
    a reason naming the problem, never measured, and the good run behind it is."""
    poison, good = runs()[0], runs()[1]
    _, body, reason = next(p for p in run_bodies(poison) if p[0] == name)
    with broker.bus("test") as bus:
        bus.declare((POOL,))
        bus.publish(bus.names.runs_exchange, POOL, body)
        bus.publish(bus.names.runs_exchange, POOL, good.encode())
    fake = FakeRuns()
    with serving(worker(broker, fake)):
        broker.join(broker.names.runs_queue(POOL))
    parked = dead(broker)
    assert len(parked) == 1 and parked[0].body == body
    assert parked[0].dead_letter_reason.startswith("undecodable run message: ")
    assert reason in parked[0].dead_letter_reason, parked[0].dead_letter_reason
    assert fake.calls == [(good.run_id, 1)] and [r.run_id for r in results(broker)] == [good.run_id]
    assert events(broker) == [e for e in events(broker) if e.run_id == good.run_id], "no run event for the poison"


def test_a_result_too_big_for_a_message_is_published_failed_with_the_reason(broker, monkeypatch):
    """A run whose result would exceed the message size limit is measured once and stored
    failed, saying why, with its totals but without the series that made it big."""
    from services.worker import verdict

    run = runs()[0]
    monkeypatch.setattr(verdict, "MAX_BODY_BYTES", 4000)
    big = result(run).model_copy(update={"series": Series(transactions=list(range(2000)))})
    publish_runs(broker, [run.encode()])
    fake = FakeRuns()
    with serving(worker(broker, lambda run, who, **kw: fake(run, who, **kw) and big)):
        broker.join(broker.names.runs_queue(POOL))
    [stored] = results(broker)
    assert stored.status == "failed" and stored.series == Series() and stored.totals == big.totals
    assert "above the 4,000 bytes a message may hold" in stored.error, stored.error
    assert fake.calls == [(run.run_id, 1)], "measuring again would make as big a result"


def test_a_finished_run_delivered_again_is_acked_without_measuring(broker):
    """The same run spec twice (a redelivery after a broker hiccup): measured and stored once."""
    run = runs()[0]
    publish_runs(broker, [run.encode(), run.encode()])
    fake = FakeRuns()
    with serving(worker(broker, fake)):
        broker.join(broker.names.runs_queue(POOL))
    assert fake.calls == [(run.run_id, 1)]
    assert len(results(broker)) == 1


def test_connection_lost_while_measuring_stores_the_result_once(broker):
    """The broker drops the worker's connection mid-run: the result still lands (on a
    connection of its own), the run comes back redelivered and is acked unmeasured."""
    run = runs()[0]
    publish_runs(broker, [run.encode()])
    fake = FakeRuns(hold=True)
    with serving(worker(broker, fake)):
        assert fake.started.wait(5)
        broker.lose_connections()
        fake.release.set()
        broker.join(broker.names.runs_queue(POOL))
    assert fake.calls == [(run.run_id, 1)]
    assert [(r.run_id, r.status) for r in results(broker)] == [(run.run_id, "ok")]
    assert broker.connects >= 3, "the worker should have reconnected"


def test_worker_reconnects_after_the_broker_refused_it_for_a_while(broker):
    """A broker restart: connections dropped and refused twice; the worker comes back and
    measures what is queued afterwards."""
    fake = FakeRuns()
    w = worker(broker, fake)
    with serving(w):
        with broker.bus("probe") as probe:
            probe.declare((POOL,))
        connects = broker.connects
        broker.lose_connections(refuse=2)
        wait_until(lambda: broker.connects > connects, "the worker to reconnect")
        run = runs()[0]
        publish_runs(broker, [run.encode()])
        broker.join(broker.names.runs_queue(POOL))
    assert fake.calls == [(run.run_id, 1)]


def test_failed_attempts_are_retried_then_stored_failed_and_the_run_dead_lettered(broker):
    """A run failing every time is tried run_attempts times (the queue counts each return);
    only the last failure is stored, and the run spec is parked with the reason."""
    run = runs()[0]
    publish_runs(broker, [run.encode()])
    fake = FakeRuns({run.run_id: ["failed"] * 3})
    with serving(worker(broker, fake, attempts=3)):
        broker.join(broker.names.runs_queue(POOL))
    assert fake.calls == [(run.run_id, 1), (run.run_id, 2), (run.run_id, 3)]
    assert [e.attempt for e in events(broker) if e.state == "running"] == [1, 2, 3]
    stored = results(broker)
    assert [(r.status, r.attempt) for r in stored] == [("failed", 3)]
    parked = dead(broker)
    assert len(parked) == 1 and parked[0].body == run.encode()
    assert parked[0].dead_letter_reason.startswith("run failed after 3 attempt(s): MySQL error 2003")
    assert parked[0].headers["x-benchfleet-queue"] == "benchfleet.runs.default"


def test_a_run_failing_once_is_stored_ok_from_its_second_attempt(broker):
    """A target that recovers: attempt 1 fails, attempt 2 is stored ok, nothing is parked."""
    run = runs()[0]
    publish_runs(broker, [run.encode()])
    fake = FakeRuns({run.run_id: ["failed", "ok"]})
    with serving(worker(broker, fake)):
        broker.join(broker.names.runs_queue(POOL))
    assert fake.calls == [(run.run_id, 1), (run.run_id, 2)]
    assert [(r.status, r.attempt) for r in results(broker)] == [("ok", 2)]
    assert dead(broker) == []


def _first_block_runs():
    """A's and B's 1-thread runs and A's 4-thread run of repetition 1, whatever order the plan
    gives the targets within a block."""
    first = {(r.cell.target, r.cell.threads): r for r in runs() if r.repetition == 1}
    return first[("A", 1)], first[("B", 1)], first[("A", 4)]


def test_runs_after_a_failure_on_their_target_end_what_it_left_running(broker):
    """A retry, and the next run on a target whose last run failed here, are told to end the
    failed run's statements before they wait for the target; after an ok run nothing is ended."""
    a1, b1, a4 = _first_block_runs()
    assert (a1.cell.target, b1.cell.target, a4.cell.target) == ("A", "B", "A")
    publish_runs(broker, [a1.encode(), b1.encode(), a4.encode()])
    fake = FakeRuns({a1.run_id: ["failed", "failed"]})
    with serving(worker(broker, fake, attempts=2)):
        broker.join(broker.names.runs_queue(POOL))
    told = dict(zip(fake.calls, fake.after_failure))
    assert len(told) == 4
    assert told[(a1.run_id, 1)] is False
    # B's run does not inherit A's failure; A's retry and A's next run after a failure do.
    assert told[(b1.run_id, 1)] is False and told[(a1.run_id, 2)] is True and told[(a4.run_id, 1)] is True


def test_an_ok_run_clears_the_failure_of_its_target(broker):
    """Once a run on a target has ended ok, the next one there ends nothing."""
    a1, _, a4 = _first_block_runs()
    publish_runs(broker, [a1.encode()])
    fake = FakeRuns({a1.run_id: ["failed", "ok"]})
    with serving(worker(broker, fake, attempts=2)):
        broker.join(broker.names.runs_queue(POOL))
        publish_runs(broker, [a4.encode()])
        broker.join(broker.names.runs_queue(POOL))
    assert list(zip(fake.calls, fake.after_failure)) == [((a1.run_id, 1), False), ((a1.run_id, 2), True),
                                                         ((a4.run_id, 1), False)]


def test_a_crashing_executor_fails_the_run_instead_of_wedging_the_worker(broker):
    """A bug in the run code: the run is stored failed with the exception and parked; the
    worker takes the next run."""
    first, second = runs()[:2]
    publish_runs(broker, [first.encode(), second.encode()])
    fake = FakeRuns(crash=True)
    with serving(worker(broker, fake, attempts=1)):
        broker.join(broker.names.runs_queue(POOL))
    assert [(r.run_id, r.status, r.error) for r in results(broker)] == [
        (first.run_id, "failed", "worker error: RuntimeError: boom"), (second.run_id, "failed", "worker error: RuntimeError: boom")]
    assert len(dead(broker)) == 2


def test_runs_of_a_campaign_cancelled_before_the_worker_started_are_dropped(broker):
    """A cancel in the control log is replayed before the first run: the cancelled campaign's
    runs are acked unmeasured, another campaign's run is measured."""
    cancelled, other = runs("c1"), runs("c2")[0]
    publish_runs(broker, [r.encode() for r in cancelled] + [other.encode()])
    with broker.bus("scheduler") as bus:
        bus.publish_control(ControlMessage(action="cancel", campaign_id="c1"))
    fake = FakeRuns()
    with serving(worker(broker, fake)):
        broker.join(broker.names.runs_queue(POOL))
    assert fake.calls == [(other.run_id, 1)]
    assert [r.run_id for r in results(broker)] == [other.run_id]
    assert dead(broker) == []


def test_a_cancel_during_a_run_stops_it_and_stores_a_partial_cancelled_result(broker):
    """Cancelling the campaign of the active run stops it; its cancelled result is stored and
    acked (not handed back), and the campaign's queued runs are dropped."""
    first, second = runs()[:2]
    publish_runs(broker, [first.encode(), second.encode()])
    fake = FakeRuns(hold=True)
    with serving(worker(broker, fake)):
        assert fake.started.wait(5)
        with broker.bus("scheduler") as bus:
            bus.publish_control(ControlMessage(action="cancel", campaign_id=first.campaign_id))
        broker.join(broker.names.runs_queue(POOL))
    assert fake.calls == [(first.run_id, 1)]
    assert [(r.run_id, r.status) for r in results(broker)] == [(first.run_id, "cancelled")]
    assert dead(broker) == []


def test_shutdown_during_a_run_hands_it_back_unmeasured(broker):
    """Stopping the worker mid-run: no result is published, the run goes back to the queue
    (marked redelivered) for another worker."""
    run = runs()[0]
    publish_runs(broker, [run.encode()])
    fake = FakeRuns(hold=True)
    w = worker(broker, fake)
    with serving(w):
        assert fake.started.wait(5)
    assert results(broker) == []
    back = broker.messages(broker.names.runs_queue(POOL))
    assert [d.body for d in back] == [run.encode()]
    assert back[0].redelivered and back[0].attempt == 2
    assert broker.unacked() == 0 and dead(broker) == []


@pytest.mark.parametrize("status, attempt, stopping, decision", [
    ("ok", 1, False, AfterRun.PUBLISH),
    ("cancelled", 1, False, AfterRun.PUBLISH),
    ("cancelled", 1, True, AfterRun.HAND_BACK),
    ("failed", 1, False, AfterRun.RETRY),
    ("failed", 2, False, AfterRun.RETRY),
    ("failed", 3, False, AfterRun.GIVE_UP),
    ("failed", 1, True, AfterRun.GIVE_UP),
    ("ok", 1, True, AfterRun.PUBLISH),
])
def test_what_happens_to_a_run_once_it_ended(status, attempt, stopping, decision):
    """With 3 attempts: retry failures until the last, hand back only runs cut short by a
    shutdown, publish everything else."""
    assert after_run(status, attempt, 3, stopping=stopping) is decision


@pytest.mark.parametrize("headers, redelivered, attempt", [
    ({"x-delivery-count": 0}, False, 1),
    ({}, False, 1),
    ({"x-delivery-count": 2}, True, 3),
    ({}, True, 2),  # returned by a lost connection, not counted: still a second attempt
    ({"x-delivery-count": "junk"}, False, 1),
])
def test_attempt_number_of_a_delivery(headers, redelivered, attempt):
    """The attempt comes from the quorum queue's delivery count, at least 2 when redelivered."""
    assert Delivery(b"", 1, redelivered, headers).attempt == attempt


def test_a_worker_announces_its_builds_at_connect_and_again_when_they_change(broker, tmp_path):
    """The builds of the worker's registry reach the results queue when it connects; a build
    registered while it runs is announced before its next run, and nothing is re-sent unchanged."""
    from services.common.messages.announcements import WorkerBuilds
    from services.worker.target.builds import Registry
    from services.worker.target.managed import ServerManager

    from tests.unit.test_builds import fake_tree

    registry = Registry(tmp_path / "builds")
    registry.add_dir("first", fake_tree(tmp_path / "first"))
    servers = ServerManager(base_dir=tmp_path / "managed", builds=registry)
    fake = FakeRuns()
    w = Worker(Settings(), pool=POOL, identity=WorkerIdentity("w1", host="h1"), connect=broker.bus,
               run_executor=fake, servers=servers, backoff_s=0.01)
    a, b, c = runs()[:3]

    def announced() -> list[list[str]]:
        return [[n for n in m.names() if n != "system"]
                for m in published(broker, broker.names.results) if isinstance(m, WorkerBuilds)]

    try:
        with serving(w):
            wait_until(lambda: announced() == [["first"]], "the announcement at connect")
            publish_runs(broker, [a.encode()])
            wait_until(lambda: len(results(broker)) == 1, "the first run")
            registry.add_dir("second", fake_tree(tmp_path / "second"))
            publish_runs(broker, [b.encode(), c.encode()])
            wait_until(lambda: len(results(broker)) == 3, "two more runs")
    finally:
        servers.close()
    assert announced() == [["first"], ["first", "second"]]
    first = next(m for m in published(broker, broker.names.results) if isinstance(m, WorkerBuilds))
    assert (first.worker, first.host, first.pool) == ("w1", "h1", POOL)


def test_worker_announces_its_metrics_address_on_connect_and_withdraws_it_at_stop(broker):
    """The collector hears where to scrape this worker when it connects, and that it stopped on
    purpose when it stops."""
    w = Worker(Settings(), pool=POOL, identity=WorkerIdentity("w1", host="h1"), connect=broker.bus,
               run_executor=FakeRuns(), retry_pause_s=0, backoff_s=0.01, scrape_address="10.0.0.2:9464")
    from services.common.messages.announcements import WorkerAnnouncement

    def said() -> list[tuple[str, str, str]]:
        return [(m.state, m.address, m.pool) for m in published(broker, broker.names.results)
                if isinstance(m, WorkerAnnouncement)]

    with serving(w):
        wait_until(lambda: len(said()) == 1, "the announcement")
    assert said() == [("up", "10.0.0.2:9464", POOL), ("down", "10.0.0.2:9464", POOL)]


def test_a_running_worker_announces_its_endpoint_and_builds_again_periodically(broker, tmp_path):
    """Connected, a worker announces its /metrics address and its builds again every
    announce_every_s (also while idle), so they stay fresh under the fleet's announce_ttl_s."""
    from services.common.messages.announcements import WorkerAnnouncement, WorkerBuilds
    from services.worker.target.builds import Registry
    from services.worker.target.managed import ServerManager

    from tests.unit.test_builds import fake_tree

    registry = Registry(tmp_path / "builds")
    registry.add_dir("first", fake_tree(tmp_path / "first"))
    servers = ServerManager(base_dir=tmp_path / "managed", builds=registry)
    w = Worker(Settings(), pool=POOL, identity=WorkerIdentity("w1", host="h1"), connect=broker.bus,
               run_executor=FakeRuns(), servers=servers, backoff_s=0.01, scrape_address="10.0.0.2:9464",
               announce_every_s=0.05)

    def count(kind: type) -> int:
        return sum(1 for m in published(broker, broker.names.results) if isinstance(m, kind))

    try:
        with serving(w):
            wait_until(lambda: count(WorkerAnnouncement) >= 3 and count(WorkerBuilds) >= 3, "announcements again")
    finally:
        servers.close()
    ups = [m for m in published(broker, broker.names.results) if isinstance(m, WorkerAnnouncement)]
    assert ups[-1].state == "down" and all(m.state == "up" for m in ups[:-1])
    assert [m.at for m in ups[:-1]] == sorted(m.at for m in ups[:-1])

