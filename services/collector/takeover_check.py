"""The collector's question to the broker before a run changes hands: asks the management API for the
runs queues' consumers and applies collector/takeover.py's rule. When the broker cannot be asked, the
takeover is refused (fail closed, logged): docs/security.md says why."""

from __future__ import annotations

import time
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

    def binding(self, run_id: str) -> Binding | None: ...


def _unreachable() -> BrokerView:
    raise BusError("no management API to ask (the collector was given none)")


class TakeoverCheck:
    """Decides, with the broker's view, whether a worker's claim that would take a run over may."""

    def __init__(self, view: Callable[[], BrokerView] = _unreachable, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        self.view = view
        self.clock = clock
        self.sleep = sleep
        #: Runs this collector bound lately (run id -> when, by ``clock``): the API may not list
        #: their taker's connection yet.
        self._seen: dict[str, float] = {}

    def claimed(self, run_id: str) -> None:
        """Note that this collector just bound run ``run_id`` to a taker."""
        now = self.clock()
        self._seen = {r: t for r, t in self._seen.items() if now - t < LISTING_LAG_S}
        self._seen[run_id] = now

    def refusal(self, runs: Bindings, event: RunEvent, sender: Taker) -> str | None:
        """Why ``sender``'s event may not take its run over; None when it is no takeover or may."""
        binding = runs.binding(event.run_id)
        if binding is None or event.state != "running" or judge_claim(binding, sender, event.attempt) is not Claim.RETAKE:
            return None
        verdict = self._judge(event.run_id, binding, sender)
        if verdict.taker_seen:
            self.sleep(RECHECK_S)
            verdict = self._judge(event.run_id, binding, sender)
        return None if verdict.allowed else verdict.reason

    def _judge(self, run_id: str, binding: Binding, sender: Taker) -> Takeover:
        if binding.taker is not None and binding.taker.user != sender.user:
            seen = self._seen.get(run_id)
            self.sleep(wait_before_asking(None if seen is None else self.clock() - seen))
            try:
                view = self.view()
            except BusError as e:
                log.error("run_takeover_unverified", run_id=run_id, sender=str(sender), error=str(e))
                return Takeover(False, f"the broker could not be asked whether the taker lives: {e}")
        else:
            view = BrokerView(())
        return judge_takeover(binding, sender, view)
