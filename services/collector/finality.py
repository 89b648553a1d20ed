"""Every run gets a final state: the collector fails the run of each dead letter (a run spec or
result that will never be stored) with the reason, and reaps runs still marked running long
after their warm-up and duration (a worker that vanished without its run being taken again).

Dead letters reach the collector through the dead.watch queue, a copy of the dead queue, so a
collector that was down fails those runs when it is back; the dead queue keeps them for people.
A late result still replaces a reaped run's failure (the store's upsert decides).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol

from services.common import logs
from services.common.bus.broker import QUEUE_HEADER, SENDER_HEADER, Broker, Delivery
from services.common.errors import StoreError
from services.common.messages.base import RESULT_SCHEMA, RUN_SCHEMA, RUN_SCHEMA_V2
from services.common.messages.runs import Cell, RunOrder, RunSpec
from services.common.messages.results import RunResult
from services.common.messages.codec import decode
from services.common.store.takers import DeadLetterFrom

if TYPE_CHECKING:
    from services.common.store.finality import OverdueRun

log = logs.get(__name__)

#: Dead letters handled per tick (one DB write each); the rest wait for the next tick.
DEAD_LETTERS_PER_TICK = 50
#: Seconds between two looks for overdue runs.
REAP_EVERY_S = 10.0


class RunFinality(Protocol):
    """What the finaliser needs of the results DB's run states (services.common.store's Runs is one)."""

    def fail(self, run_id: str, campaign_id: str, reason: str, cell: Cell | None = None, *,
             by: DeadLetterFrom | None = None) -> bool: ...

    def overdue(self, now: float, grace_s: float) -> "list[OverdueRun]": ...


class FinalityStore(Protocol):
    """What the finaliser needs of the results DB (services.common.store.Store is one)."""

    @property
    def runs(self) -> RunFinality: ...


@dataclass(frozen=True)
class RunFailure:
    """The run a dead letter was about, and why it will never have a result."""

    run_id: str
    campaign_id: str
    cell: Cell
    reason: str
    #: The dead letter holds the run's spec (else its result).
    run_spec: bool = False


def _text(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def dead_letter_reason(headers: Mapping[str, object]) -> str:
    """Why a message was dead-lettered: the reason our consumers give, or RabbitMQ's own."""
    reason = headers.get("x-benchfleet-reason")
    if reason:
        return _text(reason)
    why = headers.get("x-first-death-reason")
    if why:
        queue = _text(headers.get("x-first-death-queue") or headers.get(QUEUE_HEADER) or "its queue")
        if _text(why) == "delivery_limit":
            return f"RabbitMQ dead-lettered it from {queue}: delivered too often without an ack (a consumer crashing on it)"
        return f"RabbitMQ dead-lettered it from {queue}: {_text(why)}"
    return "dead-lettered without a reason"


def sender_of(d: Delivery, own_user: str) -> str:
    """The broker user a dead letter speaks for: its publisher's (RabbitMQ checked it), or, for a
    message the collector parked itself, the user that sent that message ("" when not known)."""
    if d.user_id is None:
        return ""
    sender = d.headers.get(SENDER_HEADER) if d.user_id == own_user else None
    return _text(sender) if sender else d.user_id


def failure_of(d: Delivery) -> RunFailure | None:
    """The run a dead letter names, or None when the body names no run (garbage, a run event).
    A body refused for one bad field (a NaN, a negative count) still names its run: that run
    will never have this result, so it is named by its ids and cell alone."""
    named = _named_run(d.body)
    if named is None:
        return None
    what, run_id, campaign_id, cell = named
    return RunFailure(run_id, campaign_id, cell, f"{what} was dead-lettered: {dead_letter_reason(d.headers)}",
                      run_spec=what == "its run spec")


def _named_run(body: bytes) -> tuple[str, str, str, Cell] | None:
    try:
        msg = decode(body, expect=(RunSpec, RunOrder, RunResult))
        what = "its result" if isinstance(msg, RunResult) else "its run spec"
        return what, msg.run_id, msg.campaign_id, msg.cell
    except Exception:  # any undecodable body (even one that breaks the decoder): look closer below
        pass
    try:
        doc = json.loads(body)
        what = {RUN_SCHEMA: "its run spec", RUN_SCHEMA_V2: "its run spec", RESULT_SCHEMA: "its result"}[doc["schema"]]
        run_id, campaign_id = doc["run_id"], doc["campaign_id"]
        if not isinstance(run_id, str) or not isinstance(campaign_id, str):
            return None
        return what, run_id, campaign_id, Cell.model_validate(doc["cell"])
    except Exception:  # not JSON, too deep, no such fields, not a cell: it names no run
        return None


class Finaliser:
    """Reads the dead-letter copies and reaps overdue runs, a little on every consumer tick."""

    def __init__(self, *, grace_s: float, clock: Callable[[], float] = time.time,
                 after_fail: "Callable[[Any, str, str | None], None] | None" = None):
        self.grace_s = grace_s
        self.clock = clock
        #: Runs after a run was failed, with the store, its campaign id and workload (None: not
        #: known): the per-cell statistics count failed runs too.
        self.after_fail = after_fail
        self._next_reap = 0.0
        self.failed = 0
        self.reaped = 0

    def tick(self, bus: Broker, store: FinalityStore, *, results_held: bool = False) -> None:
        """Read dead letters, and reap overdue runs unless the collector holds results it has not
        handled yet (``results_held``: they may be those runs' own)."""
        self.read_dead_letters(bus, store)
        if not results_held:
            self.reap(bus, store)

    def read_dead_letters(self, bus: Broker, store: FinalityStore) -> None:
        for _ in range(DEAD_LETTERS_PER_TICK):
            d = bus.get(bus.names.dead_watch)
            if d is None:
                return
            f = failure_of(d)
            try:
                # Only a run of that campaign and cell is failed, and only for the run's taker: a
                # forged or garbled body fails nothing (store/takers.py may_fail).
                if f is not None and store.runs.fail(f.run_id, f.campaign_id, f.reason, f.cell,
                                                     by=DeadLetterFrom(sender_of(d, bus.user), f.run_spec)):
                    self.failed += 1
                    log.warning("run_failed_dead_lettered", campaign_id=f.campaign_id, run_id=f.run_id,
                                reason=f.reason)
                    self._failed_run(store, f.campaign_id, f.cell.workload)
            except StoreError:
                # Given back at once: left unacked, it would wait for a broker reconnect that may never come.
                bus.nack(d.delivery_tag, requeue=True)
                raise
            bus.ack(d.delivery_tag)

    def reap(self, bus: Broker, store: FinalityStore) -> None:
        now = self.clock()
        if now < self._next_reap:
            return
        self._next_reap = now + REAP_EVERY_S
        # Results waiting in the queue may be these runs' own (a collector back from a pause).
        if bus.queue_depth(bus.names.results) > 0:
            return
        for r in store.runs.overdue(now, self.grace_s):
            reason = (f"no result {round(now - r.started_at)} s after it started on {r.worker or 'a worker'}"
                      f" (allowed {round(r.allowed_s)} s: its start, warm-up, duration and {round(self.grace_s)} s grace)"
                      ": its worker is gone")
            if store.runs.fail(r.run_id, r.campaign_id, reason):
                self.reaped += 1
                log.warning("run_reaped", campaign_id=r.campaign_id, run_id=r.run_id, worker=r.worker, reason=reason)
                self._failed_run(store, r.campaign_id, r.workload)

    def _failed_run(self, store: FinalityStore, campaign_id: str, workload: str | None) -> None:
        """Run the after_fail hook. What it derives can be computed again (`collector stats`), so
        its errors are logged only: the run's failure is written, and a DB gone away shows on the next tick."""
        if self.after_fail is None:
            return
        try:
            self.after_fail(store, campaign_id, workload)
        except Exception as e:  # the failure is stored; derived statistics must not undo or repeat it
            log.warning("after_fail_failed", campaign_id=campaign_id, error=f"{type(e).__name__}: {e}")
