"""The submit transaction: under the submit lock, refuse a duplicate or record the campaign,
then publish all of its runs or none, and take the campaign back out when publishing failed.

It takes the results DB as a CampaignLedger and the broker as a Broker, so the CLI keeps only
arguments and printing, and the unit tests drive it with an in-memory ledger and bus.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

from services.common.bus.broker import Broker
from services.common.errors import SubmitLockBusy
from services.common.messages.runs import RunSpec, TargetDefinition
from services.common.messages.parts import PartOf
from services.common.spec.campaign import CampaignSpec
from services.common.store import Store
from services.common.store.campaigns import SUBMIT_LOCK, SUBMIT_LOCK_WAIT_S, Duplicate


@dataclass(frozen=True)
class Submitted:
    """A campaign recorded and every one of its runs queued."""

    campaign_id: str
    runs: int
    pool: str


@dataclass(frozen=True)
class RolledBack:
    """A submit interrupted (Ctrl-C) and undone: nothing recorded, the campaign taken back out,
    or (its runs already published) the campaign cancelled."""

    campaign_id: str
    recorded: bool
    published: bool


class CampaignLedger(Protocol):
    """What submitting needs of the results DB (StoreLedger is the real one)."""

    def lock_submit(self) -> bool:
        """Take the lock that serialises submits; whether it was granted."""
        ...

    def unlock_submit(self) -> None: ...

    def find_duplicate(self, key: str, explicit: bool) -> Duplicate | None:
        """The earlier campaign submitted with ``key``: any (explicit key) or an active one."""
        ...

    def record(self, campaign_id: str, spec: CampaignSpec, runs: Sequence[RunSpec], key: str | None) -> None:
        """Record the campaign and its pending runs, with its idempotency key (None: no key)."""
        ...

    def delete(self, campaign_id: str) -> None:
        """Take a recorded campaign and its runs back out."""
        ...

    def cancel(self, campaign_id: str) -> None:
        """Mark a recorded campaign and its pending runs cancelled."""
        ...


class StoreLedger(CampaignLedger):
    """The campaign ledger in the results DB."""

    def __init__(self, store: Store, publisher: str | None = None):
        self.store = store
        #: The broker user publishing the runs: a run spec the broker dead-letters carries it.
        self.publisher = publisher

    def lock_submit(self) -> bool:
        return self.store.campaigns.lock_submit()

    def unlock_submit(self) -> None:
        self.store.campaigns.unlock_submit()

    def find_duplicate(self, key: str, explicit: bool) -> Duplicate | None:
        return self.store.campaigns.find_duplicate(key, explicit=explicit)

    def record(self, campaign_id: str, spec: CampaignSpec, runs: Sequence[RunSpec], key: str | None) -> None:
        self.store.campaigns.record(campaign_id, spec, runs, publisher=self.publisher, key=key)

    def delete(self, campaign_id: str) -> None:
        self.store.campaigns.delete(campaign_id)

    def cancel(self, campaign_id: str) -> None:
        self.store.campaigns.cancel(campaign_id, time.time())


def submit(ledger: CampaignLedger, bus: Broker, spec: CampaignSpec, campaign_id: str, runs: Sequence[RunSpec], *,
           key: str, explicit_key: bool, force: bool,
           interrupted: Callable[[], bool] = lambda: False) -> Submitted | Duplicate | RolledBack:
    """Record ``campaign_id`` and publish its ``runs``, or return the earlier campaign this one
    duplicates (nothing recorded or published). BusError when publishing failed: then no run
    is queued and the campaign is not recorded either. ``interrupted`` (a Ctrl-C the caller
    deferred) is looked at between the steps: the campaign is then taken back out, or cancelled
    when its runs were already published, and RolledBack says which. Any other exception on the
    way (a KeyboardInterrupt too) rolls back the same way before it propagates."""
    bus.declare(spec.pool_names)
    # One submit at a time decides "duplicate or not" and records, so two identical submits
    # racing each other still give one campaign.
    if not ledger.lock_submit():
        raise SubmitLockBusy(f"another submit has held the submit lock ({SUBMIT_LOCK} in the results DB) "
                             f"for {SUBMIT_LOCK_WAIT_S} s; nothing was recorded or published: "
                             "submit again once it is done")
    try:
        if interrupted():
            return RolledBack(campaign_id, recorded=False, published=False)
        dup = None if force else ledger.find_duplicate(key, explicit=explicit_key)
        if dup is not None:
            return dup
        # --force without an explicit key records no key, so it never blocks a later submit.
        ledger.record(campaign_id, spec, runs, None if force and not explicit_key else key)
        published = False
        try:
            if interrupted():
                ledger.delete(campaign_id)
                return RolledBack(campaign_id, recorded=True, published=False)
            # Each target once, on the control log, before the runs that name it by digest: a
            # worker has every definition before a run that needs it (services/common/bus/control.py).
            defined = definitions(runs)
            bus.publish_definitions([d.encode() for d in defined.values()])
            # A run split over load hosts goes out as its parts, side by side in the queue, so
            # that as many free workers take them together.
            # Each pool's runs go to its own queue; once one pool's are out, a failure later is a
            # cancel (the collector relays it to the workers), not a silent delete.
            for pool in spec.pool_names:
                mine = [p.order(defined[p.target.name].digest).encode() for r in runs if (r.pool or spec.pool) == pool
                        for p in split_run(r, spec.load_hosts)]
                bus.publish_runs(pool, mine)
                published = True
            if interrupted():
                _cancel(ledger, bus, campaign_id)
                return RolledBack(campaign_id, recorded=True, published=True)
        except BaseException:
            # A BusError published nothing (one transaction); an interruption inside the
            # publish may have, so its runs are cancelled rather than left to run unrecorded.
            with contextlib.suppress(Exception):
                if published:
                    _cancel(ledger, bus, campaign_id)
                else:
                    ledger.delete(campaign_id)
            raise
        return Submitted(campaign_id, len(runs), ",".join(spec.pool_names))
    finally:
        ledger.unlock_submit()


def _cancel(ledger: CampaignLedger, bus: Broker, campaign_id: str) -> None:
    """Cancel a campaign whose runs were published: the collector, seeing it cancelled in the
    results DB, tells the workers, who drop its queued runs unmeasured (services/collector/cancel_relay.py)."""
    ledger.cancel(campaign_id)


def definitions(runs: Sequence[RunSpec]) -> dict[str, TargetDefinition]:
    """The definitions of the targets the runs name, by target name (a campaign's are distinct), in
    the order the runs first name them: each target's digest is computed once."""
    targets = {r.target.name: r.target for r in runs}
    return {name: TargetDefinition.of(t) for name, t in targets.items()}


def split_run(run: RunSpec, load_hosts: int) -> list[RunSpec]:
    """The run specs to publish for ``run``: itself, or its ``load_hosts`` parts."""
    if load_hosts <= 1:
        return [run]
    return [run.model_copy(update={"part": PartOf(index=i, count=load_hosts)}) for i in range(load_hosts)]
