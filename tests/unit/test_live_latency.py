"""The live latency both drivers report while a run measures, and what a worker's scrape shows of it."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from services.common.messages.runs import RunSpec
from services.common.results.histogram import Histogram
from services.worker.driver.contract import Counts, IntervalPercentile, Progress
from services.worker.driver.native.parent import _progress
from services.worker.driver.native.protocol import Tick
from services.worker.driver.sysbench.live import LiveProgress
from services.worker.metrics import WorkerMetrics

from tests.metered_run import metered_run

STALL = [
    "[ 1s ] thds: 2 tps: 822.21 qps: 822.21 (r/w/o: 0.00/822.21/0.00) lat (ms,95%): 8.28 err/s: 0.00 reconn/s: 0.00",
    "[ 2s ] thds: 2 tps: 0.00 qps: 0.00 (r/w/o: 0.00/0.00/0.00) lat (ms,95%): 0.00 err/s: 0.00 reconn/s: 0.00",
]


def _run() -> RunSpec:
    return metered_run(duration=10, seed=1)


def _samples(m: WorkerMetrics, name: str) -> dict[frozenset, float]:
    out = {}
    for fam in text_string_to_metric_families(m.scrape().decode()):
        for s in fam.samples:
            if s.name == name:
                out[frozenset(s.labels.items())] = s.value
    return out


def _hist(*us: float) -> Histogram:
    h = Histogram()
    for v in us:
        h.record(v)
    return h


def test_sysbench_report_lines_carry_their_percentile_and_an_empty_second_none():
    """A report line's `lat (ms,95%)` is that second's 95th percentile; a second without a completed
    transaction prints 0.00, which is no latency (None), not a latency of 0."""
    seen: list[Progress] = []
    live = LiveProgress(seen.append)
    for line in STALL:
        live.feed(line)
    assert [s.interval_percentile for s in seen] == [IntervalPercentile(95.0, 8.28), None]


def test_the_worker_exports_sysbench_percentile_as_a_gauge_and_drops_it_for_an_empty_second():
    """The gauge benchfleet_worker_interval_latency_seconds{percentile="95"} holds the last second's
    figure in seconds, and disappears for a second in which nothing completed (n/a, never 0)."""
    m, run = WorkerMetrics("w1"), _run()
    m.run_started(run)
    live = LiveProgress(lambda p: m.observe_progress(run, p))
    live.feed(STALL[0])
    [(labels, value)] = _samples(m, "benchfleet_worker_interval_latency_seconds").items()
    assert dict(labels)["percentile"] == "95" and abs(value - 0.00828) < 1e-12
    live.feed(STALL[1])
    assert _samples(m, "benchfleet_worker_interval_latency_seconds") == {}


def test_native_progress_merges_the_processes_histograms_and_the_worker_exports_it():
    """One second's Progress holds the latency of every load process, and a scrape shows the histogram
    (the panel's histogram_quantile reads its buckets); a second from processes without one has none."""
    ticks = [Tick(1, Counts(transactions=2), latency=_hist(300, 900)), Tick(1, Counts(transactions=1),
                                                                            latency=_hist(40_000))]
    progress = _progress(ticks)
    assert progress.latency is not None and progress.latency.total == 3 and progress.latency.max_us == 40_000
    assert _progress([Tick(1, Counts())]).latency is None
    m, run = WorkerMetrics("w1"), _run()
    m.run_started(run)
    m.observe_progress(run, progress)
    assert sum(_samples(m, "benchfleet_worker_transaction_latency_seconds_count").values()) == 3
    buckets = {dict(k)["le"]: v for k, v in _samples(m, "benchfleet_worker_transaction_latency_seconds_bucket").items()}
    assert buckets["0.001"] == 2 and buckets["+Inf"] == 3
