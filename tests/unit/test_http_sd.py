"""The collector's HTTP service discovery: which workers Prometheus is told to scrape."""

from __future__ import annotations

import json

import pytest

from services.collector.http_sd import WorkerDirectory
from services.common.config import Settings
from services.common.monitoring.discovery import scrape_address
from services.common.errors import DecodeError
from services.common.messages.announcements import WorkerAnnouncement
from services.common.messages.codec import decode


def ann(worker: str, state: str, at: float, address: str = "10.0.0.2:9464", pool: str = "rack1") -> WorkerAnnouncement:
    return WorkerAnnouncement(worker=worker, pool=pool, state=state, address=address, at=at)  # type: ignore[arg-type]


def test_newest_announcement_of_each_worker_wins_whatever_the_arrival_order():
    """A late "up" from before a withdrawal does not bring the worker back; a later restart does."""
    d = WorkerDirectory([ann("w1", "down", 5.0), ann("w1", "up", 4.0), ann("w2", "up", 1.0)])
    assert [g.worker for g in d.groups()] == ["w2"]
    assert d.update(ann("w1", "up", 6.0, "10.0.0.9:9464"))
    assert json.loads(d.render()) == [
        {"targets": ["10.0.0.9:9464"], "labels": {"worker": "w1", "pool": "rack1"}},
        {"targets": ["10.0.0.2:9464"], "labels": {"worker": "w2", "pool": "rack1"}},
    ]


def test_an_empty_fleet_is_an_empty_list():
    """Prometheus accepts [] (no targets), not an error, before any worker announced itself."""
    assert WorkerDirectory().render() == b"[]"


def test_announcement_round_trips_and_a_bad_address_is_refused_naming_the_field():
    a = ann("w1", "up", 1.0)
    assert decode(a.encode()) == a
    bad = a.encode().replace(b"10.0.0.2:9464", b"10.0.0.2")
    with pytest.raises(DecodeError, match="address"):
        decode(bad)


@pytest.mark.parametrize(("addr", "announce", "expected"), [
    ("10.1.2.3", "", "10.1.2.3:9464"),
    ("0.0.0.0", "worker7.example", "worker7.example:9464"),
    ("::", "fd00::7", "[fd00::7]:9464"),
])
def test_scrape_address(addr, announce, expected):
    """The announced address: the bind address, or the configured one (needed for a wildcard)."""
    assert scrape_address(Settings(metrics_addr=addr, metrics_announce=announce), 9464) == expected


def test_a_worker_not_announced_within_the_ttl_is_no_longer_listed():
    """A worker that died without withdrawing stays listed (Prometheus sees it down) until its
    last announcement is older than the TTL; then it is dropped. TTL 0 keeps it for ever."""
    now = [650.0]
    d = WorkerDirectory([ann("gone", "up", 100.0), ann("alive", "up", 600.0)], ttl_s=600, clock=lambda: now[0])
    assert [g.worker for g in d.groups()] == ["alive", "gone"]
    now[0] = 701.0
    assert [g.worker for g in d.groups()] == ["alive"]
    d.update(ann("gone", "up", 700.0))
    assert [g.worker for g in d.groups()] == ["alive", "gone"]
    assert [g.worker for g in WorkerDirectory([ann("gone", "up", 1.0)], ttl_s=0, clock=lambda: 1e9).groups()] == ["gone"]


def test_a_periodic_refresh_is_taken_but_not_news():
    """A worker's minutely announcement refreshes its entry (for the TTL) without counting as a
    change, so the collector logs a worker's arrival, move or stop, not every refresh."""
    d = WorkerDirectory([ann("w1", "up", 1.0)], ttl_s=600, clock=lambda: 700.0)
    assert d.groups() == []
    assert not d.update(ann("w1", "up", 650.0))
    assert [g.worker for g in d.groups()] == ["w1"]
    assert d.update(ann("w1", "down", 660.0)) and d.groups() == []
