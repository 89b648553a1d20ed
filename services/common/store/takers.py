"""Who took a run, and whether a message about the run may speak for it: the rules that bind a run
to the worker that claimed it first (pure; store/runs.py keeps the binding in the runs table).

A worker's broker user publishes every message with ``user_id``, which RabbitMQ checks against the
connection's user, so the user of a claim or result is known for sure; the worker name is what
the message says. A run is bound to both at its first claim (the worker's "running" event, or its
result when the event was lost); later claims, results and dead letters of the run from anyone
else are refused. Only a claim of a later attempt (the broker handed the run to another worker
after its taker's connection died) takes the run over; from another broker user, only once the
broker shows the taker's connection gone (collector/takeover.py).

A run split over load hosts is published as one run spec per part, each delivered (and redelivered)
on its own: each part is bound to its own taker by the same rules (its events name the part), and
only that taker's part result is kept. The run's own binding knows its parts' takers: a failure of
the run as a whole (a part that gave up before its group started) or a dead letter of it is taken
only from one of them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


#: A taker's worker name as kept (runs.taker_worker is VARCHAR(128), as a result's worker).
MAX_WORKER = 128


@dataclass(frozen=True)
class Taker:
    """Who sent a message about a run: the broker user RabbitMQ validated, and the worker it names."""

    user: str
    worker: str

    @classmethod
    def of(cls, user: str, worker: str) -> "Taker":
        """The taker as the runs table keeps it (a worker name cut to MAX_WORKER characters)."""
        return cls(user[:MAX_WORKER], worker[:MAX_WORKER])

    def __str__(self) -> str:
        return f"{self.worker} (broker user {self.user})"


@dataclass(frozen=True)
class Binding:
    """A run's binding as stored (or one part's of a split run: ``part``): its taker (None until
    claimed), the attempt it claimed, whether the run is split over load hosts (its parts are bound
    one by one), and the run's state."""

    taker: Taker | None
    attempt: int
    split: bool
    state: str
    #: The broker user that published the campaign's runs (None: recorded before it was kept).
    publisher: str | None = None
    #: When its taker claimed it, by the taker's clock (the run's started_at; None: not started).
    claimed_at: float | None = None
    #: The part of a split run this binding is of (None: the whole run).
    part: int | None = None
    #: A split run's parts' takers so far (empty for a whole run and for a part's binding).
    part_takers: frozenset[Taker] = field(default_factory=frozenset)


@dataclass(frozen=True)
class DeadLetterFrom:
    """Who a dead letter speaks for: the broker user that sent it ("" when not known), and whether
    it holds the run's spec (a worker or the broker gave up on the run) or its result."""

    user: str
    run_spec: bool


class Claim(enum.Enum):
    """What a message about a run may do."""

    #: The run has no taker yet: the sender becomes it.
    BIND = "bind"
    #: The sender is the run's taker.
    TAKER = "taker"
    #: A later attempt's claim from another worker: the run was handed over, the sender takes it.
    RETAKE = "retake"
    #: Someone else's run: refused, and logged.
    REFUSE = "refuse"


def judge_claim(binding: Binding, sender: Taker, attempt: int, part: int | None = None) -> Claim:
    """What a worker's "running" event for a run (or for its part ``part``) bound as ``binding`` may do."""
    if binding.split or (part is None) != (binding.part is None):
        # A split run is claimed part by part, a whole run as a whole.
        return Claim.REFUSE
    if binding.taker is None:
        return Claim.BIND
    if binding.taker == sender:
        return Claim.TAKER
    return Claim.RETAKE if attempt > binding.attempt else Claim.REFUSE


def judge_result(binding: Binding, sender: Taker, *, ok: bool, part: bool) -> Claim:
    """What a worker's result (or a part of one, judged on that part's binding) for a run bound as
    ``binding`` may do. A split run's parts are merged by the collector, so a whole result of such a
    run comes from a worker only as a failure (a part that gave up before its group started), and
    only from one of its parts' takers."""
    if binding.split:
        return Claim.TAKER if not ok and not part and sender in binding.part_takers else Claim.REFUSE
    if part != (binding.part is not None):
        return Claim.REFUSE
    if binding.taker is None:
        return Claim.BIND
    return Claim.TAKER if binding.taker == sender else Claim.REFUSE


def refusal_reason(binding: Binding, *, ok: bool, part: bool) -> str:
    """Why judge_result refused a result (or a part, ``part``) for a run bound as ``binding``, in
    the words of the collector's ``result_refused`` log line."""
    if part:
        if binding.part is None:
            return "a part of a run that is not split over load hosts"
        return "another worker took this part" if binding.taker is not None else "no worker claimed this part"
    if binding.split:
        return "no worker sends this run whole" if ok else "a worker that took no part of this split run"
    return "another worker took this run"


def may_fail(binding: Binding, sender: DeadLetterFrom) -> bool:
    """Whether a dead letter from ``sender`` may fail the run: the run's taker's, or a run spec the
    broker dead-lettered (it keeps the publisher's user_id: the scheduler's, which no worker can
    send). A run never claimed has no other dead letter to fail it: a worker claims a run before
    anything can make it dead-letter the run's spec."""
    if not sender.user:
        return False
    if sender.run_spec and binding.publisher is not None and sender.user == binding.publisher:
        return True
    if binding.split:
        # Several workers took it: a dead letter of any of its parts' takers may end it.
        return binding.state == "running" and any(t.user == sender.user for t in binding.part_takers)
    return binding.taker is not None and sender.user == binding.taker.user
