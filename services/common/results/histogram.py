"""A log-bucketed latency histogram with bounded relative error, mergeable exactly.

Values are microseconds. Bucket i holds values in [B**i, B**(i+1)) with B = 1 + 2*ERROR, and
reports the bucket's midpoint, so every percentile is within ERROR of a recorded value.
Histograms from different threads and processes merge by adding counts, so percentiles of a
whole run are exact over the buckets (never averaged).
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping

#: Relative error of any reported value (0.5%).
ERROR = 0.005
_BASE = 1.0 + 2.0 * ERROR
_LOG_BASE = math.log(_BASE)


def bucket_of(value_us: float) -> int:
    """The bucket index of a value; values below 1 µs share bucket 0."""
    if value_us < 1.0:
        return 0
    return int(math.log(value_us) / _LOG_BASE) + 1


def bucket_value(index: int) -> float:
    """The representative (midpoint) value of a bucket, in microseconds."""
    if index <= 0:
        return 0.5
    lo = _BASE ** (index - 1)
    return lo * (1.0 + ERROR)


class Histogram:
    """Counts per bucket; ``record`` is cheap enough for the per-transaction path."""

    __slots__ = ("counts", "max_us", "total")

    def __init__(self, counts: Mapping[int, int] | None = None, max_us: float = 0.0):
        self.counts: dict[int, int] = dict(counts or {})
        self.total = sum(self.counts.values())
        self.max_us = max_us

    def record(self, value_us: float) -> None:
        i = int(math.log(value_us) / _LOG_BASE) + 1 if value_us >= 1.0 else 0
        c = self.counts
        c[i] = c.get(i, 0) + 1
        self.total += 1
        if value_us > self.max_us:
            self.max_us = value_us

    def merge(self, other: "Histogram") -> "Histogram":
        for i, n in other.counts.items():
            self.counts[i] = self.counts.get(i, 0) + n
        self.total += other.total
        self.max_us = max(self.max_us, other.max_us)
        return self

    def percentile(self, p: float) -> float:
        """The value at percentile ``p`` (0..100) in microseconds; 0 when empty."""
        if self.total == 0:
            return 0.0
        if p >= 100:
            return self.max_us
        rank = max(1, math.ceil(self.total * p / 100.0))
        seen = 0
        for i in sorted(self.counts):
            seen += self.counts[i]
            if seen >= rank:
                return min(bucket_value(i), self.max_us)
        return self.max_us

    def mean(self) -> float:
        if self.total == 0:
            return 0.0
        return sum(bucket_value(i) * n for i, n in self.counts.items()) / self.total

    def to_wire(self) -> dict[str, object]:
        """Sparse JSON form: ``{"error": 0.005, "max_us": ..., "buckets": {"idx": count}}``."""
        return {"error": ERROR, "max_us": self.max_us, "buckets": {str(i): n for i, n in sorted(self.counts.items())}}

    @classmethod
    def from_wire(cls, data: Mapping[str, object]) -> "Histogram":
        buckets = data.get("buckets", {})
        assert isinstance(buckets, Mapping)
        return cls({int(k): int(v) for k, v in buckets.items()}, float(data.get("max_us", 0.0)))  # type: ignore[arg-type]

    @classmethod
    def merged(cls, hists: Iterable["Histogram"]) -> "Histogram":
        out = cls()
        for h in hists:
            out.merge(h)
        return out


def summary_ms(hist: Histogram) -> dict[str, object]:
    """A histogram's p50, p95, p99 and max in milliseconds with its wire form, as ``Latency``
    takes them; without a sample there is no percentile (None, never 0)."""

    def pct(p: float) -> float | None:
        return hist.percentile(p) / 1000 if hist.total else None

    return {"p50_ms": pct(50), "p95_ms": pct(95), "p99_ms": pct(99),
            "max_ms": hist.max_us / 1000 if hist.total or hist.max_us else None, "histogram": hist.to_wire()}
