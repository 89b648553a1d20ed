"""The arithmetic of the parts' barrier (spec ``load_hosts``): clock offsets from ping/pong, who
has joined, when to start, who went silent. Pure: times are passed in, never read here; the
worker's services/worker/parts/session.py does the I/O.

Clock offsets are NTP's: a worker sends a ping at t0 (its clock), the coordinator receives it at
t1 and answers at t2 (its clock), the worker receives the pong at t3. The coordinator's clock
minus the worker's is ((t1 - t0) + (t2 - t3)) / 2, off by at most half the round trip
(t3 - t0) - (t2 - t1); the sample with the shortest round trip is kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping


@dataclass(frozen=True)
class ClockSample:
    """Coordinator's clock minus this worker's clock, and the round trip it was measured over."""

    offset_s: float
    rtt_s: float


def clock_sample(t0: float, t1: float, t2: float, t3: float) -> ClockSample:
    """One ping/pong: t0 sent and t3 received on the worker's clock, t1 received and t2 answered
    on the coordinator's."""
    return ClockSample(offset_s=((t1 - t0) + (t2 - t3)) / 2, rtt_s=max(0.0, (t3 - t0) - (t2 - t1)))


def best_sample(samples: Iterable[ClockSample]) -> ClockSample | None:
    """The sample with the shortest round trip (its offset has the tightest bound); None if none."""
    return min(samples, key=lambda s: s.rtt_s, default=None)


def local_instant(coordinator_instant: float, offset_s: float) -> float:
    """An instant on the coordinator's clock, on this worker's clock."""
    return coordinator_instant - offset_s


@dataclass
class Joined:
    """The coordinator's view of who is ready: the newest token per part index, and when (the
    coordinator's clock) it was last heard. A worker repeats its "ready" every second, so a
    token not heard for ``fresh_s`` belongs to a worker that died or gave up."""

    count: int
    fresh_s: float
    tokens: dict[int, str] = field(default_factory=dict)
    heard: dict[int, float] = field(default_factory=dict)

    def ready(self, index: int, token: str, now: float) -> None:
        self.tokens[index] = token
        self.heard[index] = now

    def leave(self, index: int, token: str) -> None:
        """A part's worker gave up: forget it unless a newer take of that part joined meanwhile."""
        if self.tokens.get(index) == token:
            self.tokens.pop(index)
            self.heard.pop(index, None)

    def group(self, now: float) -> dict[int, str] | None:
        """Every part's token when all ``count`` parts are ready and fresh; None otherwise."""
        live = {i: t for i, t in self.tokens.items() if now - self.heard.get(i, -1e18) <= self.fresh_s}
        return dict(sorted(live.items())) if sorted(live) == list(range(self.count)) else None

    def joined(self, now: float) -> int:
        return sum(1 for i in self.tokens if now - self.heard.get(i, -1e18) <= self.fresh_s)


def silent(last_heard: Mapping[int, float], now: float, silence_s: float) -> list[int]:
    """The group members not heard from for more than ``silence_s`` seconds (own clock)."""
    return sorted(i for i, t in last_heard.items() if now - t > silence_s)


def join_timeout_s(base_s: float, warmup: float, duration: float) -> float:
    """How long a part waits for the others: ``base_s``, plus one run's length, since a pool with
    enough workers frees one at the latest when a run of the pool ends."""
    return base_s + warmup + duration
