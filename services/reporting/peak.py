"""Did throughput collapse at the top thread count? The top is compared with the peak as an
interval, not with the largest of the noisy means, which is biased upward by picking.

Every other thread count is compared with the top (Welch on logs); a Bonferroni split of alpha
over those comparisons gives intervals that hold together, so the peak's lead over the top,
max_j (mu_j - mu_top), lies between the largest lower and the largest upper bound with
confidence 1 - alpha. On a plateau of equal means that lead is zero and is claimed with at
most alpha probability, however many thread counts the plateau has.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from services.reporting.log_ratio import welch
from services.reporting.tdist import t_ppf, t_two_sided_p

DEFAULT_MARGIN = 0.05


@dataclass(frozen=True)
class PeakCheck:
    """The top thread count against the peak: the drop top/peak - 1 with its interval, and how
    sure the drop exceeds the margin (1 - the Bonferroni-adjusted one-sided p)."""

    top_threads: int
    #: The thread count with the highest mean: the peak's likeliest place, not a claim.
    peak_threads: int
    #: Point estimate of top/peak - 1 from the means (<= 0); biased down, shown beside the interval.
    drop: float
    #: Bounds of top/peak - 1, jointly at confidence ``level`` (high is 0 when the top may be the peak).
    drop_low: float
    drop_high: float
    level: float
    sure: float
    collapsed: bool
    reason: str


def _logs(values: Sequence[float | None]) -> list[float]:
    return [math.log(v) for v in values if v is not None and not math.isnan(v) and v > 0]


def check_peak(by_threads: Mapping[int, Sequence[float | None]], *, margin: float = DEFAULT_MARGIN,
               alpha: float = 0.05) -> PeakCheck | None:
    """Whether the top thread count is below the peak by more than ``margin`` (a fraction),
    with ``1 - alpha`` confidence; None without two thread counts of two repetitions each."""
    if not 0 < margin < 1:
        raise ValueError(f"margin must be in (0, 1), got {margin}")
    logs = {t: xs for t, v in by_threads.items() if len(xs := _logs(v)) >= 2}
    if len(logs) < 2 or max(by_threads) not in logs:
        return None
    top = max(logs)
    others = [t for t in logs if t != top]
    share = alpha / len(others)
    bar = -math.log1p(-margin)  # a lead of the peak beyond this is a drop beyond margin
    lows, highs, ps = [0.0], [0.0], []
    for t in others:
        est = welch(logs[t], logs[top])
        if est.method == "identical":
            lows.append(est.estimate)
            highs.append(est.estimate)
            ps.append(0.0 if est.estimate > bar else 1.0)
            continue
        half = t_ppf(1 - share / 2, est.df) * est.se
        lows.append(est.estimate - half)
        highs.append(est.estimate + half)
        z = (est.estimate - bar) / est.se
        # One-sided p of "the lead of t is at most the bar".
        tail = t_two_sided_p(z, est.df) / 2
        ps.append(tail if z > 0 else 1 - tail)
    means = {t: math.fsum(xs) / len(xs) for t, xs in logs.items()}
    peak = max(means, key=lambda t: (means[t], -t))
    # Doubled so that "sure" passes 1 - alpha exactly when the two-sided joint interval clears the bar.
    adjusted = min(1.0, 2 * len(others) * min(ps))
    sure = 1 - adjusted
    lead_low, lead_high = max(lows), max(highs)
    collapsed = lead_low > bar
    drop_low, drop_high = math.expm1(-lead_high), math.expm1(-lead_low)
    reason = (f"{top} threads is {-drop_high * 100:.1f}% to {-drop_low * 100:.1f}% below the peak"
              if collapsed else
              f"{top} threads may be within {margin * 100:g}% of the peak (its drop is {drop_low * 100:+.1f}% to "
              f"{drop_high * 100:+.1f}%)")
    return PeakCheck(top, peak, math.expm1(means[top] - means[peak]), drop_low, drop_high, 1 - alpha, sure,
                     collapsed, reason)
