"""What the scheduler undoes: cancelling a campaign. (What it refuses before publishing is in
services/scheduler/preflight.py.)"""

from __future__ import annotations

import time
from dataclasses import dataclass

from services.common import logs
from services.common.bus.broker import BusFactory
from services.common.config import Settings
from services.common.errors import BusError
from services.common.store import Store

log = logs.get("scheduler")


#: How long `scheduler cancel` waits for the collector to tell the workers.
TOLD_WITHIN_S = 15.0


@dataclass(frozen=True)
class Cancelled:
    """A cancel the results DB took: how many pending runs it dropped, and whether the collector's
    cancel reached the control log (every worker obeys it from there) while the scheduler waited."""

    campaign_id: str
    dropped: int
    told: bool


def cancel_campaign(settings: Settings, ref: str, connect: BusFactory | None = None,
                    told_within_s: float = TOLD_WITHIN_S) -> Cancelled | None:
    """Cancel a campaign by id or name in the results DB (its procedures refuse another
    submitter's campaign): pending runs are dropped there, and the collector then tells every
    worker to stop the campaign's active run and drop its queued runs. With ``connect``, wait
    until the cancel is in the control log. None when there is no such campaign."""
    # No broker message from here: a submitter's broker user may not publish to the control
    # exchange, or it could stop any campaign's runs whatever the results DB says.
    with Store(settings) as store:
        c = store.campaigns.get(ref)
        if c is None:
            return None
        dropped = store.campaigns.cancel(c.campaign_id, time.time())
    log.info("campaign_cancelled", campaign_id=c.campaign_id, pending_dropped=dropped)
    return Cancelled(c.campaign_id, dropped, connect is not None and _told(connect, c.campaign_id, told_within_s))


def _told(connect: BusFactory, campaign_id: str, within_s: float) -> bool:
    """Whether the collector put the campaign's cancel in the control log within ``within_s``:
    from then on every worker, connected or connecting later, obeys it."""
    deadline = time.monotonic() + within_s
    seen: set[str] = set()
    try:
        with connect("benchfleet scheduler cancel") as bus:
            while True:
                bus.replay_control_log("scheduler-cancel", lambda m: seen.add(m.campaign_id),
                                       should_stop=lambda: False, timeout_s=max(1.0, deadline - time.monotonic()))
                if campaign_id in seen:
                    return True
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.5)
    except BusError as e:  # the cancel stands in the results DB; only the look failed
        log.warning("control_log_unreadable", campaign_id=campaign_id, error=str(e))
        return False
