"""`collector history SPEC-NAME --changes`: every campaign of one spec (its nights), each cell and metric
as a series, the change points found in them, and the gate of the newest night against the last good one.

Change points need campaigns on both sides of a shift; the newest night has none after it, so the
gate (``--fail-on-slower``) judges it against the last good campaign instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from services.common.results.rows import CampaignNight, HistoryEntry
from services.reporting.change_points import ChangePoint, ChangeSearch, Point, Series, SeriesKey, find_changes
from services.reporting.gate import Regression
from services.reporting.metrics_catalog import metric, row_value
from services.reporting.page_verdicts import direction

#: The metrics searched unless told otherwise: throughput and tail latency, both in the result columns.
DEFAULT_METRICS = ("qps", "p95_ms")
#: A campaign state whose every run succeeded: only such a night can be the last good one.
GOOD_STATE = "finished"


def spec_series(entries: Iterable[HistoryEntry], metrics: Sequence[str] = DEFAULT_METRICS) -> list[Series]:
    """One series per cell and metric: each campaign's mean of its successful, unflagged repetitions,
    oldest first; a campaign without a figure for the series is left out of it."""
    sums: dict[tuple[SeriesKey, str], list[float]] = {}
    when: dict[str, float] = {}
    for e in entries:
        r = e.row
        when[r.campaign_id] = e.created_at
        # A failed or stalled run measured something else than its cell (as in a history page).
        if r.status != "ok" or r.flags:
            continue
        for key in metrics:
            v = row_value(metric(key), r)
            if v is not None and not math.isnan(v) and v > 0:
                sums.setdefault((SeriesKey(r.target, r.workload, r.threads, key), r.campaign_id), []).append(v)
    by_key: dict[SeriesKey, list[Point]] = {}
    for (key, cid), values in sums.items():
        by_key.setdefault(key, []).append(Point(cid, when[cid], sum(values) / len(values)))
    return [Series(k, tuple(sorted(pts, key=lambda p: (p.created_at, p.campaign_id))), direction(metric(k.metric)))
            for k, pts in sorted(by_key.items(), key=lambda kv: (kv[0].metric, kv[0].target, kv[0].workload,
                                                                 kv[0].threads))]


def worse_since(search: ChangeSearch, nights: Sequence[CampaignNight]) -> str | None:
    """The first campaign of the earliest worse shift that still stands (no later better change in its
    series): from it on no night is good, whatever the gate said of it alone."""
    order = {n.campaign_id: i for i, n in enumerate(nights)}
    standing: dict[SeriesKey, ChangePoint] = {}
    for ch in sorted(search.changes, key=lambda ch: order[ch.campaign_id]):
        if ch.direction == "worse":
            standing.setdefault(ch.key, ch)
        elif ch.direction == "better":
            standing.pop(ch.key, None)
    if not standing:
        return None
    return min((ch.campaign_id for ch in standing.values()), key=order.__getitem__)


def last_good(nights: Sequence[CampaignNight], fails: Callable[[str, str], bool], *,
              worse_from: str | None = None) -> str | None:
    """The last good night before the newest: walking from the oldest, a finished night is good unless
    the gate (``fails(reference, night)``) fails it against the good night before it, or it is at or
    after ``worse_from`` (a worse change point that still stands); None when none is good."""
    good: str | None = None
    for n in nights[:-1]:
        if n.campaign_id == worse_from:
            break
        if n.state != GOOD_STATE:
            continue
        if good is None or not fails(good, n.campaign_id):
            good = n.campaign_id
    return good


@dataclass(frozen=True)
class GateVerdict:
    """The newest night against the last good one: the cells slower beyond ``beyond`` (a fraction)."""

    newest: str
    #: None: no earlier night was good, so nothing was judged.
    reference: str | None
    beyond: float
    regressions: tuple[Regression, ...]
    unit: str

    @property
    def failed(self) -> bool:
        return bool(self.regressions)

    def lines(self) -> list[str]:
        if self.reference is None:
            return [f"gate: no earlier finished campaign to judge {self.newest} against: not judged"]
        if not self.failed:
            return [f"gate: {self.newest} against the last good campaign {self.reference}: no cell slower by more "
                    f"than {self.beyond * 100:g}% (passed)"]
        return ([f"gate: {self.newest} against the last good campaign {self.reference}: {len(self.regressions)} "
                 f"cell(s) slower by more than {self.beyond * 100:g}% (FAILED)"]
                + [f"  {r.describe(self.unit, 'newest/good')}" for r in self.regressions])


@dataclass(frozen=True)
class SpecChanges:
    """A spec's nights, the change points of its series, and the gate of its newest night (None: not asked)."""

    spec: str
    nights: tuple[CampaignNight, ...]
    search: ChangeSearch
    metrics: tuple[str, ...]
    gate: GateVerdict | None = None

    def night_number(self, campaign_id: str) -> int:
        """Which night (1: the oldest) a campaign is."""
        return next(i for i, n in enumerate(self.nights, 1) if n.campaign_id == campaign_id)


def spec_changes(spec: str, nights: Sequence[CampaignNight], entries: Iterable[HistoryEntry], *,
                 metrics: Sequence[str] = DEFAULT_METRICS, alpha: float = 0.05,
                 gate: GateVerdict | None = None) -> SpecChanges:
    """The change points of every cell and metric of ``spec``'s campaigns, one false-discovery family."""
    return SpecChanges(spec, tuple(nights), find_changes(spec_series(entries, metrics), alpha), tuple(metrics), gate)
