"""The collector's question to the broker before a run changes hands: asks the management API for the
runs queues' consumers and applies collector/takeover.py's rule. When the broker cannot be asked, the
takeover is refused (fail closed, logged): docs/security.md says why.

The check never sleeps, and never asks the broker while the consumer judges a message: a takeover
claim is returned as ``Waiting``, and once it is due the collector asks on a thread of its own
(collector/waiting_claims.py), handling other messages meanwhile.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable, Protocol

from services.collector.takeover import LISTING_LAG_S, Takeover, judge_takeover, wait_before_asking
from services.common import logs
from services.common.bus.management import BrokerView
from services.common.errors import BusError
from services.common.messages.events import RunEvent
from services.common.store.takers import Binding, Claim, Taker, judge_claim

log = logs.get(__name__)

#: Seconds before asking once more when the taker still looks alive: the broker hands a run back as
#: it closes the taker's connection, which may reach the API's listing a moment later.
RECHECK_S = 1.0


class Bindings(Protocol):
    """Where a run's binding is read (the collector's RunRecords)."""

    def binding(self, run_id: str, part: int | None = None) -> Binding | None: ...


def _unreachable() -> BrokerView:
    raise BusError("no management API to ask (the collector was given none)")


@dataclass(frozen=True)
class Decided:
    """The check's answer: why the claim may not take its run over (None: no takeover, or one the broker allows)."""

    refusal: str | None


@dataclass(frozen=True)
class Waiting:
    """A takeover claim to judge once ``due`` (by the check's clock) has come."""

    run_id: str
    binding: Binding
    sender: Taker
    due: float
    #: Asked once already and the taker looked alive: the next answer is final.
    rechecked: bool = False


class TakeoverCheck:
    """Decides, with the broker's view, whether a worker's claim that would take a run over may."""

    def __init__(self, view: Callable[[], BrokerView] = _unreachable, *, clock: Callable[[], float] = time.monotonic):
        self.view = view
        self.clock = clock
        #: Runs (and parts of split runs) this collector bound lately (-> when, by ``clock``): the API
        #: may not list their taker's connection yet.
        self._seen: dict[tuple[str, int | None], float] = {}

    def claimed(self, run_id: str, part: int | None = None) -> None:
        """Note that this collector just bound run ``run_id`` (or its part ``part``) to a taker."""
        now = self.clock()
        self._seen = {r: t for r, t in self._seen.items() if now - t < LISTING_LAG_S}
        self._seen[(run_id, part)] = now

    def begin(self, runs: Bindings, event: RunEvent, sender: Taker) -> Decided | Waiting:
        """Judge ``sender``'s event at once when it is no takeover by another broker user; otherwise
        say when to ask the broker."""
        binding = runs.binding(event.run_id, event.part)
        if (binding is None or event.state != "running"
                or judge_claim(binding, sender, event.attempt, event.part) is not Claim.RETAKE):
            return Decided(None)
        if binding.taker is None or binding.taker.user == sender.user:
            return self._answer(judge_takeover(binding, sender, BrokerView(())))
        seen = self._seen.get((event.run_id, event.part))
        wait = wait_before_asking(None if seen is None else self.clock() - seen)
        return Waiting(event.run_id, binding, sender, due=self.clock() + wait)

    def resume(self, step: Waiting) -> Decided | Waiting:
        """Ask the broker about a waiting claim whose time has come: a taker that still looks alive is
        asked about once more, ``RECHECK_S`` later."""
        try:
            view = self.view()
        except Exception as e:  # fail closed on any answer the check cannot read, not only a lost API
            why = str(e) if isinstance(e, BusError) else f"{type(e).__name__}: {e}"
            log.error("run_takeover_unverified", run_id=step.run_id, sender=str(step.sender), error=why)
            return Decided(f"the broker could not be asked whether the taker lives: {why}")
        verdict = judge_takeover(step.binding, step.sender, view)
        if verdict.taker_seen and not step.rechecked:
            return replace(step, due=self.clock() + RECHECK_S, rechecked=True)
        return self._answer(verdict)

    @staticmethod
    def _answer(verdict: Takeover) -> Decided:
        return Decided(None if verdict.allowed else verdict.reason)
