"""Change points in a spec's nightly history: E-Divisive means (Matteson and James 2014, as MongoDB's CI
and Apache Otava use it) splits each series where its two sides differ most, and a t-test judges each split.

Otava's choice of test, made honest about the search: the split is the best of many, so its Student
t-test p-value is multiplied by the number of splits weighed (Bonferroni over the scan). Only a split
that holds has its two sides searched again (binary segmentation). Every split tested in any series is
one Benjamini-Hochberg family, so the many cells and metrics of a spec do not add false changes, and a
split inside a segment stands only when the split that made the segment stands. Deterministic: no seed.
A shift that reverts within the series (a dip) can hide both its ends from the first split's test.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from services.reporting.fdr import bh_qvalues
from services.reporting.tdist import t_two_sided_p

#: Fewest campaigns on each side of a split: a side of one has no spread to test.
MIN_SIDE = 2


@dataclass(frozen=True)
class SeriesKey:
    """Which series: one cell (target, workload, threads) and one metric."""

    target: str
    workload: str
    threads: int
    metric: str

    def label(self) -> str:
        return f"{self.target} / {self.workload} / {self.threads} threads / {self.metric}"


@dataclass(frozen=True)
class Point:
    """One campaign's figure of a series (the mean of its kept repetitions)."""

    campaign_id: str
    created_at: float
    value: float


@dataclass(frozen=True)
class Series:
    """One cell's metric across a spec's campaigns, oldest first, and whether higher is better."""

    key: SeriesKey
    points: tuple[Point, ...]
    #: None: a counter with no better direction (a change only "differs").
    higher_is_better: bool | None = True


@dataclass(frozen=True)
class ChangePoint:
    """A shift in a series: the first campaign after it, its size and its significance."""

    key: SeriesKey
    #: Index of the first campaign after the shift, in the series' points.
    index: int
    campaign_id: str
    #: Geometric means of the segments either side (bounded by the neighbouring change points).
    before: float
    after: float
    #: The scan-corrected p-value of the split, and its BH q-value over every tested split.
    p: float
    q: float
    #: "worse", "better" or "differs" (a metric with no better direction).
    direction: str

    @property
    def ratio(self) -> float:
        return self.after / self.before if self.before > 0 else math.inf


@dataclass(frozen=True)
class ChangeSearch:
    """Every change found over a set of series, and the family they were selected from."""

    changes: tuple[ChangePoint, ...]
    #: Tested splits (the family's size) and the series searched.
    family_size: int
    series: int
    alpha: float


def _edivisive_q(x: Sequence[float], tau: int) -> float:
    """E-Divisive's statistic (exponent 1) for a split of ``x`` before index ``tau``."""
    left, right = x[:tau], x[tau:]
    m, n = len(left), len(right)
    between = sum(abs(a - b) for a in left for b in right) * 2 / (m * n)
    within_l = sum(abs(left[i] - left[j]) for i in range(m) for j in range(i + 1, m)) / (m * (m - 1) / 2)
    within_r = sum(abs(right[i] - right[j]) for i in range(n) for j in range(i + 1, n)) / (n * (n - 1) / 2)
    return m * n / (m + n) * (between - within_l - within_r)


def _student_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Student t-test p-value of two samples' means with their pooled variance (0 when both
    are constant and differ). Not Welch's: the search picks splits whose short side looks tight, and
    Welch trusts a side of two campaigns' own spread."""
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    df = len(a) + len(b) - 2
    pooled = (sum((v - ma) ** 2 for v in a) + sum((v - mb) ** 2 for v in b)) / df
    se2 = pooled * (1 / len(a) + 1 / len(b))
    if se2 == 0:
        return 1.0 if ma == mb else 0.0
    return t_two_sided_p((mb - ma) / math.sqrt(se2), df)


@dataclass(frozen=True)
class _Split:
    """A tested split of one segment of a series (private: never leaves this module)."""

    series: int
    index: int
    p: float
    #: The split whose side this split's segment is (None: the whole series).
    parent: int | None


def best_split(x: Sequence[float], lo: int, hi: int) -> tuple[int, float] | None:
    """The E-Divisive split of ``x[lo:hi]`` (an index into ``x``) and its scan-corrected p-value; None
    when the segment is too short for two sides of ``MIN_SIDE``."""
    candidates = range(lo + MIN_SIDE, hi - MIN_SIDE + 1)
    if not candidates:
        return None
    seg = x[lo:hi]
    tau = max(candidates, key=lambda t: (_edivisive_q(seg, t - lo), -t))
    return tau, min(1.0, _student_p(x[lo:tau], x[tau:hi]) * len(candidates))


def _search(x: Sequence[float], s: int, alpha: float, out: list[_Split]) -> None:
    todo: list[tuple[int, int, int | None]] = [(0, len(x), None)]
    while todo:
        lo, hi, parent = todo.pop()
        found = best_split(x, lo, hi)
        if found is None:
            continue
        out.append(_Split(s, found[0], found[1], parent))
        if found[1] <= alpha:
            me = len(out) - 1
            todo += [(lo, found[0], me), (found[0], hi, me)]


def _geomean(values: Sequence[float]) -> float:
    return math.exp(sum(values) / len(values))


def find_changes(series: Sequence[Series], alpha: float = 0.05) -> ChangeSearch:
    """Change points of every series, their false-discovery rate controlled at ``alpha`` over every
    split tested in any of them. Values must be positive (they are compared as ratios)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha: must be in (0, 1), got {alpha}")
    logs: list[list[float]] = []
    for s in series:
        for i, pt in enumerate(s.points):
            if not pt.value > 0 or math.isinf(pt.value):
                raise ValueError(f"{s.key.label()}: points[{i}].value: must be a positive number, got {pt.value}")
        logs.append([math.log(pt.value) for pt in s.points])
    splits: list[_Split] = []
    for i, x in enumerate(logs):
        _search(x, i, alpha, splits)
    q = bh_qvalues([sp.p for sp in splits])
    kept = [q[i] <= alpha for i in range(len(splits))]
    # Splits come after their parent in the list: one pass drops every split under a dropped one.
    for i, sp in enumerate(splits):
        if kept[i] and sp.parent is not None and not kept[sp.parent]:
            kept[i] = False
    changes = []
    for s_i, (s, x) in enumerate(zip(series, logs)):
        mine = sorted((sp.index, j) for j, sp in enumerate(splits) if sp.series == s_i and kept[j])
        bounds = [0] + [t for t, _ in mine] + [len(x)]
        for k, (tau, j) in enumerate(mine):
            before, after = _geomean(x[bounds[k]:tau]), _geomean(x[tau:bounds[k + 2]])
            way = ("differs" if s.higher_is_better is None
                   else "better" if (after > before) == s.higher_is_better else "worse")
            changes.append(ChangePoint(s.key, tau, s.points[tau].campaign_id, before, after, splits[j].p, q[j], way))
    return ChangeSearch(tuple(changes), len(splits), len(series), alpha)
