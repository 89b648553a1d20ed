"""How far a target's mean figure of a cell moves from one campaign to the next beyond what its own
repetitions show: the part of a comparison of two campaigns that neither campaign can see alone.

Two campaigns share no block, so comparing them cancels nothing: a shift of a whole campaign (the
machine that day, a cold cache, what ran before) reads as a change unless the interval makes room
for it. Earlier campaigns of the same cells show its size; a one-way analysis of variance per
series (one target's figures of one cell, grouped by campaign), pooled over the series, gives it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

#: One series: one target's positive figures of one cell, by campaign id.
Series = Mapping[str, Sequence[float]]


@dataclass(frozen=True)
class BetweenCampaigns:
    """The standard deviation (log scale: 0.05 is about 5%) of a campaign's mean figure around the
    cell's level beyond its repetitions' own noise, and what it was estimated from."""

    sd: float
    #: Degrees of freedom of ``sd`` squared (Satterthwaite).
    df: float
    campaigns: int
    series: int

    def __post_init__(self) -> None:
        if not (self.sd >= 0 and math.isfinite(self.sd)):
            raise ValueError(f"sd: {self.sd} is not a standard deviation")
        if not (self.df > 0 and math.isfinite(self.df)):
            raise ValueError(f"df: {self.df} must be a finite number above 0")

    @property
    def difference_variance(self) -> float:
        """What two campaigns' shifts add to the variance of their difference of means."""
        return 2 * self.sd**2

    def describe(self) -> str:
        return (f"between campaigns: {self.sd * 100:.2f}% (a campaign's mean beyond its repetitions' noise, "
                f"from {self.campaigns} earlier campaign(s), {self.series} target x cell series), "
                "added to every interval")


#: What a comparison says when no earlier campaign shows the between-campaign noise.
UNKNOWN = ("between campaigns: unknown (fewer than 2 earlier campaigns of these cells); the intervals hold "
           "each campaign's own noise only, so a shift of a whole campaign can read as a change")


def _groups(series: Series) -> list[list[float]]:
    out = []
    for campaign, figures in series.items():
        logs = []
        for v in figures:
            if not (v > 0 and math.isfinite(v)):
                raise ValueError(f"campaign {campaign}: figure {v!r} has no log")
            logs.append(math.log(v))
        if len(logs) >= 2:
            out.append(logs)
    return out


def between_campaigns(all_series: Sequence[Series]) -> BetweenCampaigns | None:
    """The between-campaign part pooled over every series with two campaigns or more of two figures
    or more (method of moments; a negative estimate is 0); None when no series has them."""
    ss_b = df_b = ss_w = df_w = n0_weighted = 0.0
    used = 0
    campaigns: set[str] = set()
    for series in all_series:
        groups = _groups(series)
        c = len(groups)
        if c < 2:
            continue
        used += 1
        campaigns.update(k for k, v in series.items() if len(v) >= 2)
        n = [len(g) for g in groups]
        total = sum(n)
        means = [math.fsum(g) / len(g) for g in groups]
        grand = math.fsum(m * k for m, k in zip(means, n)) / total
        ss_b += math.fsum(k * (m - grand) ** 2 for m, k in zip(means, n))
        df_b += c - 1
        ss_w += math.fsum((x - m) ** 2 for g, m in zip(groups, means) for x in g)
        df_w += total - c
        # The effective group size of an unbalanced one-way layout.
        n0_weighted += (total - sum(k * k for k in n) / total)
    if not used:
        return None
    ms_b, ms_w, n0 = ss_b / df_b, ss_w / df_w, n0_weighted / df_b
    var = max(0.0, (ms_b - ms_w) / n0)
    if var == 0:
        return BetweenCampaigns(0.0, df_b, len(campaigns), used)
    df = (ms_b - ms_w) ** 2 / (ms_b**2 / df_b + ms_w**2 / df_w)
    return BetweenCampaigns(math.sqrt(var), df, len(campaigns), used)
