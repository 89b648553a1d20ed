"""A target against its baseline on the log scale: paired over shared blocks, Welch otherwise.

A block is one repetition of a cell, in which the plan runs every target back to back; drift
between blocks (a warming cache, a neighbour's backup) moves all targets of a block alike, so
the per-block log ratio cancels it and a paired t test sees only the run-to-run noise. Logs
make "10% faster" and "10% slower" symmetric and keep ratio intervals positive.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Mapping

from services.reporting.campaign_noise import BetweenCampaigns
from services.reporting.tdist import t_ppf, t_two_sided_p

#: One side's figures of a cell, by block (the repetition number). None or NaN is a figure
#: that is missing (a failed run, a metric the run did not record), never a zero. Two sides'
#: blocks pair only when they ran back to back in one campaign: see ``shared_blocks``.
Figures = Mapping[int, "float | None"]

Method = Literal["paired", "welch", "identical", "none"]


@dataclass(frozen=True)
class LogRatio:
    """Mean log(target / baseline) with its standard error, degrees of freedom and two-sided p.

    ``method`` "identical" means no spread at all (every repetition equal on each side, or
    every paired difference equal): ``estimate`` is exact, ``se`` is 0 and ``p`` is NaN,
    because a t test against zero noise would claim p = 0 from what is usually a capped or
    synthetic figure. "none": nothing to compare, ``reason`` says why.
    """

    method: Method
    estimate: float
    se: float
    df: float
    p: float
    n_target: int
    n_baseline: int
    #: Blocks both sides measured (the pairs of a paired estimate).
    n_pairs: int
    reason: str

    @property
    def ratio(self) -> float:
        return math.exp(self.estimate) if not math.isnan(self.estimate) else math.nan

    @property
    def t(self) -> float:
        """The test's statistic, estimate / se (NaN without a test: "identical" or "none")."""
        return self.estimate / self.se if self.method in ("paired", "welch") else math.nan

    def interval(self, level: float) -> tuple[float, float]:
        """The ratio's two-sided interval at confidence ``level`` (NaN when there is no test)."""
        if not 0 < level < 1:
            raise ValueError(f"level must be in (0, 1), got {level}")
        if self.method == "identical":
            return self.ratio, self.ratio
        if self.method == "none":
            return math.nan, math.nan
        half = t_ppf(0.5 + level / 2, self.df) * self.se
        return _exp(self.estimate - half), _exp(self.estimate + half)


def _exp(x: float) -> float:
    # Two repetitions at a strict family level give t quantiles in the thousands: the bound is
    # then unbounded in practice, not an error.
    return math.inf if x > 709 else math.exp(x)


def _present(figures: Figures, side: str) -> tuple[dict[int, float], str]:
    """The log of each present figure, or why the side cannot be put on the log scale."""
    out: dict[int, float] = {}
    for block, value in figures.items():
        if value is None or math.isnan(value):
            continue
        if value <= 0 or math.isinf(value):
            return {}, f"{side} repetition {block} is {value:g}: no ratio (a missing figure is None, not 0)"
        out[block] = math.log(value)
    return out, ""


def _none(reason: str, nt: int, nb: int, pairs: int) -> LogRatio:
    return LogRatio("none", math.nan, math.nan, math.nan, math.nan, nt, nb, pairs, reason)


def _mean_var(xs: list[float]) -> tuple[float, float]:
    m = math.fsum(xs) / len(xs)
    return m, math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def log_ratio(target: Figures, baseline: Figures, *, shared_blocks: bool = True,
              between: BetweenCampaigns | None = None) -> LogRatio:
    """Paired t on per-block log ratios when at least two blocks hold both sides, else Welch on
    the log values; unshared blocks are left out of a paired estimate so drift stays cancelled.
    ``shared_blocks`` False (two campaigns, whose repetition 1s ran days apart) always uses Welch,
    with ``between`` (the campaigns' own shifts, known from earlier ones) added to its variance."""
    t, t_problem = _present(target, "target")
    b, b_problem = _present(baseline, "baseline")
    shared = sorted(t.keys() & b.keys())
    nt, nb, pairs = len(t), len(b), len(shared)
    if t_problem or b_problem:
        return _none(t_problem or b_problem, nt, nb, pairs)
    if not t or not b:
        return _none(f"no figures for the {'target' if not t else 'baseline'}", nt, nb, pairs)
    if not shared_blocks:
        return welch(list(t.values()), list(b.values()), between=between)
    if pairs >= 2:
        diffs = [t[k] - b[k] for k in shared]
        mean, var = _mean_var(diffs)
        if var == 0:
            return LogRatio("identical", mean, 0.0, float(pairs - 1), math.nan, nt, nb, pairs,
                            "every block gave the same ratio: no noise to judge it against")
        se = math.sqrt(var / pairs)
        df = float(pairs - 1)
        return LogRatio("paired", mean, se, df, t_two_sided_p(mean / se, df), nt, nb, pairs,
                        f"paired over {pairs} blocks")
    return welch(list(t.values()), list(b.values()), pairs=pairs)


def welch(t: list[float], b: list[float], *, pairs: int = 0, between: BetweenCampaigns | None = None) -> LogRatio:
    """Welch's t on two samples of log values: mean(t) - mean(b), Welch–Satterthwaite df; with
    ``between``, two campaign shifts added to the variance and their own df to the Satterthwaite sum."""
    nt, nb = len(t), len(b)
    if nt < 2 or nb < 2:
        return _none("fewer than 2 repetitions on a side", nt, nb, pairs)
    mt, vt = _mean_var(t)
    mb, vb = _mean_var(b)
    st, sb = vt / nt, vb / nb
    sc = between.difference_variance if between is not None else 0.0
    se2 = st + sb + sc
    if se2 == 0:
        return LogRatio("identical", mt - mb, 0.0, float(nt + nb - 2), math.nan, nt, nb, pairs,
                        "every repetition equal on each side: no noise to judge the difference against")
    df = se2**2 / (st**2 / (nt - 1) + sb**2 / (nb - 1) + (sc**2 / between.df if between is not None else 0.0))
    se = math.sqrt(se2)
    reason = ("unpaired (Welch), with the between-campaign noise" if sc
              else "unpaired (Welch): fewer than 2 blocks measured both")
    return LogRatio("welch", mt - mb, se, df, t_two_sided_p((mt - mb) / se, df), nt, nb, pairs, reason)
