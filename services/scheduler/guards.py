"""What the scheduler refuses or undoes: runs too long for the broker's ack timeout, a
campaign submitted twice, and cancelling a campaign."""

from __future__ import annotations

import time

from services.common import campaigns, logs
from services.common.broker import BusFactory
from services.common.config import Settings
from services.common.control import ControlMessage
from services.common.durations import format_duration
from services.common.spec import CampaignSpec
from services.common.specfile import FieldError, SpecError
from services.common.store import Store
from services.scheduler import plan

log = logs.get("scheduler")


def check_run_length(spec: CampaignSpec, settings: Settings, source: str) -> None:
    """Refuse a spec whose run (warm-up + measurement + overhead) would outlast max_run_s: the
    broker closes a consumer whose delivery stays unacked past its consumer_timeout, and the
    run would be delivered again."""
    run_s = spec.warmup + spec.duration + plan.RUN_OVERHEAD_S
    if run_s > settings.max_run_s:
        raise SpecError(source, [FieldError(
            "duration",
            f"a run of {format_duration(round(run_s))} (warmup + duration) exceeds the longest allowed run "
            f"{format_duration(settings.max_run_s)} (BENCHFLEET_MAX_RUN_S; keep it below RabbitMQ's consumer_timeout)",
        )])


def cancel_campaign(settings: Settings, ref: str, connect: BusFactory) -> tuple[str, int] | None:
    """Cancel a campaign by id or name: pending runs are dropped in the results DB, and every
    worker is told to stop the campaign's active run and drop its queued runs (workers that
    connect later too, from the control log). None when there is no such campaign."""
    with Store(settings) as store:
        c = store.campaign(ref)
        if c is None:
            return None
        dropped = campaigns.cancel(store, c.campaign_id, time.time())
    with connect("benchfleet scheduler cancel") as bus:
        # Confirmed, and appended to the control log that a worker connecting later replays
        # before it takes a run: a cancel the log did not get is an error, not a silent loss.
        bus.publish_control(ControlMessage(action="cancel", campaign_id=c.campaign_id))
    log.info("campaign_cancelled", campaign_id=c.campaign_id, pending_dropped=dropped)
    return c.campaign_id, dropped
