"""Telling the workers of the campaigns cancelled in the results DB. Only the collector publishes
to the control exchange: a submitter's broker user may not, so the one way to stop a campaign's
runs is a cancel the results DB took, where its procedures check the submitter or operator."""

from __future__ import annotations

import time
from typing import Protocol

from services.common import logs
from services.common.bus.broker import Broker
from services.common.bus.control import ControlMessage
from services.common.errors import BusError

log = logs.get(__name__)

#: How often the results DB is asked for cancelled campaigns: a cancel reaches the workers
#: within about this long of `scheduler cancel`.
CHECK_EVERY_S = 1.0
#: Campaigns created longer ago than this are not looked at: the control log keeps a cancel this
#: long (control.CONTROL_LOG_MAX_AGE, 30 days), so a worker connecting later would not learn of an
#: older one either.
WINDOW_S = 30 * 86400.0
#: After the broker refused a cancel (the collector's user lacks the grant: deploy/ensure-services
#: rabbitmq of an earlier version), the next try; each refusal closes the channel, so the collector
#: reconnects once per try rather than at every tick.
REFUSED_RETRY_S = 60.0


class CancelledCampaigns(Protocol):
    def cancelled_since(self, created_after: float) -> list[str]: ...


class CancelRelay:
    """Publishes one cancel per campaign the results DB has cancelled; after a restart it
    publishes them again (a worker obeys a repeated cancel as the first)."""

    def __init__(self, *, check_every_s: float = CHECK_EVERY_S, window_s: float = WINDOW_S):
        self.check_every_s = check_every_s
        self.window_s = window_s
        self._next_check = 0.0
        #: Campaigns whose cancel the broker confirmed.
        self.relayed: set[str] = set()

    def tick(self, bus: Broker, campaigns: CancelledCampaigns) -> None:
        """Publish the cancels not yet sent, when a check is due; BusError leaves the rest for
        the next connection, StoreError for when the results DB answers again."""
        now = time.monotonic()
        if now < self._next_check:
            return
        self._next_check = now + self.check_every_s
        for campaign_id in campaigns.cancelled_since(time.time() - self.window_s):
            if campaign_id in self.relayed:
                continue
            try:
                bus.publish_control(ControlMessage(action="cancel", campaign_id=campaign_id))
            except BusError as e:
                if "ACCESS_REFUSED" in str(e):
                    self._next_check = now + REFUSED_RETRY_S
                    log.error("cancel_relay_refused", campaign_id=campaign_id, error=str(e), retry_in_s=REFUSED_RETRY_S,
                              hint="the collector's broker user may not publish cancels: run deploy/ensure-services "
                                   "rabbitmq (docs/operations.md); the workers obey no cancel until then")
                raise
            self.relayed.add(campaign_id)
            log.info("cancel_relayed", campaign_id=campaign_id)
