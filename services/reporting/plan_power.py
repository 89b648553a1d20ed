"""What a planned campaign can see, from the noise of earlier campaigns of the same cells: the
smallest change its ``repeat`` detects at 80% power across the page's BH family, and the
repetitions a wanted change needs. Pure: earlier figures in, advice out (``scheduler plan``
reads them from the results DB).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from services.reporting.log_ratio import Figures
from services.reporting.power import (
    DEFAULT_MAX_REPEAT,
    DEFAULT_POWER,
    Noise,
    RepeatAdvice,
    detectable_change,
    estimate_noise,
    repetitions_for,
)


@dataclass(frozen=True)
class CellHistory:
    """One earlier campaign's q/s of one cell (workload, threads), per target by repetition."""

    campaign_id: str
    workload: str
    threads: int
    by_target: Mapping[str, Figures]


@dataclass(frozen=True)
class PlanPower:
    """The noise of the earlier campaigns and what the planned repeat (or a wanted change) gets from it."""

    repeat: int
    family_size: int
    power: float
    #: Earlier campaigns and (campaign, cell) pairs the noise came from (0: no history).
    campaigns: int
    cells: int
    noise: Noise | None
    #: Smallest change (a fraction) the planned repeat detects; None without history.
    detectable: float | None
    #: The wanted change (``--detect``) and the repetitions it needs; None when not asked or no history.
    detect: float | None
    advice: RepeatAdvice | None

    def lines(self) -> list[str]:
        """What ``scheduler plan`` prints of it."""
        if self.noise is None or self.detectable is None:
            return ["power: no earlier campaign of these cells with two targets and two repetitions in the "
                    "results DB: the smallest detectable change is unknown until the campaign has run once"]
        if math.isinf(self.detectable):
            return [f"power: repeat {self.repeat} gives no test of a change: at least 2 repetitions are needed"]
        out = [f"power: noise of {self.cells} cell(s) over {self.campaigns} earlier campaign(s): "
               f"{self.noise.run_sd * 100:.2f}% run to run, {self.noise.block_sd * 100:.2f}% block to block",
               f"power: repeat {self.repeat} over {self.family_size} compared cell(s) (Benjamini-Hochberg at 5%) "
               f"detects a change of {self.detectable * 100:.2f}% at {self.power:.0%} power"]
        if self.detect is not None and self.advice is not None:
            out.append(f"power: --detect {self.detect * 100:g}%: {self.advice.message}")
        return out

    def as_data(self) -> dict[str, Any]:
        """The same as JSON data (``plan --json``)."""
        return {
            "repeat": self.repeat, "family_size": self.family_size, "power": self.power,
            "campaigns": self.campaigns, "cells": self.cells,
            "run_sd": self.noise.run_sd if self.noise else None,
            "block_sd": self.noise.block_sd if self.noise else None,
            "detectable_change": self.detectable, "detect": self.detect,
            "repeat_needed": self.advice.repeat if self.advice else None,
            "reached": self.advice.reached if self.advice else None,
            "message": self.lines(),
        }


def pooled_noise(history: Sequence[CellHistory]) -> tuple[Noise | None, int]:
    """Run and block variances of every usable cell, pooled by their blocks' degrees of freedom, and
    how many cells were usable (two targets and two blocks both measured)."""
    run_var = block_var = weight = 0.0
    used = 0
    for h in history:
        try:
            n = estimate_noise(h.by_target)
        except ValueError:
            continue
        w = n.n_blocks - 1
        run_var += w * n.run_sd**2
        block_var += w * n.block_sd**2
        weight += w
        used += 1
    if not used:
        return None, 0
    return Noise(math.sqrt(run_var / weight), math.sqrt(block_var / weight), n_blocks=round(weight) + used), used


def plan_power(history: Sequence[CellHistory], *, repeat: int, family_size: int, detect: float | None = None,
               alpha: float = 0.05, power: float = DEFAULT_POWER,
               max_repeat: int = DEFAULT_MAX_REPEAT) -> PlanPower:
    """The planned campaign's detectable change (paired: its targets share blocks) from ``history``."""
    noise, used = pooled_noise(history)
    family = max(family_size, 1)
    if noise is None:
        return PlanPower(repeat, family, power, 0, 0, None, None, detect, None)
    campaigns = len({h.campaign_id for h in history if h.by_target})
    found = detectable_change(noise, repeat, alpha=alpha, power=power, family_size=family) if repeat >= 2 else math.inf
    advice = (repetitions_for(noise, detect, alpha=alpha, power=power, family_size=family, max_repeat=max_repeat)
              if detect is not None else None)
    return PlanPower(repeat, family, power, campaigns, used, noise, found, detect, advice)
