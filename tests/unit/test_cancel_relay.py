"""The collector tells the workers of the campaigns the results DB cancelled, once each, and
again after a restart (a worker obeys a repeated cancel as the first)."""

from __future__ import annotations

import pytest

from services.collector.cancel_relay import REFUSED_RETRY_S, CancelRelay
from services.common.bus.control import ControlMessage
from services.common.bus.stub import StubBroker, StubBus
from services.common.errors import BusError


class Campaigns:
    def __init__(self) -> None:
        self.cancelled: list[str] = []
        self.asked_after: list[float] = []

    def cancelled_since(self, created_after: float) -> list[str]:
        self.asked_after.append(created_after)
        return list(self.cancelled)


def test_each_cancelled_campaign_reaches_the_workers_once_per_collector():
    broker, campaigns = StubBroker(), Campaigns()
    heard: list[ControlMessage] = []
    with broker.bus("worker") as worker, broker.bus("collector") as collector:
        relay = CancelRelay(check_every_s=0.0)
        relay.tick(collector, campaigns)
        campaigns.cancelled = ["c1"]
        relay.tick(collector, campaigns)
        relay.tick(collector, campaigns)
        campaigns.cancelled = ["c1", "c2"]
        relay.tick(collector, campaigns)
        CancelRelay(check_every_s=0.0).tick(collector, campaigns)  # a restarted collector
        worker.replay_control_log("w1", heard.append, should_stop=lambda: False, timeout_s=5)
    assert [m.campaign_id for m in heard] == ["c1", "c2", "c1", "c2"]


def test_checks_are_spaced_and_look_back_as_far_as_the_control_log_keeps():
    broker, campaigns = StubBroker(), Campaigns()
    with broker.bus("collector") as collector:
        relay = CancelRelay(check_every_s=3600.0, window_s=100.0)
        relay.tick(collector, campaigns)
        relay.tick(collector, campaigns)
    assert len(campaigns.asked_after) == 1


def test_a_refused_cancel_is_tried_again_a_minute_later_not_at_every_tick(monkeypatch):
    """A collector whose broker user may not publish cancels (grants of an earlier version): the
    refusal reaches the collector (it reconnects), and the relay waits before trying again."""

    class Refusing(StubBus):
        tries = 0

        def publish_control(self, message: ControlMessage) -> None:
            Refusing.tries += 1
            raise BusError("publishing to 'benchfleet.control': ChannelClosedByBroker: (403, 'ACCESS_REFUSED')")

    campaigns = Campaigns()
    campaigns.cancelled = ["c1"]
    relay, clock = CancelRelay(check_every_s=1.0), [1000.0]
    monkeypatch.setattr("services.collector.cancel_relay.time.monotonic", lambda: clock[0])
    bus = Refusing(StubBroker())
    with pytest.raises(BusError, match="ACCESS_REFUSED"):
        relay.tick(bus, campaigns)
    clock[0] += 30
    relay.tick(bus, campaigns)
    assert Refusing.tries == 1 and relay.relayed == set()
    clock[0] += REFUSED_RETRY_S
    with pytest.raises(BusError):
        relay.tick(bus, campaigns)
    assert Refusing.tries == 2
