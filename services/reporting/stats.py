"""Statistics over the repetitions of a cell: summaries, Welch's t test, ratio to a baseline.

The seeds marked "unusually high STDEV" by hand; here every comparison says whether the
difference is significant given the repetitions, and the high-CV flag stays as an extra.
Pure functions on plain numbers, so they are tested on literal samples.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Literal, Sequence

from services.reporting.tdist import t_ppf, t_two_sided_p

#: Significance level of the t test; the ratio interval uses confidence 1 - alpha.
DEFAULT_ALPHA = 0.05
#: A significant difference smaller than this (relative to the baseline) is reported as
#: "same": with 15-minute runs even a 0.3% drift can be significant, and nobody acts on it.
DEFAULT_MIN_EFFECT = 0.01
#: Coefficient of variation above which a cell is flagged like the seeds' ``*``.
DEFAULT_CV_THRESHOLD = 0.05

Verdict = Literal["faster", "slower", "same", "n/a"]


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
class TTest:
    """Welch's unequal-variance t test: statistic, Welch–Satterthwaite df, two-sided p."""

    t: float
    df: float
    p: float


@dataclass(frozen=True)
class Comparison:
    """A target cell against the baseline cell: mean ratio with its interval, test and verdict."""

    target: CellStats
    baseline: CellStats
    ratio: float
    ratio_low: float
    ratio_high: float
    test: TTest
    verdict: Verdict
    reason: str

    def high_cv(self, threshold: float = DEFAULT_CV_THRESHOLD) -> bool:
        """True when either side is noisy enough to earn the seeds' ``*``."""
        return self.target.high_cv(threshold) or self.baseline.high_cv(threshold)


_NAN_TEST = TTest(math.nan, math.nan, math.nan)


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


def welch_from_stats(a: CellStats, b: CellStats) -> TTest:
    """Welch's t test of mean(a) - mean(b) from two summaries (NaN when either n < 2)."""
    if a.n < 2 or b.n < 2:
        return _NAN_TEST
    va, vb = a.stdev**2 / a.n, b.stdev**2 / b.n
    se2 = va + vb
    diff = a.mean - b.mean
    if se2 == 0:
        # Identical repetitions on both sides: no noise to test against, so any
        # difference at all is certain and no difference is no evidence.
        df = float(a.n + b.n - 2)
        return TTest(0.0, df, 1.0) if diff == 0 else TTest(math.copysign(math.inf, diff), df, 0.0)
    df = se2**2 / (va**2 / (a.n - 1) + vb**2 / (b.n - 1))
    t = diff / math.sqrt(se2)
    return TTest(t, df, t_two_sided_p(t, df))


def welch_t_test(a: Sequence[float], b: Sequence[float]) -> TTest:
    """Welch's t test on two samples, as scipy.stats.ttest_ind(a, b, equal_var=False)."""
    return welch_from_stats(describe(a), describe(b))


def ratio_interval(
    target: CellStats, baseline: CellStats, *, confidence: float = 1 - DEFAULT_ALPHA
) -> tuple[float, float]:
    """Confidence interval of mean(target) / mean(baseline), by the delta method on the log ratio.

    Working on the log keeps the interval positive and symmetric in "x% faster" vs "x% slower";
    df comes from Welch–Satterthwaite on the two log-scale variance terms.
    """
    if target.n < 2 or baseline.n < 2 or target.mean <= 0 or baseline.mean <= 0:
        return math.nan, math.nan
    ratio = target.mean / baseline.mean
    # Var(log mean) ~= Var(mean) / mean^2 = CV^2 / n
    vt = (target.stdev / target.mean) ** 2 / target.n
    vb = (baseline.stdev / baseline.mean) ** 2 / baseline.n
    se2 = vt + vb
    if se2 == 0:
        return ratio, ratio
    df = se2**2 / (vt**2 / (target.n - 1) + vb**2 / (baseline.n - 1))
    half = t_ppf(0.5 + confidence / 2, df) * math.sqrt(se2)
    return ratio * math.exp(-half), ratio * math.exp(half)


def compare(
    target: Sequence[float],
    baseline: Sequence[float],
    *,
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
    higher_is_better: bool = True,
) -> Comparison:
    """Compare a target's repetitions with the baseline's and give a verdict.

    "faster"/"slower" need Welch p < alpha and a ratio at least ``min_effect`` away from 1;
    "n/a" means fewer than 2 repetitions on a side (the ratio is still given).
    """
    return compare_stats(
        describe(target),
        describe(baseline),
        alpha=alpha,
        min_effect=min_effect,
        higher_is_better=higher_is_better,
    )


def compare_stats(
    target: CellStats,
    baseline: CellStats,
    *,
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
    higher_is_better: bool = True,
) -> Comparison:
    """As compare(), from two summaries, so a table computes each cell's summary only once."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if min_effect < 0:
        raise ValueError(f"min_effect must be >= 0, got {min_effect}")
    ratio = target.mean / baseline.mean if baseline.mean else math.nan
    if target.n < 2 or baseline.n < 2:
        return Comparison(target, baseline, ratio, math.nan, math.nan, _NAN_TEST, "n/a", "not enough repetitions")
    if math.isnan(ratio):
        return Comparison(target, baseline, ratio, math.nan, math.nan, _NAN_TEST, "n/a", "baseline mean is zero")
    test = welch_from_stats(target, baseline)
    low, high = ratio_interval(target, baseline, confidence=1 - alpha)
    if test.p >= alpha:
        verdict: Verdict = "same"
        reason = f"no significant difference (p = {test.p:.3g})"
    elif abs(ratio - 1) < min_effect:
        verdict = "same"
        reason = f"significant (p = {test.p:.3g}) but smaller than {min_effect * 100:g}%"
    else:
        verdict = "faster" if (ratio > 1) == higher_is_better else "slower"
        reason = f"significant (p = {test.p:.3g})"
    return Comparison(target, baseline, ratio, low, high, test, verdict, reason)
