"""Statistics over the repetitions of a cell: summaries and the ratio to a baseline.

Whether two cells differ is judged once, for a page's family of cells, by ``verdicts`` (paired
log ratios, Benjamini-Hochberg); the seeds' "unusually high STDEV" flag stays as an extra.
Pure functions on plain numbers, so they are tested on literal samples.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

from services.reporting.tdist import t_ppf

#: The false-discovery rate of a page's verdicts; a cell's mean interval uses confidence 1 - alpha.
DEFAULT_ALPHA = 0.05
#: A difference whose interval lies within this (relative to the baseline) is "equivalent": with
#: 15-minute runs even a 0.3% drift can be told apart, and nobody acts on it.
DEFAULT_MIN_EFFECT = 0.01
#: Coefficient of variation above which a cell is flagged like the seeds' ``*``.
DEFAULT_CV_THRESHOLD = 0.05


@dataclass(frozen=True)
class CellStats:
    """Summary of one cell's repetitions; spread fields are NaN when n < 2."""

    n: int
    mean: float
    stdev: float
    cv: float
    ci_low: float
    ci_high: float

    def high_cv(self, threshold: float = DEFAULT_CV_THRESHOLD) -> bool:
        """True when the spread is large relative to the mean (the seeds' ``*``)."""
        return not math.isnan(self.cv) and self.cv > threshold


@dataclass(frozen=True)
class Comparison:
    """A target cell beside the baseline cell: both summaries and the ratio of their means (NaN when
    the baseline's mean is zero). Whether they differ is a page's verdict (``verdicts``), not a cell's."""

    target: CellStats
    baseline: CellStats
    ratio: float

    def high_cv(self, threshold: float = DEFAULT_CV_THRESHOLD) -> bool:
        """True when either side is noisy enough to earn the seeds' ``*``."""
        return self.target.high_cv(threshold) or self.baseline.high_cv(threshold)


def describe(values: Sequence[float], *, confidence: float = 1 - DEFAULT_ALPHA) -> CellStats:
    """Mean, sample standard deviation, CV and a t-based confidence interval of the mean."""
    n = len(values)
    if n == 0:
        raise ValueError("describe() needs at least one value")
    mean = statistics.fmean(values)
    if n < 2:
        return CellStats(n, mean, math.nan, math.nan, math.nan, math.nan)
    # Two-pass float variance: statistics.stdev computes exactly with Fractions, which costs
    # seconds over a 10,000-run campaign for digits far below any benchmark's noise.
    stdev = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_ppf(0.5 + confidence / 2, n - 1) * stdev / math.sqrt(n)
    cv = stdev / abs(mean) if mean else math.nan
    return CellStats(n, mean, stdev, cv, mean - half, mean + half)


def side_by_side(target: CellStats, baseline: CellStats) -> Comparison:
    """The target's summary beside the baseline's, with the ratio of their means."""
    return Comparison(target, baseline, target.mean / baseline.mean if baseline.mean else math.nan)
