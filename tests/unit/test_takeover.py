"""A later attempt's claim from another broker user takes a run over only when the broker shows no
connection of the taker's user that was open at its claim; when the broker cannot be asked, the
takeover is refused (pure rule on literal broker views; the check with a scripted view and clock)."""

from __future__ import annotations

from concurrent.futures import Executor, Future

from services.collector.takeover import LISTING_LAG_S, MAX_CLOCK_SKEW_S, judge_takeover, wait_before_asking
from services.collector.takeover_check import RECHECK_S, Decided, TakeoverCheck, Waiting
from services.collector.waiting_claims import ASK_LIMIT_S, WaitingClaims
from services.common.bus.broker import Delivery
from services.common.bus.management import BrokerView, RunsConsumer
from services.common.errors import BusError
from services.common.messages.events import RunEvent
from services.common.store.takers import Binding, Taker

from tests.unit.consumer_fixtures import wait_until

A = Taker("worker-a", "host-a")
B = Taker("worker-b", "host-b")
CLAIMED = 1_000.0
TAKEN = Binding(A, 1, False, "running", claimed_at=CLAIMED)


def _consumer(user: str, connected_at: float, name: str = "10.0.0.1:5000 -> 10.0.0.9:5672") -> RunsConsumer:
    return RunsConsumer(user=user, connection=name, connected_at=connected_at, queue="benchfleet.runs.default")


def test_the_taker_alive_on_its_claiming_connection_keeps_the_run():
    view = BrokerView((_consumer("worker-b", 10.0), _consumer("worker-a", CLAIMED - 5)))
    verdict = judge_takeover(TAKEN, B, view)
    assert not verdict.allowed and verdict.taker_seen
    assert "worker-a still consumes benchfleet.runs.default" in verdict.reason


def test_a_connection_opened_within_the_clock_skew_after_the_claim_counts_as_the_claiming_one():
    view = BrokerView((_consumer("worker-a", CLAIMED + MAX_CLOCK_SKEW_S - 1),))
    assert not judge_takeover(TAKEN, B, view).allowed


def test_the_takers_connection_gone_lets_another_user_take_the_run_over():
    assert judge_takeover(TAKEN, B, BrokerView((_consumer("worker-b", 10.0),))).allowed
    restarted = judge_takeover(TAKEN, B, BrokerView((_consumer("worker-a", CLAIMED + MAX_CLOCK_SKEW_S + 1),)))
    assert restarted.allowed and "opened after its claim" in restarted.reason


def test_the_same_user_is_not_asked_about_and_an_unstarted_run_is_judged_by_any_connection():
    assert judge_takeover(TAKEN, Taker("worker-a", "host-c"), BrokerView((_consumer("worker-a", 0.0),))).allowed
    unstarted = Binding(A, 1, False, "running", claimed_at=None)
    assert not judge_takeover(unstarted, B, BrokerView((_consumer("worker-a", 1e12),))).allowed


def test_a_claim_the_api_may_not_list_yet_is_waited_for():
    assert wait_before_asking(None) == 0.0
    assert wait_before_asking(0.0) == LISTING_LAG_S
    assert wait_before_asking(LISTING_LAG_S + 1) == 0.0


class _Runs:
    def __init__(self, binding: Binding):
        self.value = binding

    def binding(self, run_id: str, part: int | None = None) -> Binding:
        return self.value


def _event(attempt: int, state: str = "running") -> RunEvent:
    return RunEvent(run_id="c.r1", campaign_id="c", state=state, worker=B.worker, attempt=attempt, at=CLAIMED + 100)


def test_the_check_asks_again_once_fails_closed_and_waits_for_a_fresh_claim():
    alive = BrokerView((_consumer("worker-a", CLAIMED),))
    views = [alive, BrokerView(())]
    asked, now = [], [50.0]

    def view() -> BrokerView:
        asked.append(now[0])
        return views.pop(0)

    check = TakeoverCheck(view, clock=lambda: now[0])
    runs = _Runs(TAKEN)
    assert check.begin(runs, _event(1), B) == Decided(None), "the same attempt is no takeover: the store refuses it"
    assert check.begin(runs, _event(2, "measuring"), B) == Decided(None) and not asked
    # Due at once (this collector did not bind the run lately), asked only when resumed: the taker
    # still shows, so once more later.
    step = check.begin(runs, _event(2), B)
    assert step == Waiting("c.r1", TAKEN, B, due=50.0) and not asked
    step = check.resume(step)
    assert step == Waiting("c.r1", TAKEN, B, due=50.0 + RECHECK_S, rechecked=True) and asked == [50.0]
    now[0] = step.due
    assert check.resume(step) == Decided(None), "the broker closed the taker's connection a moment later"
    # A claim this collector bound 2 s ago: the API may not list its connection yet, so the check waits.
    check.claimed("c.r1")
    now[0] += 2.0
    step = check.begin(runs, _event(2), B)
    assert isinstance(step, Waiting) and step.due == now[0] + LISTING_LAG_S - 2.0 and len(asked) == 2
    views.extend([alive, alive])
    now[0] = step.due
    step = check.resume(step)
    assert isinstance(step, Waiting) and step.rechecked and step.due == now[0] + RECHECK_S
    now[0] = step.due
    refused = check.resume(step)
    assert isinstance(refused, Decided) and "worker-a still consumes" in (refused.refusal or "")

    def down() -> BrokerView:
        raise BusError("management API http://127.0.0.1:15672/api/consumers/%2F: Connection refused")

    def garbled() -> BrokerView:
        raise KeyError("connected_at")

    def judged(view) -> Decided:
        step = TakeoverCheck(view).begin(runs, _event(2), B)
        assert isinstance(step, Waiting)
        answer = TakeoverCheck(view).resume(step)
        assert isinstance(answer, Decided)
        return answer

    assert "could not be asked" in (judged(down).refusal or "") and "Connection refused" in (judged(down).refusal or "")
    assert "KeyError" in (judged(garbled).refusal or ""), "an answer the check cannot read refuses too"
    assert judged(TakeoverCheck().view).refusal is not None, "no management API given: no takeover"


class _Inline(Executor):
    """Asks the broker at once, in the caller's thread: what the collector's asker thread would answer."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        f: Future = Future()
        try:
            f.set_result(fn(*args, **kwargs))
        except Exception as e:
            f.set_exception(e)
        return f


def test_a_sender_keeps_only_a_few_deliveries_held_and_a_decided_claim_brings_its_runs_later_ones():
    now = [0.0]
    alive = [True]
    check = TakeoverCheck(lambda: BrokerView((_consumer("worker-a", CLAIMED),) if alive[0] else ()),
                          clock=lambda: now[0])
    claims = WaitingClaims(check, per_user=3, asker=_Inline())
    C = Taker("worker-c", "host-c")

    def delivery(tag: int, user: str = B.user) -> Delivery:
        return Delivery(body=b"{}", delivery_tag=tag, redelivered=False, user_id=user)

    assert claims.wait(Waiting("c.r1", TAKEN, B, due=5.0), delivery(1)) is None
    assert claims.wait(Waiting("c.r2", TAKEN, B, due=5.0), delivery(2)) is None
    assert claims.hold("c.r1", delivery(10)), "B's later message for its run"
    assert claims.hold("c.r1", delivery(11, A.user)), "A's message for the run counts against A, not B"
    third = claims.wait(Waiting("c.r3", TAKEN, B, due=5.0), delivery(3))
    assert third is not None and "worker-b already has 3 messages held" in (third.refusal or "")
    assert not claims.hold("c.r2", delivery(12)), "B holds 3 already"
    assert claims.wait(Waiting("c.r4", TAKEN, C, due=9.0), delivery(4, C.user)) is None
    assert claims.holds("c.r1") and not claims.holds("c.r3")
    assert list(claims.ready()) == [], "nothing is due before its time"
    now[0] = 5.0
    assert list(claims.ready()) == [], "the taker still shows: asked once more, RECHECK_S later"
    alive[0] = False
    now[0] = 5.0 + RECHECK_S
    ready = list(claims.ready())
    assert [(r.claim.delivery_tag, r.answer, [d.delivery_tag for d in r.after]) for r in ready] == [
        (1, Decided(None), [10, 11]), (2, Decided(None), [])]
    assert len(claims) == 1 and not claims.holds("c.r1")
    assert claims.wait(Waiting("c.r5", TAKEN, B, due=9.0), delivery(5)) is None, "B's slots are free again"
    claims.clear()
    assert len(claims) == 0


def test_a_parts_waiting_claim_holds_that_parts_messages_and_the_runs_failures_not_its_partners():
    """A takeover claim of part 1 of a split run: part 1's later messages and a failure of the run as a
    whole wait behind it; part 0's result is handled meanwhile (its worker's quota untouched)."""
    now = [0.0]
    claims = WaitingClaims(TakeoverCheck(lambda: BrokerView(()), clock=lambda: now[0]), asker=_Inline())
    part1 = Binding(A, 1, False, "running", claimed_at=CLAIMED, part=1)

    def delivery(tag: int) -> Delivery:
        return Delivery(body=b"{}", delivery_tag=tag, redelivered=False, user_id=B.user)

    assert claims.wait(Waiting("c.r1", part1, B, due=1.0), delivery(1)) is None
    assert claims.holds("c.r1", 1) and claims.holds("c.r1", None) and not claims.holds("c.r1", 0)
    assert not claims.holds("c.r2", None), "another run"
    assert claims.hold("c.r1", delivery(2), 1) and claims.hold("c.r1", delivery(3), None)
    now[0] = 1.0
    assert [(r.claim.delivery_tag, [d.delivery_tag for d in r.after]) for r in claims.ready()] == [(1, [2, 3])]


def test_the_management_api_is_the_brokers_host_unless_set():
    from services.common.bus.management import ManagementApi, api_url
    from services.common.config import Settings

    broker = Settings(amqp_url="amqp://coll:s3cret@rabbit.example:5671/bench%2Ffleet")
    assert api_url(broker) == "http://rabbit.example:15672"
    api = ManagementApi(broker)
    assert api.vhost == "bench/fleet" and api.base == "http://rabbit.example:15672"
    assert api_url(Settings(amqp_management_url="https://mq.example/rabbit/")) == "https://mq.example/rabbit"
    assert ManagementApi(Settings()).vhost == "/"


def test_the_broker_is_asked_off_the_consumers_thread_and_an_answer_that_never_comes_refuses():
    """The API answers slowly: ready() returns at once while it is asked, on another thread, and the
    answer is picked up on a later call; an answer dropped by clear() never comes back; an ask that
    outlasts ASK_LIMIT_S refuses its claim."""
    import threading
    import time

    answer = threading.Event()
    asked_on: list[str] = []
    now = [10.0]

    def slow_view() -> BrokerView:
        asked_on.append(threading.current_thread().name)
        answer.wait(10)
        return BrokerView(())

    def eventually(what: str) -> list:
        got: list = []

        def answered() -> bool:
            got.extend(claims.ready())
            return bool(got)

        wait_until(answered, what, timeout=10)
        return got

    claims = WaitingClaims(TakeoverCheck(slow_view, clock=lambda: now[0]))
    try:
        delivery = Delivery(body=b"{}", delivery_tag=1, redelivered=False, user_id=B.user)
        assert claims.wait(Waiting("c.r1", TAKEN, B, due=0.0), delivery) is None
        t0 = time.monotonic()
        assert list(claims.ready()) == [] and time.monotonic() - t0 < 1.0, "the consumer does not wait for the API"
        answer.set()
        assert [(r.claim.delivery_tag, r.answer) for r in eventually("the answer")] == [(1, Decided(None))]
        assert asked_on and asked_on[0] != threading.current_thread().name
        answer.clear()
        assert claims.wait(Waiting("c.r2", TAKEN, B, due=0.0), delivery) is None
        assert list(claims.ready()) == []
        wait_until(lambda: len(asked_on) == 2, "the second claim to be asked about", timeout=10)
        claims.clear()
        answer.set()
        time.sleep(0.1)  # the dropped ask ends
        assert list(claims.ready()) == [] and len(claims) == 0, "a dropped claim's answer is not handed out"
        answer.clear()
        assert claims.wait(Waiting("c.r3", TAKEN, B, due=now[0]), delivery) is None
        assert list(claims.ready()) == []
        wait_until(lambda: len(asked_on) == 3, "the third claim to be asked about", timeout=10)
        now[0] += ASK_LIMIT_S
        assert list(claims.ready()) == [], "within the limit, counted from when the asker took it up"
        now[0] += 1
        assert claims.wait(Waiting("c.r4", TAKEN, Taker("worker-c", "host-c"), due=now[0]), delivery) is None
        (late,) = claims.ready()
        assert late.answer == Decided(f"the broker did not answer within {ASK_LIMIT_S:g} s")
        now[0] += 10 * ASK_LIMIT_S
        assert list(claims.ready()) == [], "a question still queued behind a hanging one is not refused"
        answer.set()
        assert [r.answer for r in eventually("the queued claim's answer")] == [Decided(None)]
    finally:
        claims.close()


def test_a_check_that_fails_refuses_the_takeover_and_the_consumer_goes_on():
    class Broken(TakeoverCheck):
        def resume(self, step: Waiting) -> Decided | Waiting:
            raise RuntimeError("a bug in the rule")

    claims = WaitingClaims(Broken(lambda: BrokerView(()), clock=lambda: 10.0), asker=_Inline())
    delivery = Delivery(body=b"{}", delivery_tag=7, redelivered=False, user_id=B.user)
    assert claims.wait(Waiting("c.r1", TAKEN, B, due=0.0), delivery) is None
    (ready,) = claims.ready()
    assert ready.claim.delivery_tag == 7 and "RuntimeError: a bug in the rule" in (ready.answer.refusal or "")
    assert len(claims) == 0

