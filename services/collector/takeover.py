"""Whether a later attempt's claim from another broker user may take a run over: only once the broker
shows no connection of the taker's user, consuming a runs queue, that was open when it claimed the run
(pure: decided from the broker's view, which services/common/bus/management.py reads).

The management API names no message: it cannot say which consumer holds which run. What it can say is
whether the taker's user still has a connection that was open at its claim; while one is, the broker
has not handed the run to anyone (a delivery goes back only when its channel or connection ends).
"""

from __future__ import annotations

from dataclasses import dataclass

from services.common.bus.management import BrokerView
from services.common.store.takers import Binding, Taker

#: Seconds a worker's clock may run apart from the broker's. A claim's time is the worker's (the
#: run's started_at), a connection's opening the broker's: a connection opened up to this long after
#: the claim still counts as open at it. An announcement dated further ahead of the collector's clock
#: would never expire from Prometheus' discovery, and is refused (collector/consumer.py).
MAX_CLOCK_SKEW_S = 60.0
#: Seconds the management API may take to list a new connection or consumer (its statistics interval,
#: 5 s by default, and a margin): a claim younger than this is judged only once it has passed.
LISTING_LAG_S = 6.0


@dataclass(frozen=True)
class Takeover:
    """Whether a claim may take a run over, and why (logged with the claim)."""

    allowed: bool
    reason: str
    #: Refused because the broker showed the taker's connection (asking again later may tell otherwise).
    taker_seen: bool = False


def judge_takeover(binding: Binding, sender: Taker, view: BrokerView) -> Takeover:
    """Whether ``sender``'s claim of a later attempt may take over the run bound as ``binding``,
    given the consumers of the runs queues as the broker shows them."""
    taker = binding.taker
    if taker is None:
        return Takeover(True, "the run has no taker")
    if taker.user == sender.user:
        # The broker tells connections apart by user only: one user's workers are one to it.
        return Takeover(True, f"the same broker user {sender.user}: the broker cannot tell its connections apart")
    mine = [c for c in view.consumers if c.user == taker.user]
    at = binding.claimed_at
    live = [c for c in mine if at is None or c.connected_at <= at + MAX_CLOCK_SKEW_S]
    if live:
        c = live[0]
        return Takeover(False, f"broker user {taker.user} still consumes {c.queue} on connection {c.connection!r}, "
                               "open since before it claimed the run", taker_seen=True)
    if mine:
        return Takeover(True, f"broker user {taker.user} consumes only on connections opened after its claim")
    return Takeover(True, f"no connection of broker user {taker.user} consumes a runs queue")


def wait_before_asking(claimed_seen_ago_s: float | None) -> float:
    """Seconds to wait before asking the broker about a taker whose claim the collector saw
    ``claimed_seen_ago_s`` seconds ago (None: not in this collector's memory, so long enough)."""
    if claimed_seen_ago_s is None:
        return 0.0
    return max(0.0, LISTING_LAG_S - claimed_seen_ago_s)
