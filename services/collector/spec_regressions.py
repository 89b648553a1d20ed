"""After a campaign ended, its spec's change points over every campaign of that name, told to the
metrics: the regression the BenchfleetRegression alert fires on (deploy/prometheus/rules.yml)."""

from __future__ import annotations

from services.collector.prometheus import CollectorMetrics
from services.common.store import Store
from services.reporting.spec_history import spec_changes, worse_since


def judge_spec(store: Store, metrics: CollectorMetrics, campaign_id: str) -> None:
    """Search the ended campaign's spec for change points and export whether a worse one still stands."""
    c = store.campaigns.get(campaign_id)
    if c is None:
        return
    nights = store.campaigns.named(c.name)
    if not nights:
        return
    changes = spec_changes(c.name, nights, store.results.of_spec(c.name))
    metrics.spec_judged(c.name, nights[-1].campaign_id, worse_since(changes.search, changes.nights))
