"""After a campaign ended, its spec's change points over every campaign of that name, stored for the
history board and told to the metrics: the regression the BenchfleetRegression alert fires on
(deploy/prometheus/rules.yml)."""

from __future__ import annotations

import time

from services.collector.prometheus import CollectorMetrics
from services.common.store import Store
from services.common.store.judgements import StoredChangePoint
from services.reporting.change_points import ChangePoint
from services.reporting.spec_history import spec_changes, worse_since


def stored(spec: str, found_by: str, found_at: float, change: ChangePoint) -> StoredChangePoint:
    """A change point as the results DB keeps it."""
    k = change.key
    return StoredChangePoint(spec, change.campaign_id, k.target, k.workload, k.threads, k.metric, change.ratio,
                             change.p, change.q, change.direction, found_by, found_at)


def judge_spec(store: Store, metrics: CollectorMetrics, campaign_id: str) -> None:
    """Search the ended campaign's spec for change points (that spec only), store them, and export
    whether a worse one still stands."""
    c = store.campaigns.get(campaign_id)
    if c is None:
        return
    nights = store.campaigns.named(c.name)
    if not nights:
        return
    changes = spec_changes(c.name, nights, store.results.of_spec(c.name))
    now = time.time()
    store.judgements.record_change_points([stored(c.name, campaign_id, now, ch) for ch in changes.search.changes])
    metrics.spec_judged(c.name, nights[-1].campaign_id, worse_since(changes.search, changes.nights))
