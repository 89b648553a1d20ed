"""The latency histogram: bounded relative error, exact merges."""

from __future__ import annotations

import random

from services.common.results.histogram import ERROR, Histogram


def test_percentiles_within_relative_error():
    """Reported percentiles are within the histogram's error of the true sample percentiles."""
    rng = random.Random(7)
    values = sorted(rng.lognormvariate(6, 1) for _ in range(20000))
    h = Histogram()
    for v in values:
        h.record(v)
    for p in (50, 90, 95, 99, 99.9):
        true = values[int(len(values) * p / 100) - 1]
        assert abs(h.percentile(p) - true) / true <= 2 * ERROR + 1e-9, p
    assert h.percentile(100) == values[-1]


def test_merge_equals_recording_everything_in_one():
    """Merging per-thread histograms gives the same percentiles as one histogram (never averaged)."""
    rng = random.Random(3)
    parts = [[rng.expovariate(1 / (200 * (i + 1))) for _ in range(3000)] for i in range(4)]
    whole, merged = Histogram(), Histogram()
    for part in parts:
        h = Histogram()
        for v in part:
            h.record(v)
            whole.record(v)
        merged.merge(Histogram.from_wire(h.to_wire()))
    assert merged.counts == whole.counts and merged.total == whole.total == 12000
    assert merged.percentile(99) == whole.percentile(99)


def test_empty_histogram_reports_zero():
    """A run with no transactions reports 0 ms, not an error."""
    assert Histogram().percentile(99) == 0.0 and Histogram().mean() == 0.0
