"""The submit transaction against the in-memory bus and an in-memory campaign ledger: a campaign
is recorded and all its runs queued, or a duplicate is refused, or nothing is left behind."""

from __future__ import annotations

from typing import Callable, Sequence

import pytest

from services.common.store.campaigns import Duplicate
from services.common.bus.control import read_control
from services.common.errors import BusError, SubmitLockBusy
from services.common.messages.runs import RunSpec
from services.common.messages.codec import decode
from services.common.spec.campaign import CampaignSpec
from services.common.bus.stub import StubBroker, StubBus
from services.scheduler.submit import RolledBack, Submitted, submit

from tests.unit.consumer_fixtures import SPEC, runs


class FakeLedger:
    """Campaigns in a dict, with the submit lock as a flag that must be free between submits."""

    def __init__(self, *, lock_free: bool = True) -> None:
        self.campaigns: dict[str, tuple[str, str | None, int]] = {}  # id -> (state, key, runs)
        self.locked = False
        #: False: another submit holds the lock (GET_LOCK timed out).
        self.lock_free = lock_free
        self.unlocks = 0

    def lock_submit(self) -> bool:
        assert not self.locked, "the submit lock was not released by the previous submit"
        self.locked = self.lock_free
        return self.lock_free

    def unlock_submit(self) -> None:
        assert self.locked, "a lock this submit did not get must not be released"
        self.locked = False
        self.unlocks += 1

    def find_duplicate(self, key: str, explicit: bool) -> Duplicate | None:
        assert self.locked, "duplicates must be looked up under the submit lock"
        for cid, (state, k, _) in reversed(self.campaigns.items()):
            if k == key and (explicit or state in ("submitted", "running")):
                return Duplicate(cid, state)
        return None

    def record(self, campaign_id: str, spec: CampaignSpec, runs: Sequence[RunSpec], key: str | None) -> None:
        assert self.locked, "campaigns are recorded under the submit lock"
        self.campaigns[campaign_id] = ("submitted", key, len(runs))

    def delete(self, campaign_id: str) -> None:
        del self.campaigns[campaign_id]

    def cancel(self, campaign_id: str) -> None:
        _, _, n = self.campaigns[campaign_id]
        self.campaigns[campaign_id] = ("cancelled", None, n)


@pytest.fixture
def broker() -> StubBroker:
    return StubBroker()


def queued(broker: StubBroker) -> list[str]:
    return [decode(d.body).run_id for d in broker.messages(broker.names.runs_queue("default"))]


def go(broker: StubBroker, ledger: FakeLedger, campaign_id: str, *, key: str = "spec:abc", explicit_key: bool = False,
       force: bool = False, interrupted: Callable[[], bool] = lambda: False,
       bus_class: type[StubBus] = StubBus) -> Submitted | Duplicate | RolledBack:
    with bus_class(broker, "scheduler") as bus:
        return submit(ledger, bus, SPEC, campaign_id, runs(campaign_id), key=key, explicit_key=explicit_key, force=force,
                      interrupted=interrupted)


def test_a_campaign_is_recorded_and_every_run_queued(broker):
    """Submitting records the campaign with its key and queues its runs in plan order."""
    ledger = FakeLedger()
    outcome = go(broker, ledger, "c1")
    assert outcome == Submitted("c1", 8, "default")
    assert ledger.campaigns == {"c1": ("submitted", "spec:abc", 8)}
    assert queued(broker) == [r.run_id for r in runs("c1")]
    assert not ledger.locked


def test_the_same_spec_again_is_refused_while_its_campaign_runs(broker):
    """A second submit of the same spec names the first campaign and publishes nothing."""
    ledger = FakeLedger()
    go(broker, ledger, "c1")
    assert go(broker, ledger, "c2") == Duplicate("c1", "submitted")
    assert list(ledger.campaigns) == ["c1"] and len(queued(broker)) == 8
    assert not ledger.locked


def test_force_submits_again_without_a_key(broker):
    """--force publishes a second campaign and records no key, so it never blocks a later submit."""
    ledger = FakeLedger()
    go(broker, ledger, "c1")
    assert go(broker, ledger, "c2", force=True) == Submitted("c2", 8, "default")
    assert ledger.campaigns["c2"] == ("submitted", None, 8)
    assert len(queued(broker)) == 16


def test_an_explicit_key_is_refused_even_after_its_campaign_ended(broker):
    """An explicit idempotency key refuses any earlier campaign with that key, finished or not."""
    ledger = FakeLedger()
    go(broker, ledger, "c1", key="nightly-42", explicit_key=True)
    ledger.campaigns["c1"] = ("finished", "nightly-42", 8)
    assert go(broker, ledger, "c2", key="nightly-42", explicit_key=True) == Duplicate("c1", "finished")
    assert len(queued(broker)) == 8


def test_a_broker_failure_while_publishing_leaves_no_campaign_and_no_run(broker):
    """The connection drops at the fifth of eight runs: BusError, no run queued, the campaign
    taken back out, and the submit lock free for the next submit."""
    ledger = FakeLedger()
    broker.lose_connections(after_publishes=5)
    with pytest.raises(BusError, match="none were published"):
        go(broker, ledger, "c1")
    assert queued(broker) == []
    assert ledger.campaigns == {}
    assert not ledger.locked
    assert go(broker, ledger, "c2") == Submitted("c2", 8, "default")


def test_a_submit_that_did_not_get_the_lock_is_refused_and_does_nothing(broker):
    """Another submit holds the lock past the wait: refused with a message saying so, nothing
    recorded or queued, and the other submit's lock is not released."""
    ledger = FakeLedger(lock_free=False)
    with pytest.raises(SubmitLockBusy, match="another submit has held the submit lock .* nothing was recorded"):
        go(broker, ledger, "c1")
    assert ledger.campaigns == {} and queued(broker) == [] and ledger.unlocks == 0


def control_messages(broker: StubBroker) -> list:
    return [read_control(m.body, "test") for m in broker._queues[broker.names.control_log].log
            if m.exchange == broker.names.control]


@pytest.mark.parametrize("pressed_at", [1, 2], ids=["before-recording", "before-publishing"])
def test_ctrl_c_before_publishing_leaves_nothing(broker, pressed_at):
    """Ctrl-C (deferred by the CLI) seen before the runs are published: nothing is left, neither
    the campaign nor a run, and the lock is free."""
    ledger = FakeLedger()
    looks = iter(range(1, 10))
    outcome = go(broker, ledger, "c1", interrupted=lambda: next(looks) >= pressed_at)
    assert outcome == RolledBack("c1", recorded=pressed_at == 2, published=False)
    assert ledger.campaigns == {} and queued(broker) == [] and not ledger.locked


def test_ctrl_c_during_publishing_cancels_the_published_runs(broker):
    """Ctrl-C pressed while the runs were being published: they were, so the campaign is
    cancelled in the results DB instead of running unrecorded; the collector tells the workers
    (tests/unit/test_cancel_relay.py), the scheduler's broker user publishes no cancel."""
    ledger = FakeLedger()
    looks = iter([False, False, True])
    outcome = go(broker, ledger, "c1", interrupted=lambda: next(looks))
    assert outcome == RolledBack("c1", recorded=True, published=True)
    assert ledger.campaigns["c1"][0] == "cancelled"
    assert broker.names.control_log not in broker._queues or control_messages(broker) == []
    assert not ledger.locked


def test_an_interrupt_raised_inside_the_publish_takes_the_campaign_back_out(broker):
    """A KeyboardInterrupt that reaches the publish itself (no deferral) rolls the transaction
    back and takes the campaign out before it propagates."""

    class InterruptedBus(StubBus):
        def publish_runs(self, pool: str, bodies: list[bytes]) -> None:
            raise KeyboardInterrupt

    ledger = FakeLedger()
    with pytest.raises(KeyboardInterrupt):
        go(broker, ledger, "c1", bus_class=InterruptedBus)
    assert ledger.campaigns == {} and queued(broker) == [] and not ledger.locked
