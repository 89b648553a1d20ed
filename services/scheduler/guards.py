"""What the scheduler undoes: cancelling a campaign. (What it refuses before publishing is in
services/scheduler/preflight.py.)"""

from __future__ import annotations

import time

from services.common import logs
from services.common.bus.broker import BusFactory
from services.common.config import Settings
from services.common.bus.control import ControlMessage
from services.common.store import Store

log = logs.get("scheduler")


def cancel_campaign(settings: Settings, ref: str, connect: BusFactory) -> tuple[str, int] | None:
    """Cancel a campaign by id or name: pending runs are dropped in the results DB, and every
    worker is told to stop the campaign's active run and drop its queued runs (workers that
    connect later too, from the control log). None when there is no such campaign."""
    with Store(settings) as store:
        c = store.campaigns.get(ref)
        if c is None:
            return None
        dropped = store.campaigns.cancel(c.campaign_id, time.time())
    with connect("benchfleet scheduler cancel") as bus:
        # Confirmed, and appended to the control log that a worker connecting later replays
        # before it takes a run: a cancel the log did not get is an error, not a silent loss.
        bus.publish_control(ControlMessage(action="cancel", campaign_id=c.campaign_id))
    log.info("campaign_cancelled", campaign_id=c.campaign_id, pending_dropped=dropped)
    return c.campaign_id, dropped
