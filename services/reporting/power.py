"""How small a change a campaign can see: per-cell noise split into its block and run parts,
the smallest change detectable at 80% power, and the repetitions a target change needs.

On the log scale a run is mu_target + block + run noise. The plan runs a cell's targets back
to back in each block, so a paired comparison cancels the block part and only run noise
(twice: one per side) is left; an unpaired one carries both parts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from statistics import NormalDist

from services.reporting.log_ratio import Figures
from services.reporting.tdist import t_ppf

DEFAULT_POWER = 0.8
#: Repetitions suggested at most: past this a campaign grows by days, and a change that needs
#: more is better sought with longer runs or a quieter machine.
DEFAULT_MAX_REPEAT = 20


@dataclass(frozen=True)
class Noise:
    """Standard deviations on the log scale (0.02 is about 2% of the figure)."""

    run_sd: float
    block_sd: float
    #: Complete blocks the estimate came from (0 when given by hand).
    n_blocks: int = 0

    def __post_init__(self) -> None:
        for name in ("run_sd", "block_sd"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"{name}: {value} is not a standard deviation")


@dataclass(frozen=True)
class RepeatAdvice:
    """The repetitions a target change needs, or the cap and what it reaches instead."""

    repeat: int
    reached: bool
    #: The smallest change (fraction) detectable at ``repeat``.
    detectable: float
    message: str


def estimate_noise(by_target: Mapping[str, Figures]) -> Noise:
    """Block and run noise of one cell from every target's figures by block (two-way ANOVA on
    logs, blocks every target measured only). Needs two targets and two complete blocks."""
    logs = {name: {b: math.log(v) for b, v in figs.items() if v is not None and not math.isnan(v) and v > 0}
            for name, figs in by_target.items()}
    if len(logs) < 2:
        raise ValueError(f"by_target: {len(logs)} target(s); the block part needs at least 2")
    blocks = sorted(set.intersection(*(set(f) for f in logs.values())))
    k, n = len(logs), len(blocks)
    if n < 2:
        raise ValueError(f"by_target: {n} block(s) measured by every target; at least 2 are needed")
    grand = math.fsum(f[b] for f in logs.values() for b in blocks) / (k * n)
    target_mean = {t: math.fsum(f[b] for b in blocks) / n for t, f in logs.items()}
    block_mean = {b: math.fsum(f[b] for f in logs.values()) / k for b in blocks}
    resid = math.fsum((f[b] - target_mean[t] - block_mean[b] + grand) ** 2
                      for t, f in logs.items() for b in blocks)
    ms_resid = resid / ((k - 1) * (n - 1))
    ms_block = k * math.fsum((block_mean[b] - grand) ** 2 for b in blocks) / (n - 1)
    # The method-of-moments block variance can come out negative by chance: no block part then.
    return Noise(run_sd=math.sqrt(ms_resid), block_sd=math.sqrt(max(0.0, (ms_block - ms_resid) / k)), n_blocks=n)


def _se_df(noise: Noise, repeat: int, paired: bool) -> tuple[float, float]:
    if paired:
        return math.sqrt(2 * noise.run_sd**2 / repeat), float(repeat - 1)
    return math.sqrt(2 * (noise.run_sd**2 + noise.block_sd**2) / repeat), float(2 * (repeat - 1))


def detectable_change(noise: Noise, repeat: int, *, alpha: float = 0.05, power: float = DEFAULT_POWER,
                      family_size: int = 1, paired: bool = True) -> float:
    """The smallest change (a fraction: 0.03 is 3%) a two-sided test finds with probability
    ``power`` at ``repeat`` repetitions. ``family_size`` > 1 asks for it among that many cells
    under BH, whose bar for a page with one real change is alpha / family_size."""
    if repeat < 2:
        raise ValueError(f"repeat must be >= 2, got {repeat}")
    if not 0 < power < 1:
        raise ValueError(f"power must be in (0, 1), got {power}")
    if family_size < 1:
        raise ValueError(f"family_size must be >= 1, got {family_size}")
    level = alpha / family_size
    se, df = _se_df(noise, repeat, paired)
    if se == 0:
        return 0.0
    critical = t_ppf(1 - level / 2, df)
    # Bisection on the exact (noncentral t) power; the textbook sum of two t quantiles is 5%
    # optimistic at 3 repetitions, the common case here.
    lo, hi = 0.0, (critical + t_ppf(power, df)) * 4
    for _ in range(60):
        mid = (lo + hi) / 2
        if power_of(mid, critical, df) < power:
            lo = mid
        else:
            hi = mid
    return math.expm1(hi * se)


def power_of(shift: float, critical: float, df: float, *, steps: int = 240) -> float:
    """P(|T| > critical) for T noncentral t with ``df`` and noncentrality ``shift``: the normal
    tails averaged over the chi-square of the variance estimate (Simpson's rule in log v)."""
    norm = NormalDist()
    half = df / 2
    log_const = -half * math.log(2) - math.lgamma(half)
    lo_u, hi_u = math.log(1e-12 * df), math.log(df + 40 * math.sqrt(2 * df) + 60)
    width = (hi_u - lo_u) / steps
    total = 0.0
    for i in range(steps + 1):
        v = math.exp(lo_u + i * width)
        # chi-square density times dv/du = v, on the log scale to keep small df finite.
        weight = math.exp(log_const + half * math.log(v) - v / 2)
        scale = critical * math.sqrt(v / df)
        tails = norm.cdf(shift - scale) + norm.cdf(-shift - scale)
        total += (1 if i in (0, steps) else 4 if i % 2 else 2) * weight * tails
    return total * width / 3


def repetitions_for(noise: Noise, change: float, *, alpha: float = 0.05, power: float = DEFAULT_POWER,
                    family_size: int = 1, paired: bool = True, max_repeat: int = DEFAULT_MAX_REPEAT) -> RepeatAdvice:
    """The fewest repetitions (2..max_repeat) that detect ``change`` (a fraction) at ``power``;
    at the cap, says so and what the cap can detect instead."""
    if not change > 0:
        raise ValueError(f"change must be > 0, got {change}")
    if max_repeat < 2:
        raise ValueError(f"max_repeat must be >= 2, got {max_repeat}")
    for repeat in range(2, max_repeat + 1):
        found = detectable_change(noise, repeat, alpha=alpha, power=power, family_size=family_size, paired=paired)
        if found <= change:
            return RepeatAdvice(repeat, True, found,
                                f"{repeat} repetitions detect {change * 100:g}% ({found * 100:.2f}% at {power:.0%} power)")
    return RepeatAdvice(max_repeat, False, found,
                        f"{max_repeat} repetitions (the cap) detect only {found * 100:.2f}%, not {change * 100:g}%: "
                        "lengthen the runs or quiet the machine")
