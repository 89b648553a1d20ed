"""A run is bound to the worker that took it: results, parts, events and dead letters about the run
from any other broker user or worker are refused (acked, logged, never stored), an ok result is
never replaced, and announcements from the future are refused (in-memory bus, fake results store)."""

from __future__ import annotations

import itertools
import time
from typing import Callable

from structlog.testing import capture_logs

from services.common.messages.announcements import WorkerAnnouncement
from services.common.messages.events import RunEvent
from services.collector.takeover import LISTING_LAG_S
from services.collector.takeover_check import TakeoverCheck
from services.common.bus.management import BrokerView, RunsConsumer
from services.common.errors import BusError
from services.common.store.takers import (
    Binding,
    Claim,
    DeadLetterFrom,
    Taker,
    judge_claim,
    judge_result,
    may_fail,
    refusal_reason,
)

from tests.unit.consumer_fixtures import result, wait_until
from tests.unit.test_collector_consumer import FakeDb, broker, collecting  # noqa: F401 (fixture)
from tests.unit.test_finality import planned

A = Taker("worker-a", "host-a")
B = Taker("worker-b", "host-b")


def _send(broker, user: str | None, *bodies: bytes, dead: bool = False) -> None:
    """Publish ``bodies`` to the results exchange (or as dead letters) as broker user ``user``."""
    with broker.bus("sender", user=user) as bus:
        bus.declare(("default",))
        for body in bodies:
            if dead:
                bus.dead_letter(body, "given up", bus.names.runs_queue("default"))
            else:
                bus.publish_result(body)


def _event(run, taker: Taker, attempt: int = 1, state: str = "running") -> bytes:
    return RunEvent(run_id=run.run_id, campaign_id=run.campaign_id, state=state, worker=taker.worker,
                    attempt=attempt, at=time.time()).encode()


def hurried() -> Callable[[], float]:
    """A clock 10 s later at each reading: every wait of the takeover check has passed by its next look."""
    return itertools.count(0.0, 10.0).__next__


def _drained(broker) -> None:
    broker.join(broker.names.results)
    wait_until(lambda: not broker.messages(broker.names.dead_watch) and broker.unacked() == 0, "every message read")


def test_the_rules_bind_the_first_claim_and_hand_over_only_a_later_attempt():
    """Pure rules: an unclaimed run binds, its taker speaks for it, another worker is refused unless it
    claims a later attempt (the broker handed the run over); a split run is bound part by part."""
    free, taken = Binding(None, 0, False, "pending"), Binding(A, 1, False, "running")
    assert judge_claim(free, B, 1) is Claim.BIND
    assert judge_claim(taken, A, 1) is Claim.TAKER
    assert judge_claim(taken, B, 1) is Claim.REFUSE
    assert judge_claim(taken, Taker("worker-a", "host-b"), 1) is Claim.REFUSE, "same user, other worker"
    assert judge_claim(taken, B, 2) is Claim.RETAKE
    assert judge_result(taken, B, ok=True, part=False) is Claim.REFUSE
    assert judge_result(taken, A, ok=True, part=True) is Claim.REFUSE, "a whole run sends no parts"
    assert judge_claim(taken, A, 1, part=0) is Claim.REFUSE, "a whole run has no parts to claim"
    split = Binding(None, 0, True, "running", part_takers=frozenset({A}))
    assert judge_claim(split, B, 1) is Claim.REFUSE, "a split run is claimed part by part"
    assert judge_result(split, A, ok=True, part=False) is Claim.REFUSE, "a split run's whole result is merged"
    assert judge_result(split, A, ok=False, part=False) is Claim.TAKER, "a part that gave up before its group started"
    assert judge_result(split, B, ok=False, part=False) is Claim.REFUSE, "B took no part of it"
    assert may_fail(split, DeadLetterFrom("worker-a", run_spec=True))
    assert not may_fail(split, DeadLetterFrom("worker-b", run_spec=True)), "B took no part of it"
    part_free, part_taken = Binding(None, 0, False, "running", part=1), Binding(A, 1, False, "running", part=1)
    assert judge_claim(part_free, B, 1, part=1) is Claim.BIND
    assert judge_claim(part_taken, A, 1, part=1) is Claim.TAKER
    assert judge_claim(part_taken, B, 1, part=1) is Claim.REFUSE
    assert judge_claim(part_taken, B, 2, part=1) is Claim.RETAKE, "a part redelivered to another worker"
    assert judge_claim(part_taken, A, 1) is Claim.REFUSE, "a part's binding is not the whole run's"
    assert judge_result(part_taken, A, ok=True, part=True) is Claim.TAKER
    assert judge_result(part_taken, B, ok=True, part=True) is Claim.REFUSE
    assert judge_result(part_free, B, ok=True, part=True) is Claim.BIND, "no one claimed the part: refused by the caller"
    assert not may_fail(free, DeadLetterFrom("worker-a", run_spec=True)), "no dead letter fails an unclaimed run"
    assert not may_fail(taken, DeadLetterFrom("worker-b", run_spec=True))
    assert may_fail(taken, DeadLetterFrom("worker-a", run_spec=True))
    assert not may_fail(taken, DeadLetterFrom("", run_spec=True))
    scheduled = Binding(A, 1, False, "running", publisher="scheduler")
    assert may_fail(scheduled, DeadLetterFrom("scheduler", run_spec=True)), "the broker dead-lettered the run spec"
    assert not may_fail(scheduled, DeadLetterFrom("scheduler", run_spec=False))


def test_another_workers_result_for_a_taken_run_is_refused(broker):
    """Worker A claims a run; worker B's result for it (another broker user), and a result naming
    another worker through A's user, are acked and logged, never stored nor dead-lettered; A's own
    result is stored."""
    db = FakeDb()
    db.default_taker = None  # no run is claimed until a worker's event says so
    run = planned(db)[0]
    _send(broker, A.user, _event(run, A))
    forged = result(run, queries=1).model_copy(update={"worker": B.worker})
    _send(broker, B.user, forged.encode())
    _send(broker, A.user, forged.encode())
    with capture_logs() as logs, collecting(broker, db):
        _drained(broker)
        assert run.run_id not in db.results
        _send(broker, A.user, result(run).model_copy(update={"worker": A.worker}).encode())
        _drained(broker)
    assert db.results[run.run_id].worker == A.worker and db.results[run.run_id].qps == 100
    refused = [e for e in logs if e["event"] == "result_refused"]
    assert len(refused) == 2 and {e["sender"] for e in refused} == {str(B), str(Taker(A.user, B.worker))}
    assert broker.messages(broker.names.dead) == []


def test_a_refused_result_says_why_in_the_operators_words():
    """The collector's ``result_refused`` line names what was wrong: another taker, a part nobody
    claimed, a part of a whole run, or a whole result of a split run."""
    whole = Binding(A, 1, False, "running")
    split = Binding(None, 1, True, "running", part_takers=frozenset({A}))
    assert refusal_reason(whole, ok=True, part=False) == "another worker took this run"
    assert refusal_reason(whole, ok=True, part=True) == "a part of a run that is not split over load hosts"
    assert refusal_reason(Binding(A, 1, False, "running", part=0), ok=True, part=True) == "another worker took this part"
    assert refusal_reason(Binding(None, 1, False, "pending", part=1), ok=True, part=True) == "no worker claimed this part"
    assert refusal_reason(split, ok=True, part=False) == "no worker sends this run whole"
    assert refusal_reason(split, ok=False, part=False) == "a worker that took no part of this split run"


def test_a_stored_ok_result_is_not_replaced_by_an_edited_copy_from_its_own_taker(broker):
    """The verified attack: a finished run's stored result, edited and published again with the
    taker's own credentials and name, changes nothing; the same message delivered again is harmless."""
    db = FakeDb()
    db.default_taker = None  # no run is claimed until a worker's event says so
    run = planned(db)[0]
    real = result(run).model_copy(update={"worker": A.worker})
    _send(broker, A.user, _event(run, A), real.encode())
    edited = real.model_copy(update={"totals": real.totals.model_copy(update={"transactions": 1})})
    with capture_logs() as logs, collecting(broker, db) as c:
        _drained(broker)
        _send(broker, A.user, real.encode(), edited.encode())
        _drained(broker)
    assert db.results[run.run_id] == real and c.stored == 2
    assert [e["event"] for e in logs if e["event"] in ("result_stored", "result_refused")] == ["result_stored"] * 2


def test_a_claim_of_a_later_attempt_takes_the_run_over(broker):
    """The broker hands a run to worker B after A's connection died (attempt 2): B takes it over, and
    a late result of A's is refused; B's claim of the same attempt would have been refused."""
    db = FakeDb()
    db.default_taker = None  # no run is claimed until a worker's event says so
    run = planned(db)[0]
    _send(broker, A.user, _event(run, A))
    _send(broker, B.user, _event(run, B, attempt=1))
    gone = TakeoverCheck(lambda: BrokerView(()), clock=hurried())  # the broker shows no connection of A
    with capture_logs() as logs, collecting(broker, db, takeover=gone):
        _drained(broker)
        assert db.takers[run.run_id] == (A, 1)
        _send(broker, B.user, _event(run, B, attempt=2))
        _drained(broker)
        assert db.takers[run.run_id] == (B, 2)
        _send(broker, A.user, result(run).model_copy(update={"worker": A.worker}).encode())
        _drained(broker)
    assert run.run_id not in db.results
    assert [e["event"] for e in logs if e["event"] in ("run_claim_refused", "run_taken_over", "result_refused")] == [
        "run_claim_refused", "run_taken_over", "result_refused"]


def test_a_takeover_claim_waiting_for_the_broker_holds_up_only_its_own_run(broker):
    """B claims attempt 2 of a run A bound a moment ago: the collector waits for the broker's listing
    without stopping, so A's result of another run is stored meanwhile, and B's result, sent after its
    claim, is held behind it (unacked) and stored once the broker shows A gone."""
    db = FakeDb()
    db.default_taker = None
    first, other = planned(db)[:2]
    now = [100.0]
    check = TakeoverCheck(lambda: BrokerView(()), clock=lambda: now[0])
    with capture_logs() as logs, collecting(broker, db, takeover=check):
        _send(broker, A.user, _event(first, A))
        wait_until(lambda: db.takers.get(first.run_id) == (A, 1), "A's claim bound")
        _send(broker, B.user, _event(first, B, attempt=2),
              result(first).model_copy(update={"worker": B.worker}).encode())
        _send(broker, A.user, _event(other, A), result(other).model_copy(update={"worker": A.worker}).encode())
        wait_until(lambda: other.run_id in db.results, "the other run's result stored while the claim waits")
        assert first.run_id not in db.results and db.takers[first.run_id] == (A, 1)
        assert broker.unacked() == 2, "the waiting claim and the result behind it"
        now[0] += LISTING_LAG_S
        wait_until(lambda: first.run_id in db.results, "B's result stored after its claim took the run over")
        assert db.takers[first.run_id] == (B, 2) and db.results[first.run_id].worker == B.worker
        _drained(broker)
    events = [(e["event"], e.get("run_id")) for e in logs
              if e["event"] in ("run_takeover_waiting", "run_taken_over", "result_stored")]
    assert events == [("run_takeover_waiting", first.run_id), ("result_stored", other.run_id),
                      ("run_taken_over", first.run_id), ("result_stored", first.run_id)]


def test_a_waiting_claim_still_comes_before_its_runs_later_messages_when_the_db_was_away_between(broker):
    """B's takeover claim waits; the results DB goes away and B's result for the run arrives during the
    outage (held for the DB, not behind the claim); the claim's time passes. Once the DB is back the
    claim is decided first and B's result is stored after it, not refused as coming from a non-taker."""
    db = FakeDb()
    db.default_taker = None
    first, other = planned(db)[:2]
    now = [100.0]
    check = TakeoverCheck(lambda: BrokerView(()), clock=lambda: now[0])
    with capture_logs() as logs, collecting(broker, db, takeover=check) as c:
        _send(broker, A.user, _event(first, A))
        wait_until(lambda: db.takers.get(first.run_id) == (A, 1), "A's claim bound")
        _send(broker, B.user, _event(first, B, attempt=2))
        wait_until(lambda: len(c.waiting) == 1, "B's claim waiting")
        db.down.set()
        _send(broker, A.user, _event(other, A))
        wait_until(lambda: c._down_since is not None, "the collector to find the DB away")
        _send(broker, B.user, result(first).model_copy(update={"worker": B.worker}).encode())
        wait_until(lambda: broker.unacked() == 3, "B's result delivered during the outage")
        now[0] += LISTING_LAG_S + 1
        time.sleep(0.2)  # ticks pass with the claim due and the DB away: nothing is decided
        assert db.takers[first.run_id] == (A, 1) and first.run_id not in db.results
        db.down.clear()
        wait_until(lambda: first.run_id in db.results, "B's result stored once the DB is back")
        _drained(broker)
    assert db.takers[first.run_id] == (B, 2) and db.results[first.run_id].worker == B.worker
    assert db.takers[other.run_id] == (A, 1)
    assert not [e for e in logs if e["event"] == "result_refused"]


def test_a_later_attempt_is_not_taken_over_while_the_broker_shows_the_taker_or_cannot_be_asked(broker):
    """B claims attempt 2 of A's run while A's claiming connection still consumes the runs queue, or
    while the management API does not answer: refused (logged with why), and the run stays A's."""
    db = FakeDb()
    db.default_taker = None
    run = planned(db)[0]
    _send(broker, A.user, _event(run, A))
    alive = BrokerView((RunsConsumer("worker-a", "127.0.0.1:5000 -> 127.0.0.1:5672", 0.0, "ns.runs.default"),))

    def unreachable() -> BrokerView:
        raise BusError("management API http://127.0.0.1:15672: Connection refused")

    for view, why in ((lambda: alive, "worker-a still consumes ns.runs.default"), (unreachable, "could not be asked")):
        with capture_logs() as logs, collecting(broker, db, takeover=TakeoverCheck(view, clock=hurried())):
            _drained(broker)
            _send(broker, B.user, _event(run, B, attempt=2))
            _drained(broker)
        assert db.takers[run.run_id] == (A, 1)
        refused, = [e for e in logs if e["event"] == "run_claim_refused"]
        assert refused["attempt"] == 2 and why in refused["reason"]


def test_a_forged_dead_letter_fails_neither_a_pending_nor_someone_elses_run(broker):
    """A dead letter naming a run nobody claimed, or a run worker A took, sent by worker B, fails
    nothing; the same dead letter from A (its taker gave up) fails A's run."""
    db = FakeDb()
    db.default_taker = None  # no run is claimed until a worker's event says so
    pending, taken = planned(db)[:2]
    _send(broker, A.user, _event(taken, A))
    _send(broker, B.user, pending.encode(), taken.encode(), dead=True)
    with collecting(broker, db):
        _drained(broker)
        assert db.failed == {}
        _send(broker, A.user, taken.encode(), dead=True)
        wait_until(lambda: taken.run_id in db.failed, "the taker's dead letter to fail its run")
    assert pending.run_id not in db.failed


def test_messages_without_a_user_id_are_refused(broker):
    """A result or claim whose publisher set no user_id (RabbitMQ validates it when set) is acked
    and logged, never stored."""
    db = FakeDb()
    db.default_taker = None  # no run is claimed until a worker's event says so
    run = planned(db)[0]
    _send(broker, None, _event(run, A), result(run).encode())
    with capture_logs() as logs, collecting(broker, db):
        _drained(broker)
    assert db.results == {} and db.running == []
    assert [e["event"] for e in logs].count("message_refused") == 2


def test_an_announcement_dated_in_the_future_is_refused(broker):
    """An announcement dated an hour ahead (it would never expire from Prometheus' discovery) is not
    recorded; one dated now is."""
    db = FakeDb()
    db.default_taker = None  # no run is claimed until a worker's event says so
    ahead = WorkerAnnouncement(worker="w9", pool="default", state="up", address="evil.example:9100",
                               at=time.time() + 3600)
    now = WorkerAnnouncement(worker="w1", pool="default", state="up", address="10.0.0.5:9100", at=time.time())
    _send(broker, A.user, ahead.encode(), now.encode())
    with capture_logs() as logs, collecting(broker, db) as c:
        _drained(broker)
    assert list(db.announcements) == ["w1"]
    listed = c.directory.render().decode()
    assert "10.0.0.5:9100" in listed and "evil.example:9100" not in listed
    assert any(e["event"] == "announcement_refused" for e in logs)
