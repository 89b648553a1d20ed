"""What the scheduler undoes: cancelling a campaign. (What it refuses before publishing is in
services/scheduler/preflight.py.)"""

from __future__ import annotations

import time

from services.common import logs
from services.common.config import Settings
from services.common.store import Store

log = logs.get("scheduler")


def cancel_campaign(settings: Settings, ref: str) -> tuple[str, int] | None:
    """Cancel a campaign by id or name in the results DB (its procedures refuse another
    submitter's campaign): pending runs are dropped there, and the collector then tells every
    worker to stop the campaign's active run and drop its queued runs. None when there is no
    such campaign."""
    # No broker message from here: a submitter's broker user may not publish to the control
    # exchange, or it could stop any campaign's runs whatever the results DB says.
    with Store(settings) as store:
        c = store.campaigns.get(ref)
        if c is None:
            return None
        dropped = store.campaigns.cancel(c.campaign_id, time.time())
    log.info("campaign_cancelled", campaign_id=c.campaign_id, pending_dropped=dropped)
    return c.campaign_id, dropped
