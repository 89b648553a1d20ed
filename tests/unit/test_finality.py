"""Every run ends in a final state: the collector fails the run of a dead-lettered run spec or
result with the reason, ignores dead letters that name no run of theirs, and reaps runs whose
worker vanished (in-memory bus, fake results store)."""

from __future__ import annotations

from services.collector.finality import Finaliser, dead_letter_reason, failure_of
from services.common.bus.broker import Delivery
from services.common.messages.runs import Cell
from services.common.store.finality import OverdueRun
from services.common.bus.stub import StubBroker
from services.common.store.takers import Taker

from tests.unit.consumer_fixtures import result, runs, wait_until
from tests.unit.test_collector_consumer import FakeDb, broker, collecting, publish  # noqa: F401 (fixture)


def planned(db: FakeDb, campaign_id: str = "c1") -> list:
    rs = runs(campaign_id)
    db.runs.update({r.run_id: r for r in rs})
    return rs


def claimed(db: FakeDb, run, user: str = "guest", worker: str = "w1") -> None:
    """``run`` taken by ``worker`` of broker user ``user`` (its "running" event stored)."""
    db.takers[run.run_id] = (Taker(user, worker), 1)
    db.running.append(run.run_id)


def test_a_result_the_db_refuses_fails_its_run_with_the_reason(broker):
    """The DB refuses a result: it is dead-lettered (kept in the dead queue for people) and its
    run is failed with the DB's error, so the campaign can finish."""
    db = FakeDb()
    bad, good = planned(db)[:2]
    db.refuse = {bad.run_id}
    publish(broker, result(bad).encode(), result(good).encode())
    with collecting(broker, db) as c:
        # The dead letter is read on the collector's ticks, apart from the results: it may fail the
        # run before the next result is stored (seen under load).
        wait_until(lambda: bad.run_id in db.failed and good.run_id in db.results,
                   "the run of the dead-lettered result to fail and the other result to be stored")
    assert db.failed[bad.run_id] == ("its result was dead-lettered: cannot store message: "
                                     "results DB: 1406 Data too long for column 'error' at row 1")
    assert list(db.results) == [good.run_id] and c.finaliser.failed == 1
    assert [d.body for d in broker.messages(broker.names.dead)] == [result(bad).encode()]
    assert broker.messages(broker.names.dead_watch) == [] and broker.unacked() == 0


def test_a_run_spec_dead_lettered_by_the_queue_fails_its_run(broker):
    """A run spec returned more often than the delivery limit (a worker crashing on it) is
    dead-lettered by the queue itself, with no reason of ours: its run fails with RabbitMQ's."""
    db = FakeDb()
    run = planned(db)[0]
    with broker.bus("scheduler") as bus:
        bus.declare(("default",))
        bus.publish_runs("default", [run.encode()])
        for _ in range(broker.delivery_limit + 1):
            bus.nack(bus.get(bus.names.runs_queue("default")).delivery_tag, requeue=True)
    with collecting(broker, db):
        wait_until(lambda: run.run_id in db.failed, "the run of the dead-lettered run spec to fail")
    assert db.failed[run.run_id] == ("its run spec was dead-lettered: RabbitMQ dead-lettered it from "
                                     "benchfleet.runs.default: delivered too often without an ack "
                                     "(a consumer crashing on it)")


def test_a_result_refused_for_one_bad_field_still_fails_its_run(broker):
    """A result that does not decode (a count that is not a number) but names its run and cell:
    the run will never have it, so it fails with the reason."""
    import json

    db = FakeDb()
    run = planned(db)[0]
    claimed(db, run)
    doc = json.loads(result(run).encode())
    doc["totals"]["reads"] = "lots"
    with broker.bus("collector") as bus:
        bus.declare(("default",))
        bus.dead_letter(json.dumps(doc).encode(), "undecodable result message: totals.reads: not a number",
                        bus.names.results)
    with collecting(broker, db):
        wait_until(lambda: run.run_id in db.failed, "the run of the refused result to fail")
    assert db.failed[run.run_id] == "its result was dead-lettered: undecodable result message: totals.reads: not a number"


def test_dead_letters_that_name_no_run_of_theirs_fail_nothing(broker):
    """Garbage, a run event, a result for an unknown run and one naming a real run with another
    cell are read and acked, and fail no run."""
    db = FakeDb()
    run = planned(db)[0]
    forged = result(run).model_copy(update={"cell": Cell(target="B", workload="oltp_point_select", threads=64)})
    unknown = result(runs("other")[0])
    with broker.bus("stranger") as bus:
        bus.declare(("default",))
        for body in (b"\xff" * 10, b"[" * 50_000, b'{"schema": "benchfleet.run-event/1"}', forged.encode(),
                     unknown.encode()):
            bus.dead_letter(body, "test", bus.names.results)
    with collecting(broker, db):
        wait_until(lambda: not broker.messages(broker.names.dead_watch) and broker.unacked() == 0,
                   "the dead letters to be read")
    assert db.failed == {}
    assert len(broker.messages(broker.names.dead)) == 5


def test_a_run_whose_worker_vanished_is_reaped(broker):
    """A run still marked running past warm-up + duration + grace is failed with a reason naming
    its worker; one whose result is already stored is left alone."""
    db = FakeDb()
    a, b = planned(db)[:2]
    db.results[b.run_id] = result(b)
    db.overdue = [OverdueRun(a.run_id, "c1", "w7", 100.0, 70.0), OverdueRun(b.run_id, "c1", "w7", 100.0, 70.0)]
    with collecting(broker, db, reap_grace_s=60) as c:
        wait_until(lambda: a.run_id in db.failed, "the overdue run to be reaped")
    assert db.failed[a.run_id].startswith("no result ") and "on w7 (allowed 70 s: its start, warm-up, duration and 60 s grace)" in db.failed[a.run_id]
    assert b.run_id not in db.failed and c.finaliser.reaped == 1


def test_no_run_is_reaped_while_the_collector_holds_results_behind_a_waiting_claim(broker):
    """While a takeover claim waits, the collector holds (unacked) what came for its run, perhaps the
    overdue run's own result: the reaper waits too, and reaps once nothing is held."""
    db = FakeDb()
    a = planned(db)[0]
    db.overdue = [OverdueRun(a.run_id, "c1", "w7", 100.0, 70.0)]
    f = Finaliser(grace_s=60)
    with broker.bus("collector") as bus:
        bus.declare(("default",))
        f.tick(bus, db.open(), results_held=True)
        assert a.run_id not in db.failed and f.reaped == 0
        f.tick(bus, db.open())
    assert a.run_id in db.failed and f.reaped == 1


def test_a_dead_letter_met_by_a_db_blip_is_given_back_and_its_run_failed_later(broker):
    """The results DB blips while a dead letter's run is failed: the dead letter goes back to its
    queue (not left unacked for good) and its run is failed once the DB answers."""
    db = FakeDb()
    run = planned(db)[0]
    claimed(db, run)
    db.fail_away = 1
    with broker.bus("worker") as bus:
        bus.declare(("default",))
        bus.dead_letter(result(run).encode(), "test", bus.names.results)
    with collecting(broker, db):
        wait_until(lambda: run.run_id in db.failed, "the run of the dead letter to fail after the blip")
        wait_until(lambda: broker.unacked() == 0 and not broker.messages(broker.names.dead_watch),
                   "the dead letter to be acked")


def test_a_dead_letter_is_not_left_unacked_when_the_db_is_away():
    """Finaliser alone: a StoreError failing a dead letter's run gives the message back (nack,
    requeue) before the error reaches the consumer."""
    import pytest

    from services.collector.finality import Finaliser
    from services.common.errors import StoreUnavailable

    broker = StubBroker()
    db = FakeDb()
    run = planned(db)[0]
    claimed(db, run)
    db.fail_away = 1
    with broker.bus("collector") as bus:
        bus.declare(("default",))
        bus.dead_letter(result(run).encode(), "test", bus.names.results)
        with pytest.raises(StoreUnavailable):
            Finaliser(grace_s=60).read_dead_letters(bus, db.open())
        assert broker.unacked() == 0 and len(broker.messages(broker.names.dead_watch)) == 1


def test_failing_or_reaping_a_run_refreshes_its_cell_statistics(broker):
    """After the finaliser fails a dead letter's run or reaps a run, the statistics of that
    campaign's workload are refreshed (cell_stats count failed runs); an error doing so is logged."""
    db = FakeDb()
    a, b, c = planned(db)[:3]
    claimed(db, a)
    db.overdue = [OverdueRun(b.run_id, "c1", "w7", 100.0, 70.0, "oltp_point_select")]
    refreshed: list[tuple[str, str | None]] = []

    def after_fail(store, campaign_id, workload):
        refreshed.append((campaign_id, workload))
        if len(refreshed) == 1:
            raise RuntimeError("statistics bug")

    with broker.bus("worker") as bus:
        bus.declare(("default",))
        bus.dead_letter(result(a).encode(), "test", bus.names.results)
    with collecting(broker, db, reap_grace_s=60, after_fail=after_fail):
        wait_until(lambda: len(refreshed) == 2, "both failures to refresh the statistics")
    assert sorted(refreshed) == [("c1", "oltp_point_select")] * 2
    assert set(db.failed) == {a.run_id, b.run_id}


def test_the_reaper_waits_while_results_wait_in_the_queue():
    """Results waiting in the queue may be the overdue runs' own: nothing is reaped meanwhile."""
    from services.collector.finality import Finaliser

    broker = StubBroker()
    db = FakeDb()
    a = planned(db)[0]
    db.overdue = [OverdueRun(a.run_id, "c1", "w7", 100.0, 70.0)]
    publish(broker, result(a).encode())
    with broker.bus("collector") as bus:
        Finaliser(grace_s=60).tick(bus, db.open())
    assert db.failed == {}


def test_dead_letter_reasons():
    """Our consumers' reason wins; RabbitMQ's own is said in words; none at all is said too."""
    assert dead_letter_reason({"x-benchfleet-reason": b"bad"}) == "bad"
    assert dead_letter_reason({"x-first-death-reason": "rejected", "x-first-death-queue": "q"}) == \
        "RabbitMQ dead-lettered it from q: rejected"
    assert dead_letter_reason({}) == "dead-lettered without a reason"
    assert failure_of(Delivery(b"{}", 1, False)) is None


def test_a_cells_own_long_window_is_not_taken_for_a_vanished_worker():
    """The thread-pool study: a 15-minute window at 4096 clients in a campaign whose default window
    is 10 s was reaped 922 s after it began measuring, while its worker was still measuring it."""
    from services.common.spec.campaign import CampaignSpec
    from services.common.store.finality import deadline, run_span

    doc = {"name": "pool", "targets": [{"kind": "dsn", "name": "a", "host": "127.0.0.1", "user": "bench"}],
           "workloads": ["oltp_point_select",
                         {"name": "oltp_read_write", "duration_by_threads": {4096: "15m"}, "warmup_by_threads": {4096: "30s"}}],
           "threads": [16, 4096], "duration": "10s", "warmup": "5s", "warmup_by_threads": {1024: "15s"}}
    spec = CampaignSpec.model_validate(doc)
    assert run_span(doc, spec, 4096, "oltp_read_write") == 930.0
    assert run_span(doc, spec, 4096, "oltp_point_select") == 25.0 and run_span(doc, spec, 16, "oltp_read_write") == 15.0
    assert run_span(doc, spec, 4096, "gone_workload") == 25.0   # not in the spec: the campaign's own
    assert run_span(doc, None, 4096, "oltp_read_write") == 15.0  # an unreadable stored spec: as before
    measuring = 1000.0
    assert deadline(0.0, measuring, run_span(doc, spec, 4096, "oltp_read_write"), 60.0, 900.0) > measuring + 922 + 15
