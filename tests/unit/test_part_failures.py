"""A part of a run split over load hosts when something breaks: a barrier that crashes, worker
code that raises around a part, a campaign cancelled while its parts measure. A part must never
pass for the whole run, wedge its worker, or turn a cancel into a failure."""

from __future__ import annotations

import threading
import time

import pytest

from services.common.config import Settings
from services.common.bus.control import ControlMessage
from services.common.errors import LoadError
from services.common.messages.results import RunResult, Totals
from services.common.messages.runs import RunSpec
from services.worker.parts.link import StubPartsHub, StubPartsLink
from services.common.bus.stub import StubBroker
from services.scheduler.submit import split_run
from services.worker.consumer import Worker
from services.worker.parts.session import PartSession
from services.worker.runner import WorkerIdentity

from tests.unit.consumer_fixtures import publish_runs, published, result, runs, wait_until
from tests.unit.test_part_protocol import FAST, POOL, FakeLoad, PartsStore, fleet, one_run


class CrashingLink(StubPartsLink):
    """A parts link whose receive (or, with ``on_open``, open) hits a bug, not a bus error."""

    def __init__(self, hub: StubPartsHub, name: str, *, on_open: bool = False):
        super().__init__(hub, name)
        self.on_open = on_open

    def open(self, run_id: str) -> None:
        if self.on_open:
            raise ValueError("bad parts exchange name")
        super().open(run_id)

    def receive(self, timeout_s: float) -> list[bytes]:
        raise RuntimeError("boom")


class CrashingHub(StubPartsHub):
    def link(self, name: str = "stub") -> StubPartsLink:
        return CrashingLink(self, name)


@pytest.mark.parametrize("on_open", [False, True])
def test_a_barrier_that_crashes_fails_the_gate_instead_of_starting_at_once(on_open):
    """The barrier's thread dies of a bug before any start: the driver waiting at the gate gets
    a LoadError naming it, never a start instant (it would measure 1/N of the load alone)."""
    part = split_run(one_run(), 2)[0]
    session = PartSession(CrashingLink(StubPartsHub(), "w0", on_open=on_open), part, worker="w0", host="h0",
                          pool=POOL, stop=threading.Event(), join_base_s=5.0).begin()
    with pytest.raises(LoadError, match="barrier error"):
        session.gate()
    session.finish("failed")
    assert session.failure is not None and "barrier error" in session.failure
    assert session.report() is None


def test_a_part_whose_barrier_crashed_is_stored_failed_never_as_the_whole_run():
    """One worker, its parts link broken by a bug: the run is stored failed, saying why, with no
    measurement; not the part's share of the load stored ok as the run."""
    broker, hub = StubBroker(), CrashingHub()
    run = one_run()
    store = PartsStore(runs())
    publish_runs(broker, [p.encode() for p in split_run(run, 2)])
    load = FakeLoad(hub, "w1")
    with fleet(broker, hub, store, {"w1": load}, attempts=1):
        wait_until(lambda: run.run_id in store.stored, "the run's result", timeout=15)
    r = store.stored[run.run_id]
    assert r.status == "failed" and "barrier error" in (r.error or ""), r.error
    assert r.totals == Totals() and load.starts == []


class NoStart:
    """A part's barrier that never agreed a start and saw nothing wrong (the driver skipped it)."""

    def __init__(self, part):
        self.part, self.start_at, self.failure = part, None, None
        self.finished: list[str | None] = []

    def finish(self, reason: str | None = None, *, requeued: bool = False) -> None:
        self.finished.append(reason)

    def report(self) -> None:
        return None


def test_a_part_measured_ok_without_an_agreed_start_is_a_failure_not_the_run():
    part = split_run(one_run(), 2)[1]
    w = Worker(Settings(), pool=POOL, identity=WorkerIdentity("w1", host="h1"), connect=StubBroker().bus)
    session = NoStart(part.part)
    r = w._end_part(session, result(part))  # type: ignore[arg-type]
    assert r.status == "failed" and r.part is None and r.parts == []
    assert r.error == "load_hosts part 1 (w1): load_hosts: the part measured without an agreed start", r.error
    assert session.finished == [r.error.split(": ", 1)[1]], "its partners are told it gave up"


def quick_ok(run: RunSpec, who: WorkerIdentity, *, servers, attempt, client_cpus, after_failure, stop,
             on_progress, start_gate=None, on_measuring=None) -> RunResult:
    return result(run, attempt=attempt)


def results(broker: StubBroker) -> list[RunResult]:
    return [m for m in published(broker, broker.names.results) if isinstance(m, RunResult)]


def test_a_part_whose_parts_link_cannot_be_made_fails_and_the_worker_takes_the_next_run():
    """Making the part's link raises: the part is stored failed and acked, and the worker goes on
    to the next run instead of sitting on an unacked delivery."""
    broker = StubBroker()
    part, other = split_run(one_run(), 2)[0], runs()[0]
    publish_runs(broker, [part.encode(), other.encode()])

    def no_link(_name: str) -> StubPartsLink:
        raise OSError("no route to the parts exchange")

    w = Worker(Settings(run_attempts=1), pool=POOL, identity=WorkerIdentity("w1", host="h1"), connect=broker.bus,
               run_executor=quick_ok, retry_pause_s=0, backoff_s=0.01, parts_connect=no_link, part_options=FAST)
    t = threading.Thread(target=w.run_forever, daemon=True)
    t.start()
    try:
        broker.join(broker.names.runs_queue(POOL), timeout=10)
    finally:
        w.stop()
        t.join(10)
    assert [(r.run_id, r.status) for r in results(broker)] == [(part.run_id, "failed"), (other.run_id, "ok")]
    assert "OSError: no route to the parts exchange" in (results(broker)[0].error or "")


def test_a_part_whose_end_raises_fails_and_is_acked(monkeypatch):
    """Reading the part's report raises (a bug): the part is stored failed, naming the error, and
    its delivery is acked."""
    broker, hub = StubBroker(), StubPartsHub()
    part = split_run(one_run(), 2)[0]
    publish_runs(broker, [part.encode()])

    def broken(self: PartSession) -> None:
        raise ValueError("report broken")

    monkeypatch.setattr(PartSession, "report", broken)
    w = Worker(Settings(run_attempts=1), pool=POOL, identity=WorkerIdentity("w1", host="h1"), connect=broker.bus,
               run_executor=quick_ok, retry_pause_s=0, backoff_s=0.01,
               parts_connect=lambda _n: hub.link("w1"), part_options=FAST)
    t = threading.Thread(target=w.run_forever, daemon=True)
    t.start()
    try:
        broker.join(broker.names.runs_queue(POOL), timeout=10)
    finally:
        w.stop()
        t.join(10)
    [r] = results(broker)
    assert r.status == "failed" and r.part is None and r.parts == []
    assert r.error == "load_hosts part 0 (w1): worker error: ValueError: report broken", r.error


def test_cancelling_a_campaign_while_its_parts_measure_stores_it_cancelled_with_nothing_dead_lettered():
    """Both parts are cancelled; w1's cancel reaches w2's barrier (as an abort) before w2 has
    wound down: w2's part stays cancelled, not failed, so nothing is dead-lettered."""
    broker, hub = StubBroker(), StubPartsHub()
    run = one_run()
    store = PartsStore(runs())
    publish_runs(broker, [p.encode() for p in split_run(run, 2)])
    loads = {"w1": FakeLoad(hub, "w1", measure_s=10.0), "w2": FakeLoad(hub, "w2", measure_s=10.0, linger_s=0.5)}
    queue = broker.names.runs_queue(POOL)
    with fleet(broker, hub, store, loads, attempts=3):
        wait_until(lambda: all(load.starts for load in loads.values()), "both parts measuring", timeout=15)
        time.sleep(0.3)  # past the agreed start
        with broker.bus("scheduler") as bus:
            bus.publish_control(ControlMessage(action="cancel", campaign_id=run.campaign_id))
        wait_until(lambda: not broker.messages(queue) and not broker.unacked(queue), "both parts acked", timeout=10)
        wait_until(lambda: not broker.messages(broker.names.results) and not broker.unacked(broker.names.results),
                   "every result handled", timeout=10)
    assert store.stored[run.run_id].status == "cancelled"
    assert broker.messages(broker.names.dead) == []
