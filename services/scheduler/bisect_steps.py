"""The walk of `scheduler bisect`, pure: an ordered list of builds, the first known good and the last
known slow, the next midpoint to measure, each step's verdict narrowing the range, an undecided step
measured again with more repetitions up to a cap, and the path that was walked.

It assumes one step change: every build before the first slow one is as fast as the good build,
every build from it on is slower by at least the effect. A series that is not so still gives an
answer, which is then the edge of one of its steps, not necessarily the first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal, Sequence

#: What one step says of its midpoint build against the good one.
StepDecision = Literal["slower", "not slower", "undecided"]
#: Where a bisect stands: still walking, the first slow build found, or stopped undecided at the cap.
BisectState = Literal["walking", "found", "undecided"]


@dataclass(frozen=True)
class CellInterval:
    """One cell's q/s of the midpoint build over the good one's, with its adjusted interval
    (NaN bounds: nothing to compare, e.g. every run failed)."""

    cell: str
    ratio: float
    low: float
    high: float
    level: float

    def describe(self) -> str:
        if math.isnan(self.low) or math.isnan(self.high):
            return f"{self.cell}: no figures to compare"
        return (f"{self.cell}: {self.ratio:.3f} ({(self.ratio - 1) * 100:+.1f}% q/s, {self.level * 100:.3g}% interval "
                f"{(self.low - 1) * 100:+.1f}% to {(self.high - 1) * 100:+.1f}%)")


def step_decision(cells: Sequence[CellInterval], effect: float) -> StepDecision:
    """``slower`` when a cell's whole interval lies at least ``effect`` (a fraction) below the good
    build; ``not slower`` when every cell's interval lies above that; else ``undecided`` (an
    interval straddling the effect, or a cell without figures): never a guess either way."""
    if not 0 < effect < 1:
        raise ValueError(f"effect: must be a fraction between 0 and 1, got {effect}")
    if not cells:
        return "undecided"
    edge = 1 - effect
    if any(c.high <= edge for c in cells):
        return "slower"
    if all(c.low > edge for c in cells):
        return "not slower"
    return "undecided"


@dataclass(frozen=True)
class Probe:
    """The next measurement: the midpoint build beside the good one, with this many repetitions."""

    good: str
    build: str
    #: The midpoint's position in the build list (0 is the good build).
    position: int
    repeat: int


@dataclass(frozen=True)
class Step:
    """One measured step: the midpoint, the campaign that measured it, and what it said."""

    number: int
    build: str
    position: int
    repeat: int
    campaign_id: str
    decision: StepDecision
    cells: tuple[CellInterval, ...]


@dataclass(frozen=True)
class Bisect:
    """A bisect over ``builds`` (the good one first, the slow one last), at a stated ``effect``."""

    builds: tuple[str, ...]
    effect: float
    first_repeat: int
    max_repeat: int
    #: Positions of the last build known good and the first known slow.
    good_at: int = 0
    slow_at: int = -1
    steps: tuple[Step, ...] = ()

    @staticmethod
    def start(builds: Sequence[str], effect: float, first_repeat: int, max_repeat: int) -> Bisect:
        """A bisect of ``builds``; ValueError naming the argument that cannot be bisected."""
        builds = tuple(builds)
        if len(builds) < 2:
            raise ValueError(f"builds: at least the good and the slow build are needed, got {len(builds)}")
        if len(set(builds)) != len(builds):
            raise ValueError(f"builds: {sorted({b for b in builds if builds.count(b) > 1})} listed twice")
        if not 0 < effect < 1:
            raise ValueError(f"effect: must be a fraction between 0 and 1, got {effect}")
        if not 2 <= first_repeat <= max_repeat:
            raise ValueError(f"repeat: must be at least 2 and at most max_repeat {max_repeat}, got {first_repeat}")
        return Bisect(builds, effect, first_repeat, max_repeat, 0, len(builds) - 1)

    @property
    def state(self) -> BisectState:
        if self.slow_at - self.good_at <= 1:
            return "found"
        last = self.steps[-1] if self.steps else None
        if last is not None and last.decision == "undecided" and last.repeat >= self.max_repeat:
            return "undecided"
        return "walking"

    @property
    def decided_steps(self) -> int:
        return sum(1 for s in self.steps if s.decision != "undecided")

    def next_probe(self) -> Probe | None:
        """What to measure next; None once the first slow build is found or the cap left a step undecided."""
        if self.state != "walking":
            return None
        mid = (self.good_at + self.slow_at) // 2
        last = self.steps[-1] if self.steps else None
        repeat = self.first_repeat
        if last is not None and last.decision == "undecided" and last.position == mid:
            # More repetitions of the same step narrow its interval; doubling reaches the cap in few campaigns.
            repeat = min(2 * last.repeat, self.max_repeat)
        return Probe(self.builds[0], self.builds[mid], mid, repeat)

    def record(self, probe: Probe, campaign_id: str, cells: Sequence[CellInterval]) -> Bisect:
        """The bisect after ``probe`` was measured by ``campaign_id`` with these ``cells``."""
        decision = step_decision(cells, self.effect)
        step = Step(len(self.steps) + 1, probe.build, probe.position, probe.repeat, campaign_id, decision, tuple(cells))
        moved = {"slower": {"slow_at": probe.position}, "not slower": {"good_at": probe.position}}.get(decision, {})
        return replace(self, steps=(*self.steps, step), **moved)

    @property
    def first_slow(self) -> str | None:
        return self.builds[self.slow_at] if self.state == "found" else None

    def lines(self) -> list[str]:
        """The path as text: each step's verdict and intervals, then the answer."""
        n = len(self.builds)
        out = [f"bisect of {n} builds for the first one slower than {self.builds[0]} by at least "
               f"{self.effect * 100:g}% q/s; it assumes {self.builds[0]} is good, {self.builds[-1]} is slower and "
               "there is one step change between them (neither end is measured)"]
        for s in self.steps:
            out.append(f"step {s.number}: {s.build} (build {s.position + 1} of {n}) beside {self.builds[0]}, repeat "
                       f"{s.repeat}, campaign {s.campaign_id}: {s.decision}")
            out += [f"  {c.describe()}" for c in s.cells]
        out.append(self.verdict())
        return out

    def verdict(self) -> str:
        """The line a user acts on."""
        n = len(self.builds)
        good, slow = self.builds[self.good_at], self.builds[self.slow_at]
        if self.state == "found":
            measured = any(s.position == self.slow_at for s in self.steps)
            return (f"first slow build: {slow} (build {self.slow_at + 1} of {n}); last good: {good}; "
                    f"{self.decided_steps} decided step(s)"
                    + ("" if measured else f"; {slow} itself was not measured (slower by --bad's word)"))
        if self.state == "undecided":
            last = self.steps[-1]
            return (f"undecided: {last.build} stayed undecided at the cap of {self.max_repeat} repetitions; the "
                    f"first slow build is after {good} and at or before {slow} (builds {self.good_at + 2} to "
                    f"{self.slow_at + 1} of {n})")
        return f"walking: the first slow build is after {good} and at or before {slow}"

    def as_data(self) -> dict[str, object]:
        """The same as JSON data (`scheduler bisect --format json`)."""
        return {
            "builds": list(self.builds), "effect": self.effect, "max_repeat": self.max_repeat, "state": self.state,
            "first_slow": self.first_slow, "last_good": self.builds[self.good_at],
            "first_slow_at_most": self.builds[self.slow_at], "decided_steps": self.decided_steps,
            "assumes": "one step change; the good and the slow ends are not measured",
            "steps": [{"step": s.number, "build": s.build, "position": s.position + 1, "repeat": s.repeat,
                       "campaign_id": s.campaign_id, "decision": s.decision,
                       "cells": [{"cell": c.cell, "ratio": _num(c.ratio), "low": _num(c.low), "high": _num(c.high),
                                  "level": c.level} for c in s.cells]}
                      for s in self.steps],
            "verdict": self.verdict(),
        }


def _num(x: float) -> float | None:
    return None if math.isnan(x) else x


def most_steps(n: int) -> int:
    """The most decided steps a bisect of ``n`` builds takes: ⌈log₂(n − 1)⌉ (n − 1 candidates)."""
    return math.ceil(math.log2(n - 1)) if n > 2 else 0
