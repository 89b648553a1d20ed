"""The worker's live Prometheus metrics, fed by the load drivers' Progress reports.

Nothing here is touched per query: ``observe_progress`` turns one cumulative Progress a second
into counters and gauges. Series of a run are labelled campaign/target/workload/threads
and dropped when the run finishes, so a worker that runs thousands of cells keeps a
bounded number of series. The stalled-seconds counter outlives its run (the last
``MAX_STALL_SERIES`` cells), so a stall at a run's end still reaches Prometheus and the alert. """

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field, fields
from typing import Any, Iterator

from prometheus_client import Counter, Gauge
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import Collector

from services.common.results.histogram import Histogram, bucket_value
from services.common.messages.results import RunResult
from services.common.messages.runs import RunSpec
from services.common.monitoring.endpoint import MetricsEndpoint
from services.common.results.stalls import stalled_seconds
from services.common.spec.ignore_errors import IgnoreErrors, ignores
from services.worker.driver.contract import Counts, IntervalPercentile, Phase, Progress

RUN_LABELS = ("worker", "campaign", "target", "workload", "threads")
#: Latency bucket bounds (seconds): OLTP statements from sub-millisecond point selects to
#: multi-second stalls at thousands of clients.
LATENCY_BUCKETS_S = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
_KINDS = {"reads": "read", "writes": "write", "other": "other"}
_NUMBERS = tuple(f.name for f in fields(Counts) if f.name != "errors_by_code")
#: Cells whose stalled-seconds counter stays exported after their runs ended (oldest dropped first).
MAX_STALL_SERIES = 500


@dataclass
class _Run:
    """Monotonic totals of one run, built from Progress whose counts restart with each phase."""

    labels: tuple[str, ...]
    warmup_s: float
    duration_s: float
    threads: int
    phase: Phase | str = "starting"
    elapsed_s: float = 0.0
    #: Counts of the phases before this one; ``last`` is the current phase's latest Progress.
    base: Counts = field(default_factory=Counts)
    last: Counts = field(default_factory=Counts)
    base_latency: Histogram = field(default_factory=Histogram)
    last_latency: Histogram | None = None
    #: Over the last reported second; None until a second was reported (no sample, never 0).
    qps: float | None = None
    tps: float | None = None
    #: Open-loop rate (None: closed loop) and the stalled seconds counted live so far.
    rate: float | None = None
    stalled_s: int = 0
    #: The errors the run was told to survive (its ignore_errors), to label each code.
    ignore: IgnoreErrors = ()
    #: The last interval's latency percentile, from a driver that reports only that (sysbench).
    interval_percentile: IntervalPercentile | None = None

    def total(self) -> Counts:
        return self.base + self.last

    def latency(self) -> Histogram:
        return Histogram.merged((self.base_latency, self.last_latency or Histogram()))

    def progress(self) -> float:
        span = self.warmup_s + self.duration_s
        done = self.elapsed_s if self.phase == "warmup" else self.warmup_s + self.elapsed_s
        return min(max(done / span, 0.0), 1.0) if span > 0 else 0.0


def _attributed(counts: Counts) -> Counts:
    """``counts`` with errors no server error code accounts for under the code "unknown"."""
    unattributed = counts.errors - sum(counts.errors_by_code.values())
    if unattributed <= 0:
        return counts
    return counts + Counts(errors_by_code={"unknown": unattributed})


def _ignored(policy: IgnoreErrors, code: str) -> str:
    """The ``ignored`` label of an error code: "true" when the run survives it (the alert on
    errors leaves those out: they are restarted transactions, not failures)."""
    return "true" if ignores(policy, int(code) if code.isdigit() else -1) else "false"


def _restarted(before: Counts, now: Counts) -> bool:
    return any(getattr(now, k) < getattr(before, k) for k in _NUMBERS)


class _RunCollector(Collector):
    """Renders the active runs at scrape time, so finished runs simply stop appearing."""

    def __init__(self, owner: "WorkerMetrics"):
        self.owner = owner

    def collect(self) -> Iterator[Any]:
        with self.owner._lock:
            runs = list(self.owner._runs.values())
            stalls = list(self.owner._stalls.items())
            yield from _families(runs, stalls)


def _families(runs: list[_Run], stalls: list[tuple[tuple[str, ...], int]]) -> Iterator[Any]:
    L = list(RUN_LABELS)
    stalled = CounterMetricFamily(
        "benchfleet_worker_stalled_seconds",
        "Measured seconds in which no transaction completed (a stall), per cell; kept after the run ends.",
        labels=L)
    for labels, seconds in stalls:
        stalled.add_metric(list(labels), seconds)
    yield stalled
    queries = CounterMetricFamily("benchfleet_worker_queries", "Queries sent, by kind (read, write, other).", labels=L + ["kind"])
    tx = CounterMetricFamily("benchfleet_worker_transactions", "Transactions completed.", labels=L)
    errors = CounterMetricFamily(
        "benchfleet_worker_errors",
        "Failed statements, by server error code; ignored is true for the codes the run survives (ignore_errors).",
        labels=L + ["code", "ignored"])
    ignored = CounterMetricFamily("benchfleet_worker_ignored_errors", "Errors the workload ignores and retries (e.g. deadlocks).", labels=L)
    reconnects = CounterMetricFamily("benchfleet_worker_reconnects", "Client reconnections.", labels=L)
    qps = GaugeMetricFamily("benchfleet_worker_queries_per_second", "Queries per second over the last reported second.", labels=L)
    tps = GaugeMetricFamily("benchfleet_worker_transactions_per_second", "Transactions per second over the last reported second.", labels=L)
    progress = GaugeMetricFamily("benchfleet_worker_run_progress_ratio", "How far the run is through warm-up plus measurement, 0 to 1.", labels=L)
    phase = GaugeMetricFamily("benchfleet_worker_run_phase", "1 for the phase the run is in (starting, warmup, measure).", labels=L + ["phase"])
    threads = GaugeMetricFamily("benchfleet_worker_run_threads", "Client connections of the run.", labels=L)
    latency = HistogramMetricFamily("benchfleet_worker_transaction_latency_seconds",
                                    "Transaction latency since measurement began (native driver).", labels=L)
    interval_pct = GaugeMetricFamily(
        "benchfleet_worker_interval_latency_seconds",
        "Transaction latency at a percentile over the last report interval, as sysbench prints it "
        "(sysbench driver; absent for an interval without a completed transaction).", labels=L + ["percentile"])
    for r in runs:
        lv = list(r.labels)
        total = r.total()
        for key, kind in _KINDS.items():
            queries.add_metric(lv + [kind], getattr(total, key))
        tx.add_metric(lv, total.transactions)
        for code, n in sorted(total.errors_by_code.items()):
            errors.add_metric(lv + [code, _ignored(r.ignore, code)], n)
        ignored.add_metric(lv, total.ignored_errors)
        reconnects.add_metric(lv, total.reconnects)
        if r.qps is not None and r.tps is not None:
            qps.add_metric(lv, r.qps)
            tps.add_metric(lv, r.tps)
        progress.add_metric(lv, r.progress())
        for p in ("starting", "warmup", "measure"):
            phase.add_metric(lv + [p], 1.0 if r.phase == p else 0.0)
        threads.add_metric(lv, r.threads)
        hist = r.latency()
        if hist.total:
            latency.add_metric(lv, *_prom_buckets(hist))
        if r.interval_percentile is not None:
            interval_pct.add_metric(lv + [f"{r.interval_percentile.percentile:g}"], r.interval_percentile.ms / 1000)
    yield from (queries, tx, errors, ignored, reconnects, qps, tps, progress, phase, threads, latency, interval_pct)


def _prom_buckets(hist: Histogram) -> tuple[list[tuple[str, float]], float]:
    """Our log buckets re-binned into Prometheus' cumulative ``le`` buckets (values in µs)."""
    buckets = sorted(hist.counts.items())
    out, total_sum, i = [], 0.0, 0
    cumulative = 0
    for le in LATENCY_BUCKETS_S:
        while i < len(buckets) and bucket_value(buckets[i][0]) / 1e6 <= le:
            n = buckets[i][1]
            cumulative += n
            total_sum += n * bucket_value(buckets[i][0]) / 1e6
            i += 1
        out.append((repr(le), cumulative))
    for b, n in buckets[i:]:
        cumulative += n
        total_sum += n * bucket_value(b) / 1e6
    out.append(("+Inf", cumulative))
    return out, total_sum


class WorkerMetrics(MetricsEndpoint):
    """One worker's metrics on its own registry (tests run several side by side)."""

    def __init__(self, worker_id: str):
        self.worker_id = worker_id
        super().__init__()
        self._lock = threading.Lock()
        self._runs: dict[str, _Run] = {}
        #: Stalled seconds per cell (RUN_LABELS values), oldest first.
        self._stalls: OrderedDict[tuple[str, ...], int] = OrderedDict()
        self._up = Gauge("benchfleet_worker_up", "1 while the worker process serves metrics.", ["worker"], registry=self.registry)
        self._busy = Gauge("benchfleet_worker_busy", "1 while the worker executes a run.", ["worker"], registry=self.registry)
        self._finished = Counter("benchfleet_worker_runs", "Runs finished, by status.", ["worker", "status"], registry=self.registry)
        self._up.labels(worker_id).set(1)
        self._busy.labels(worker_id).set(0)
        self.registry.register(_RunCollector(self))

    def run_started(self, run: RunSpec, worker_id: str | None = None) -> None:
        """A run was taken: its series appear (all zero) and the worker is busy."""
        worker = worker_id or self.worker_id
        labels = (worker, run.campaign_id, run.cell.target, run.cell.workload, str(run.cell.threads))
        with self._lock:
            self._runs[run.run_id] = _Run(labels, run.warmup, run.duration, run.cell.threads, rate=run.rate,
                                          ignore=run.ignored_errors)
            # Exported from 0 at the start, so Prometheus' increase() sees the first stall.
            self._stalls[labels] = self._stalls.get(labels, 0)
            self._stalls.move_to_end(labels)
            while len(self._stalls) > MAX_STALL_SERIES:
                self._stalls.popitem(last=False)
        self._busy.labels(self.worker_id).set(1)

    def observe_progress(self, run: RunSpec, progress: Progress) -> None:
        """Fold one Progress (counts cumulative since its phase began) into the run's series."""
        with self._lock:
            r = self._runs.get(run.run_id)
            if r is None:
                return  # a report racing run_finished; the run is already gone
            counts = _attributed(progress.counts)
            # Seconds this report covers: since the previous one, or since measurement began.
            new_phase = progress.phase != r.phase
            span = progress.elapsed_s if new_phase else progress.elapsed_s - r.elapsed_s
            if new_phase or _restarted(r.last, counts):
                # Counts restart when measurement starts; fold what came before into the
                # base so the exported counters never go down.
                r.base = r.base + r.last
                if r.last_latency is not None:
                    r.base_latency = Histogram.merged((r.base_latency, r.last_latency))
                r.last, r.last_latency, prev_elapsed = Counts(), None, 0.0
            else:
                prev_elapsed = r.elapsed_s
            dt = progress.elapsed_s - prev_elapsed
            if dt > 0:
                r.qps = (counts.queries - r.last.queries) / dt
                r.tps = (counts.transactions - r.last.transactions) / dt
            if progress.phase == "measure":
                stalled = stalled_seconds(progress.elapsed_s, span, counts.transactions - r.last.transactions,
                                          duration_s=r.duration_s, rate=r.rate)
                if stalled:
                    r.stalled_s += stalled
                    self._add_stall(r.labels, stalled)
            r.last = counts
            if progress.latency is not None:
                r.last_latency = progress.latency
            if progress.phase == "measure":
                r.interval_percentile = progress.interval_percentile
            r.phase, r.elapsed_s = progress.phase, progress.elapsed_s

    def _add_stall(self, labels: tuple[str, ...], seconds: int) -> None:
        # Called with the lock held.
        self._stalls[labels] = self._stalls.get(labels, 0) + seconds

    def run_finished(self, run: RunSpec, result: RunResult | None = None) -> None:
        """Drop the run's series (bounded cardinality) and count it by status."""
        with self._lock:
            r = self._runs.pop(run.run_id, None)
            busy = bool(self._runs)
            quality = result.quality if result is not None else None
            if r is not None and quality is not None and quality.stalled_s > r.stalled_s:
                # The result has the last word: sysbench leaves out the report of a run's last second.
                self._add_stall(r.labels, quality.stalled_s - r.stalled_s)
        self._finished.labels(self.worker_id, result.status if result is not None else "cancelled").inc()
        self._busy.labels(self.worker_id).set(1 if busy else 0)
