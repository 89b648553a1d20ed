"""The collector's `benchfleet_regression` metric: once a campaign ended, its spec's change points are
searched and a worse shift that still stands is exported with the campaign it began at."""

from __future__ import annotations

from types import SimpleNamespace

from prometheus_client import generate_latest

from services.collector.prometheus import CollectorMetrics
from services.collector.spec_regressions import judge_spec

from tests.unit.test_spec_history import NIGHTS, QPS, _entries


def _store(qps):
    nights = NIGHTS[:len(qps)]
    stored: list = []
    return SimpleNamespace(
        campaigns=SimpleNamespace(get=lambda cid: SimpleNamespace(name="nightly") if cid.startswith("n") else None,
                                  named=lambda name: list(nights)),
        results=SimpleNamespace(of_spec=lambda name: _entries(qps)),
        judgements=SimpleNamespace(stored=stored, record_change_points=stored.extend))


def _exported(metrics: CollectorMetrics) -> list[str]:
    return [line for line in generate_latest(metrics.registry).decode().splitlines()
            if line.startswith("benchfleet_regression{")]


def test_a_standing_slowdown_is_exported_with_where_it_began():
    m = CollectorMetrics()
    store = _store(QPS)
    judge_spec(store, m, "n8")  # type: ignore[arg-type]
    assert _exported(m) == ['benchfleet_regression{campaign="n8",since="n5",spec="nightly"} 1.0']
    # The change points are stored for the history board, found by the campaign that ended.
    worse = [c for c in store.judgements.stored if c.metric == "qps"]
    assert [(c.spec_name, c.campaign_id, c.direction, c.found_by) for c in worse] == [("nightly", "n5", "worse", "n8")]
    assert worse[0].ratio < 1 and 0 <= worse[0].q_value <= 0.05


def test_a_flat_spec_is_exported_as_0_and_an_unknown_campaign_not_at_all():
    m = CollectorMetrics()
    flat = _store([1000, 1004, 998, 1001, 999, 1003, 1000, 997])
    judge_spec(flat, m, "n8")  # type: ignore[arg-type]
    assert _exported(m) == ['benchfleet_regression{campaign="n8",since="",spec="nightly"} 0.0']
    assert flat.judgements.stored == []
    fresh = CollectorMetrics()
    judge_spec(_store(QPS), fresh, "other")  # type: ignore[arg-type]
    assert _exported(fresh) == []
