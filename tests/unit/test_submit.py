"""The submit transaction against the in-memory bus and an in-memory campaign ledger: a campaign
is recorded and all its runs queued, or a duplicate is refused, or nothing is left behind."""

from __future__ import annotations

from typing import Sequence

import pytest

from services.common.campaigns import Duplicate
from services.common.errors import BusError
from services.common.messages import RunSpec, decode
from services.common.spec import CampaignSpec
from services.common.stub_bus import StubBroker
from services.scheduler.submit import Submitted, submit

from tests.unit.consumer_fixtures import SPEC, runs


class FakeLedger:
    """Campaigns in a dict, with the submit lock as a flag that must be free between submits."""

    def __init__(self) -> None:
        self.campaigns: dict[str, tuple[str, str | None, int]] = {}  # id -> (state, key, runs)
        self.locked = False

    def lock_submit(self) -> bool:
        assert not self.locked, "the submit lock was not released by the previous submit"
        self.locked = True
        return True

    def unlock_submit(self) -> None:
        self.locked = False

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


@pytest.fixture
def broker() -> StubBroker:
    return StubBroker()


def queued(broker: StubBroker) -> list[str]:
    return [decode(d.body).run_id for d in broker.messages(broker.names.runs_queue("default"))]


def go(broker: StubBroker, ledger: FakeLedger, campaign_id: str, *, key: str = "spec:abc", explicit_key: bool = False,
       force: bool = False) -> Submitted | Duplicate:
    with broker.bus("scheduler") as bus:
        return submit(ledger, bus, SPEC, campaign_id, runs(campaign_id), key=key, explicit_key=explicit_key, force=force)


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
