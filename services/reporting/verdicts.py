"""Verdicts for a page of cells: BH over the page's family, intervals at the Benjamini–Yekutieli
level so they agree with the marks, decisions read off the intervals, and the gate.

Decisions (``higher_is_better`` None is a counter, which has no better direction):
  "faster"/"slower"  the adjusted interval excludes no change (the cell is BH-selected);
  "differs"          the same for a counter;
  "equivalent"       the adjusted interval lies inside 1 +- min_effect (even when it also
                     excludes no change: a confirmed 0.3% is not worth acting on; the gate
                     still sees it, reading the interval);
  "undecided"        neither: more repetitions might tell;
  "identical"        no spread and no difference at all;
  "missing"          nothing to compare (no figures, one repetition, a figure with no log, every
                     run of a side left out for a stall or a short window: ``kept_runs``).
Zero spread with a nonzero difference is "undecided" for a timing (a run-to-run noise of
exactly zero means the figure is capped or synthetic, so no p-value is claimed), and
"differs" for a counter, whose exact difference is a fact. Neither joins the BH family.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Sequence

from services.reporting.campaign_noise import BetweenCampaigns
from services.reporting.fdr import Selection, select
from services.reporting.log_ratio import Figures, LogRatio, log_ratio

Decision = Literal["faster", "slower", "differs", "equivalent", "undecided", "identical", "missing"]

DEFAULT_ALPHA = 0.05
DEFAULT_MIN_EFFECT = 0.01


@dataclass(frozen=True)
class CellFigures:
    """One cell of a page: its label and each side's figures by block."""

    key: str
    target: Figures
    baseline: Figures
    #: The runs left out of both sides' figures (a stall, an overrun, a short window) and why:
    #: "on repetition 2: short window" (``kept_runs.left_out_note``; "": none).
    left_out: str = ""


@dataclass(frozen=True)
class Verdict:
    """A cell's estimate, q-value, adjusted ratio interval and the decision they give."""

    key: str
    estimate: LogRatio
    q: float
    selected: bool
    #: Confidence level of ``low``..``high`` (the page's BY level).
    level: float
    low: float
    high: float
    decision: Decision
    reason: str
    #: The runs left out of the estimate, and why (``CellFigures.left_out``).
    left_out: str = ""

    @property
    def ratio(self) -> float:
        return self.estimate.ratio


@dataclass(frozen=True)
class Page:
    """The verdicts of one family: which cells, at which FDR level, with which direction."""

    family: str
    alpha: float
    min_effect: float
    higher_is_better: bool | None
    selection: Selection
    verdicts: tuple[Verdict, ...]


def _decide(est: LogRatio, selected: bool, low: float, high: float, min_effect: float,
            higher_is_better: bool | None) -> tuple[Decision, str]:
    if est.method == "none":
        return "missing", est.reason
    if est.method == "identical":
        if est.estimate == 0:
            return "identical", est.reason
        if higher_is_better is None:
            return "differs", f"exactly {(est.ratio - 1) * 100:+.2f}% in every repetition"
        return "undecided", est.reason
    if 1 - min_effect < low and high < 1 + min_effect:
        return "equivalent", f"within +-{min_effect * 100:g}%"
    if not selected:
        return "undecided", "the interval spans both no change and a change that matters"
    if higher_is_better is None:
        return "differs", "the interval excludes no change"
    up = est.estimate > 0
    return ("faster" if up == higher_is_better else "slower"), "the interval excludes no change"


def judge(cells: Sequence[CellFigures], *, family: str, higher_is_better: bool | None,
          alpha: float = DEFAULT_ALPHA, min_effect: float = DEFAULT_MIN_EFFECT,
          shared_blocks: bool = True) -> Page:
    """Verdicts for every cell of ``family`` (one metric's page): the family is exactly these
    cells with a p-value, so the false-discovery rate is controlled per page at ``alpha``.
    ``shared_blocks`` False for sides from two campaigns (see :func:`log_ratio`)."""
    return judge_groups([(cells, higher_is_better)], family=family, alpha=alpha, min_effect=min_effect,
                        shared_blocks=shared_blocks)[0]


def judge_groups(groups: Sequence[tuple[Sequence[CellFigures], bool | None]], *, family: str,
                 alpha: float = DEFAULT_ALPHA, min_effect: float = DEFAULT_MIN_EFFECT,
                 shared_blocks: bool = True, between: BetweenCampaigns | None = None) -> tuple[Page, ...]:
    """As :func:`judge` for a page of several metrics (q/s, latency, counters): one BH family over
    every group's cells, each group read in its own direction; one Page per group, sharing the
    Selection. ``between``: the campaigns' own shifts, for sides from two campaigns."""
    if min_effect < 0:
        raise ValueError(f"min_effect must be >= 0, got {min_effect}")
    estimates = [[log_ratio(c.target, c.baseline, shared_blocks=shared_blocks, between=between) for c in cells]
                 for cells, _ in groups]
    selection = select([e.p for group in estimates for e in group], alpha)
    level = selection.interval_level
    pages, at = [], 0
    for (cells, higher_is_better), group in zip(groups, estimates):
        verdicts = []
        for cell, est in zip(cells, group):
            q, sel = selection.qvalues[at], selection.selected[at]
            at += 1
            low, high = est.interval(level)
            decision, reason = _decide(est, sel, low, high, min_effect, higher_is_better)
            if decision == "missing" and cell.left_out:
                reason = f"too few runs left to judge once stalled and short runs are left out ({cell.left_out}): {reason}"
            verdicts.append(Verdict(cell.key, est, q, sel, level, low, high, decision, reason, cell.left_out))
        pages.append(Page(family, alpha, min_effect, higher_is_better, selection, tuple(verdicts)))
    return tuple(pages)


def fails_gate(v: Verdict, higher_is_better: bool | None, slower_pct: float) -> bool:
    """Whether one verdict fails a gate of ``slower_pct`` percent: its adjusted interval lies wholly
    beyond that much slower (q/s below 1 - pct, latency above 1 + pct). A counter, a missing or
    identical cell, or an unselected one never fails."""
    if slower_pct < 0:
        raise ValueError(f"slower_pct must be >= 0, got {slower_pct}")
    # On the interval, not the decision: a confirmed 0.5% slowdown reads "equivalent" at a
    # 1% min effect, yet fails a 0% gate.
    if higher_is_better is None or not v.selected or math.isnan(v.low):
        return False
    beyond = slower_pct / 100
    return (v.high < 1 - beyond) if higher_is_better else (v.low > 1 + beyond)

