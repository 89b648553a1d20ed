"""Takeover claims waiting for the broker's answer, and what came for their runs after them: held
unacked, in order, while the collector handles every other message. A sender may keep only a few
claims waiting at once, so a worker sending forged claims cannot fill the collector's prefetch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from services.collector.takeover_check import Decided, TakeoverCheck, Waiting
from services.common.bus.broker import Delivery

#: Claims one broker user may have waiting at once; the next is refused at once (the run then fails
#: at the reaper's grace and is submitted again). A host's workers share a user: eight of them may
#: take runs over in the same few seconds.
MAX_WAITING_PER_USER = 8


@dataclass
class _Run:
    """One run's waiting claim (its delivery and where the check stands) and the deliveries after it."""

    step: Waiting
    claim: Delivery
    after: list[Delivery] = field(default_factory=list)


@dataclass(frozen=True)
class Ready:
    """A claim the check has decided, to be handled with that answer, then the run's later deliveries in order."""

    claim: Delivery
    answer: Decided
    after: tuple[Delivery, ...]


class WaitingClaims:
    """The runs whose takeover claim waits for the broker's answer (one waiting claim per run)."""

    def __init__(self, check: TakeoverCheck, *, per_user: int = MAX_WAITING_PER_USER):
        self.check = check
        self.per_user = per_user
        self._runs: dict[str, _Run] = {}

    def holds(self, run_id: str) -> bool:
        """Whether a delivery for ``run_id`` must wait behind the run's waiting claim."""
        return run_id in self._runs

    def hold(self, run_id: str, d: Delivery) -> None:
        """Keep ``d`` until the waiting claim of its run is decided."""
        self._runs[run_id].after.append(d)

    def wait(self, step: Waiting, claim: Delivery) -> Decided | None:
        """Keep ``claim`` until ``step`` is due (None); a refusal instead when its sender already has
        ``per_user`` claims waiting."""
        waiting = sum(1 for r in self._runs.values() if r.step.sender.user == step.sender.user)
        if waiting >= self.per_user:
            return Decided(f"broker user {step.sender.user} already has {waiting} takeover claims waiting "
                           "for the broker's answer")
        self._runs[step.run_id] = _Run(step, claim)
        return None

    def ready(self) -> Iterator[Ready]:
        """The claims whose answer came, each removed with the deliveries held behind it."""
        now = self.check.clock()
        for run_id, run in list(self._runs.items()):
            if run.step.due > now:
                continue
            step = self.check.resume(run.step)
            if isinstance(step, Waiting):
                run.step = step
                continue
            del self._runs[run_id]
            yield Ready(run.claim, step, tuple(run.after))

    def clear(self) -> None:
        """Forget everything held (the bus connection closed: the broker delivers it all again)."""
        self._runs.clear()

    def __len__(self) -> int:
        return len(self._runs)
