"""The target definitions a worker has heard on the control log, by digest: a run order names its
target by one (services/common/bus/control.py)."""

from __future__ import annotations

import collections
from typing import Callable

from services.common import logs
from services.common.bus.broker import Broker
from services.common.bus.control import ControlMessage
from services.common.errors import DecodeError
from services.common.messages.codec import decode
from services.common.messages.runs import RunOrder, RunSpec, TargetDefinition

log = logs.get(__name__)

#: Target definitions a worker keeps (the most recently heard); one it no longer holds is read
#: from the control log again when a run names it.
KNOWN_TARGETS = 4096


class KnownTargets:
    """The most recent ``limit`` target definitions, by digest."""

    def __init__(self, limit: int = KNOWN_TARGETS):
        self.limit = limit
        self._by_digest: collections.OrderedDict[str, TargetDefinition] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._by_digest)

    def learn(self, body: bytes) -> TargetDefinition | None:
        """A definition's body, as the control log or the worker's private queue delivered it."""
        try:
            d = decode(body, expect=(TargetDefinition,))
        except DecodeError as e:
            log.error("target_definition_undecodable", reason=str(e))
            return None
        self._remember(d)
        return d

    def _remember(self, d: TargetDefinition) -> None:
        self._by_digest[d.digest] = d
        self._by_digest.move_to_end(d.digest)
        while len(self._by_digest) > self.limit:
            self._by_digest.popitem(last=False)

    def recall(self, order: RunOrder, bus: Broker, reader: str, on_control: Callable[[ControlMessage], None],
               *, should_stop: Callable[[], bool], timeout_s: float) -> None:
        """Replay the control log (outside the broker's callbacks) for the target ``order`` names,
        kept even if later definitions of the log would push it out."""
        found: list[TargetDefinition] = []

        def learn(body: bytes) -> None:
            d = self.learn(body)
            if d is not None and d.digest == order.target_digest:
                found.append(d)

        bus.replay_control_log(reader, on_control, on_definition=learn, should_stop=should_stop, timeout_s=timeout_s)
        if found:
            self._remember(found[-1])

    def knows(self, order: RunOrder) -> bool:
        return order.target_digest in self._by_digest

    def run_of(self, order: RunOrder) -> RunSpec | str:
        """The whole run ``order`` names, or why there is none."""
        known = self._by_digest.get(order.target_digest)
        if known is None:
            return (f"run order {order.run_id} names target {order.target_name!r} by digest {order.target_digest}, "
                    "which the control log does not hold (the scheduler publishes each campaign's targets there "
                    "before its runs; the log keeps them for its max age)")
        try:
            return order.with_target(known)
        except ValueError as e:  # the digest names a target of another name than the run's cell
            return f"run order {order.run_id}: {e}"
