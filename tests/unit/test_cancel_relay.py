"""The collector tells the workers of the campaigns the results DB cancelled, once each, and
again after a restart (a worker obeys a repeated cancel as the first)."""

from __future__ import annotations

from services.collector.cancel_relay import CancelRelay
from services.common.bus.control import ControlMessage
from services.common.bus.stub import StubBroker


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
