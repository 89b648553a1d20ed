"""Collapse detection on literal data, starting with the 2010 seed's oltp_simple columns."""

from __future__ import annotations

import pytest

from services.reporting.collapse import CellThroughput, at_top_threads, collapse_points, collapses

THREADS = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
#: q/s from seeds/001 (oltp_simple): one-thread-per-connection against the thread pool.
PER_CONNECTION = [148673, 161547, 169747, 172083, 69036, 42041, 21775, 4368, 282]
THREADPOOL = [143222, 167069, 167270, 165977, 164983, 158410, 148690, 147107, 143934]


def seed_cells() -> list[CellThroughput]:
    return ([CellThroughput("thread-per-connection", "oltp_simple", n, q) for n, q in zip(THREADS, PER_CONNECTION)]
            + [CellThroughput("threadpool", "oltp_simple", n, q) for n, q in zip(THREADS, THREADPOOL)])


def test_seed_thread_per_connection_collapses_from_256_clients():
    """Per-connection threads collapse from 256 clients on, always against the 128-client peak."""
    found = collapses(seed_cells())
    assert [p.threads for p in found] == [256, 512, 1024, 2048, 4096]
    assert {p.target for p in found} == {"thread-per-connection"}
    assert {(p.peak_threads, p.peak_qps) for p in found} == {(128, 172083)}
    assert found[-1].ratio == pytest.approx(282 / 172083)
    assert found[-1].ratio == pytest.approx(0.0016387, abs=1e-7)


def test_seed_threadpool_never_collapses():
    """The thread pool loses at most 14% from its peak, far from the 50% threshold."""
    pool = [p for p in collapse_points(seed_cells()) if p.target == "threadpool"]
    assert len(pool) == len(THREADS) - 1
    assert not any(p.collapsed for p in pool)
    assert min(p.ratio for p in pool) == pytest.approx(143934 / 167270)


def test_at_top_threads_judges_the_highest_thread_count_per_target():
    """The alert view keeps one point per target/workload: the highest thread count."""
    top = at_top_threads(seed_cells())
    assert {k: (p.threads, p.collapsed) for k, p in top.items()} == {
        ("thread-per-connection", "oltp_simple"): (4096, True),
        ("threadpool", "oltp_simple"): (4096, False),
    }


def test_fraction_is_a_strict_threshold():
    """Exactly at the fraction is not a collapse; just below is."""
    cells = [CellThroughput("a", "w", 8, 100.0), CellThroughput("a", "w", 16, 50.0),
             CellThroughput("b", "w", 8, 100.0), CellThroughput("b", "w", 16, 49.9)]
    assert [(p.target, p.collapsed) for p in collapse_points(cells, fraction=0.5)] == [("a", False), ("b", True)]
    assert collapses(cells, fraction=0.1) == []


def test_workloads_and_targets_are_compared_only_with_themselves():
    """A fast target's peak never makes a slower target look collapsed."""
    cells = [CellThroughput("fast", "w", 8, 1000.0), CellThroughput("slow", "w", 16, 10.0),
             CellThroughput("slow", "w", 8, 12.0), CellThroughput("fast", "other", 16, 1.0)]
    assert collapses(cells) == []


def test_nothing_to_compare_gives_no_point():
    """A single thread count, or a peak of 0 q/s, yields no ratio rather than a false alarm."""
    assert collapse_points([CellThroughput("a", "w", 64, 10.0)]) == []
    assert collapse_points([CellThroughput("a", "w", 8, 0.0), CellThroughput("a", "w", 16, 0.0)]) == []


def test_cells_arrive_in_any_order():
    """Results finish in any order; the comparison is by thread count, not arrival."""
    shuffled = list(reversed(seed_cells()))
    assert collapse_points(shuffled) == collapse_points(seed_cells())


@pytest.mark.parametrize("fraction", [0.0, -0.5, 1.5])
def test_fraction_outside_0_1_is_rejected(fraction):
    """A threshold that could never (or always) fire is a configuration error."""
    with pytest.raises(ValueError):
        collapse_points(seed_cells(), fraction=fraction)
