"""Takeover claims waiting for the broker's answer, and what came for their runs after them: held
unacked, in order, while the collector handles every other message. A claim of one part of a run
split over load hosts holds that part's later messages and the run's failures as a whole, not its
other parts'. A broker user may have only a
few deliveries held at once (its claims and what it sent after them), so a worker sending forged
claims holds at most that many of the collector's prefetched deliveries.

The broker is asked on a thread of its own (the management API answers over HTTP, within seconds or
its timeout): the consumer only hands it the claims that are due, one at a time, and picks up the
answers; a claim whose answer does not come within ASK_LIMIT_S is refused."""

from __future__ import annotations

import contextvars
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import Iterator

from services.collector.daemon_asker import DaemonAsker
from services.collector.takeover_check import Decided, TakeoverCheck, Waiting
from services.common.bus.broker import Delivery

#: Deliveries one broker user may have held at once (claims, and messages after them); its next claim
#: is refused (the run then fails at the reaper's grace and is submitted again), its next message for
#: a waiting run dropped. A host's workers share a user: eight of them may take runs over in the same
#: few seconds. The collector prefetches 32 deliveries.
MAX_HELD_PER_USER = 8
#: Seconds an ask may take before its claim is refused: the API's two requests at their timeout
#: (services/common/bus/management.py) and a margin; a hanging ask then holds nothing for good.
ASK_LIMIT_S = 30.0


@dataclass
class _Run:
    """One run's waiting claim (its delivery and where the check stands) and the deliveries after it."""

    step: Waiting
    claim: Delivery
    after: list[Delivery] = field(default_factory=list)
    #: The broker being asked about ``step`` (None: not asked yet, or its answer taken), and when the
    #: asker took the question up (None: still queued behind other claims' questions).
    asking: Future[Decided | Waiting] | None = None
    asked_at: float | None = None


@dataclass(frozen=True)
class Ready:
    """A claim the check has decided, to be handled with that answer, then the run's later deliveries in order."""

    claim: Delivery
    answer: Decided
    after: tuple[Delivery, ...]


class WaitingClaims:
    """The runs whose takeover claim waits for the broker's answer (one waiting claim per run)."""

    def __init__(self, check: TakeoverCheck, *, per_user: int = MAX_HELD_PER_USER, asker: Executor | None = None):
        self.check = check
        self.per_user = per_user
        #: Where the broker is asked (one daemon thread: the claims are asked about one at a time, and
        #: a hanging question does not hold the collector's exit).
        self.asker = asker or DaemonAsker("takeover-check")
        #: By (run id, part index; None: the whole run).
        self._runs: dict[tuple[str, int | None], _Run] = {}

    def _behind(self, run_id: str, part: int | None) -> tuple[str, int | None] | None:
        """The waiting claim a message about ``run_id`` (its part ``part``; None: the whole run) waits behind."""
        if (run_id, part) in self._runs:
            return (run_id, part)
        # A split run's failure as a whole may come from a part's new taker: after any claim of its parts.
        return next((k for k in self._runs if k[0] == run_id), None) if part is None else None

    def holds(self, run_id: str, part: int | None = None) -> bool:
        """Whether a delivery for ``run_id`` (its part ``part``) must wait behind a waiting claim."""
        return self._behind(run_id, part) is not None

    def hold(self, run_id: str, d: Delivery, part: int | None = None) -> bool:
        """Keep ``d`` until the waiting claim it is behind is decided; False (not kept) when its sender
        already has ``per_user`` deliveries held."""
        if self._held_from(d.user_id) >= self.per_user:
            return False
        key = self._behind(run_id, part)
        assert key is not None, "hold only what holds() said must wait"
        self._runs[key].after.append(d)
        return True

    def wait(self, step: Waiting, claim: Delivery) -> Decided | None:
        """Keep ``claim`` until ``step`` is due (None); a refusal instead when its sender already has
        ``per_user`` deliveries held."""
        held = self._held_from(claim.user_id)
        if held >= self.per_user:
            return Decided(f"broker user {step.sender.user} already has {held} messages held while its "
                           "takeover claims wait for the broker's answer")
        self._runs[(step.run_id, step.binding.part)] = _Run(step, claim)
        return None

    def _held_from(self, user: str | None) -> int:
        return sum(d.user_id == user for r in self._runs.values() for d in (r.claim, *r.after))

    def ready(self) -> Iterator[Ready]:
        """The claims whose answer came, each removed with the deliveries held behind it; the claims
        that have come due are handed to the asker."""
        now = self.check.clock()
        for key, run in list(self._runs.items()):
            if run.asking is None and run.step.due <= now:
                run.asking = self._ask(run)
            if run.asking is None:
                continue
            if not run.asking.done():
                if run.asked_at is None or now - run.asked_at <= ASK_LIMIT_S:
                    continue  # queued, or asked within the limit
                run.asking.cancel()
                step: Decided | Waiting = Decided(f"the broker did not answer within {ASK_LIMIT_S:g} s")
            else:
                try:
                    step = run.asking.result()
                except Exception as e:  # a bug of the check refuses the takeover (fail closed), never the consumer
                    step = Decided(f"the takeover check failed: {type(e).__name__}: {e}")
            run.asking = run.asked_at = None
            if isinstance(step, Waiting):
                run.step = step
                continue
            del self._runs[key]
            yield Ready(run.claim, step, tuple(run.after))

    def _ask(self, run: _Run) -> Future[Decided | Waiting]:
        """Hand ``run``'s claim to the asker, with the consumer's log context (its lines name the service)."""
        try:
            return self.asker.submit(contextvars.copy_context().run, self._asking, run)
        except RuntimeError as e:  # the asker was shut down: refused like any unanswered claim
            failed: Future[Decided | Waiting] = Future()
            failed.set_exception(e)
            return failed

    def _asking(self, run: _Run) -> Decided | Waiting:
        """On the asker's thread: the limit counts from here, not from the queue behind other questions."""
        run.asked_at = self.check.clock()
        return self.check.resume(run.step)

    def clear(self) -> None:
        """Forget everything held (the bus connection closed: the broker delivers it all again); an
        answer still coming is dropped with its claim."""
        for run in self._runs.values():
            if run.asking is not None:
                run.asking.cancel()
        self._runs.clear()

    def close(self) -> None:
        """Forget everything and stop the asker (the collector stops)."""
        self.clear()
        self.asker.shutdown(wait=False, cancel_futures=True)

    def __len__(self) -> int:
        return len(self._runs)
