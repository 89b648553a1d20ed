"""The collector's Prometheus metrics: finished cells, their collapse ratio, each spec's standing
regression, and ingest health.

Finished-cell gauges are what the throughput-vs-threads dashboard and the collapse alert
read. The thread count is exported as a value too (``benchfleet_cell_threads``), because
PromQL cannot take the max of a label. A campaign on several pools has each pool's cells apart
(label ``pool``, empty for a campaign on one pool): one platform's collapse is not averaged away
by another's.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from statistics import fmean
from typing import Any, Iterable, Iterator, Mapping, Sequence

from prometheus_client import Counter, Gauge
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from services.common.messages.results import RunResult
from services.common.messages.runs import pool_of_run_id
from services.common.monitoring.endpoint import MetricsEndpoint
from services.common.results.rows import ResultRow
from services.reporting.collapse import DEFAULT_FRACTION, CellThroughput, at_top_threads
from services.reporting.peak import check_peak

CELL_LABELS = ["campaign", "target", "workload", "threads", "pool"]
#: Campaigns whose cells stay exported; older ones are dropped so series stay bounded.
MAX_CAMPAIGNS = 50

_CellKey = tuple[str, str, int, str]  # target, workload, threads, pool ('' for a campaign on one pool)


def _cell_key(run_id: str, target: str, workload: str, threads: int) -> _CellKey:
    return (target, workload, threads, pool_of_run_id(run_id) or "")


def sure_ratio(by_threads: Mapping[int, Sequence[float]], point: float, *,
               fraction: float = DEFAULT_FRACTION) -> float:
    """The top thread count's q/s over the peak's, as high as the repetitions allow at 95%
    (1 + ``PeakCheck.drop_high``), so the alert's ``< fraction`` fires exactly when check_peak is
    sure of the collapse; ``point`` (the means' ratio) when a cell has fewer than 2 repetitions."""
    check = check_peak(by_threads, margin=1 - fraction) if 0 < fraction < 1 else None
    return point if check is None else 1 + check.drop_high


class _CellCollector(Collector):
    def __init__(self, owner: "CollectorMetrics"):
        self.owner = owner

    def collect(self) -> Iterator[Any]:
        qps = GaugeMetricFamily("benchfleet_cell_queries_per_second", "Mean q/s of a cell over its repetitions.", labels=CELL_LABELS)
        tps = GaugeMetricFamily("benchfleet_cell_transactions_per_second", "Mean transactions/s of a cell over its repetitions.", labels=CELL_LABELS)
        threads = GaugeMetricFamily("benchfleet_cell_threads", "Thread count of a cell, as a value.", labels=CELL_LABELS)
        reps = GaugeMetricFamily("benchfleet_cell_repetitions", "Repetitions a cell's means are taken over.", labels=CELL_LABELS)
        ratio = GaugeMetricFamily(
            "benchfleet_collapse_ratio",
            "q/s at the highest thread count divided by the peak q/s at lower thread counts: the highest "
            "ratio the repetitions allow at 95% confidence (peak.check_peak), the ratio of the means "
            "while a cell has fewer than 2 repetitions.",
            labels=["campaign", "target", "workload", "pool"])
        ended = GaugeMetricFamily(
            "benchfleet_campaign_ended_timestamp_seconds",
            "When a campaign's last run reached its final state (absent while it runs); the collapse alert "
            "resolves a while after it.", labels=["campaign"])
        with self.owner._lock:
            campaigns = {c: dict(cells) for c, cells in self.owner._cells.items()}
            runs = list(self.owner._runs.values())
            for campaign, at in self.owner._ended.items():
                ended.add_metric([campaign], at)
        curves: dict[tuple[str, str, str, str], dict[int, list[float]]] = {}
        for campaign, (target, workload, n, pool), q, _ in runs:
            curves.setdefault((campaign, target, workload, pool), {}).setdefault(n, []).append(q)
        for campaign, cells in campaigns.items():
            for (target, workload, n, pool), (q, t, r) in sorted(cells.items()):
                lv = [campaign, target, workload, str(n), pool]
                qps.add_metric(lv, q)
                tps.add_metric(lv, t)
                threads.add_metric(lv, n)
                reps.add_metric(lv, r)
            for pool in sorted({k[3] for k in cells}):
                tops = at_top_threads(CellThroughput(tg, wl, n, q)
                                      for (tg, wl, n, pl), (q, _, _) in cells.items() if pl == pool)
                for (target, workload), p in sorted(tops.items()):
                    ratio.add_metric([campaign, target, workload, pool],
                                     sure_ratio(curves.get((campaign, target, workload, pool), {}), p.ratio))
        regression = GaugeMetricFamily(
            "benchfleet_regression",
            "1 when a spec's newest campaign lies after a worse change point that still stands (collector history "
            "SPEC --changes: E-Divisive means, one false-discovery family), 0 when none; since: the campaign "
            "the shift began at.", labels=["spec", "campaign", "since"])
        for spec, (newest, since) in sorted(self.owner.regressions().items()):
            regression.add_metric([spec, newest, since], 1 if since else 0)
        yield from (qps, tps, threads, reps, ratio, ended, regression)


class CollectorMetrics(MetricsEndpoint):
    """The collector's metrics on their own registry."""

    def __init__(self, *, max_campaigns: int = MAX_CAMPAIGNS):
        super().__init__()
        self.max_campaigns = max_campaigns
        self._lock = threading.Lock()
        # campaign -> cell -> (mean q/s, mean tps, repetitions); insertion order = age.
        self._cells: OrderedDict[str, dict[_CellKey, tuple[float, float, int]]] = OrderedDict()
        # run id -> (campaign, cell, q/s, tps), so a redelivered result replaces its repetition.
        self._runs: dict[str, tuple[str, _CellKey, float, float]] = {}
        # campaign -> when its last run ended, for the exported campaigns that ended.
        self._ended: dict[str, float] = {}
        # spec name -> (its newest campaign, the campaign of a worse change that still stands or "").
        self._regressions: dict[str, tuple[str, str]] = {}
        self._stored = Counter("benchfleet_collector_results_stored", "Results stored in the results DB.", registry=self.registry)
        self._lag = Gauge("benchfleet_collector_ingest_lag_seconds",
                          "Seconds between a run's end and its result being stored, for the latest result.",
                          registry=self.registry)
        self._depth = Gauge("benchfleet_collector_queue_messages", "Messages waiting in a queue.", ["queue"], registry=self.registry)
        self._db_up = Gauge("benchfleet_collector_results_db_up",
                            "1 while the results DB answers; 0 while it is away and results wait in the queue.",
                            registry=self.registry)
        self.registry.register(_CellCollector(self))

    def cell_finished(self, campaign_id: str, target: str, workload: str, threads: int,
                      qps_values: list[float], tps_values: list[float], pool: str = "") -> None:
        """Export a cell's means over its repetitions (replacing what was there); ``pool`` for a
        campaign on several pools."""
        if not qps_values or len(qps_values) != len(tps_values):
            raise ValueError("need one q/s and one tps value per repetition")
        with self._lock:
            cells = self._cells.setdefault(campaign_id, {})
            cells[(target, workload, int(threads), pool)] = (fmean(qps_values), fmean(tps_values), len(qps_values))
            while len(self._cells) > self.max_campaigns:
                old, _ = self._cells.popitem(last=False)
                self._runs = {k: v for k, v in self._runs.items() if v[0] != old}
                self._ended.pop(old, None)

    def observe_result(self, result: RunResult, *, now: float | None = None) -> None:
        """Convenience for the consumer: count a stored result and refresh its cell's means."""
        self.results_stored()
        self.ingest_lag((time.time() if now is None else now) - result.ended_at)
        if result.status != "ok" or result.measured_s <= 0:  # no measured second: no q/s, not 0
            return
        key = _cell_key(result.run_id, result.cell.target, result.cell.workload, result.cell.threads)
        with self._lock:
            self._runs[result.run_id] = (result.campaign_id, key, result.qps, result.tps)
            reps = [(q, t) for c, k, q, t in self._runs.values() if c == result.campaign_id and k == key]
        self._export(result.campaign_id, key, reps)

    def restore(self, results: Iterable[ResultRow]) -> None:
        """Export the cells of results stored before this collector started (oldest campaign
        first), so a restart does not empty the dashboards; counts nothing as newly stored."""
        by_cell: dict[tuple[str, _CellKey], list[tuple[float, float]]] = {}
        with self._lock:
            for row in results:
                if row.status != "ok" or row.measured_s <= 0:
                    continue
                key = _cell_key(row.run_id, row.target, row.workload, row.threads)
                self._runs[row.run_id] = (row.campaign_id, key, row.qps, row.tps)
                by_cell.setdefault((row.campaign_id, key), []).append((row.qps, row.tps))
        for (campaign_id, key), reps in by_cell.items():
            self._export(campaign_id, key, reps)

    def _export(self, campaign_id: str, key: _CellKey, reps: Sequence[tuple[float, float]]) -> None:
        target, workload, threads, pool = key
        self.cell_finished(campaign_id, target, workload, threads, [q for q, _ in reps], [t for _, t in reps], pool)

    def running_campaigns(self) -> list[str]:
        """The exported campaigns not known to have ended (the collector asks the results DB)."""
        with self._lock:
            return [c for c in self._cells if c not in self._ended]

    def campaign_ended(self, campaign_id: str, at: float) -> None:
        """A campaign's runs all reached their final state at ``at``: the collapse alert resolves a
        while after (deploy/prometheus/rules.yml), so campaigns restored at start-up that ended
        long ago do not page again."""
        with self._lock:
            if campaign_id in self._cells:
                self._ended[campaign_id] = at

    def spec_judged(self, spec: str, newest: str, worse_since: str | None) -> None:
        """A spec's change points after its newest campaign ended: ``worse_since`` is the campaign of a
        worse shift that still stands (the regression the alert names), None when there is none."""
        with self._lock:
            self._regressions[spec] = (newest, worse_since or "")

    def regressions(self) -> dict[str, tuple[str, str]]:
        with self._lock:
            return dict(self._regressions)

    def results_stored(self, n: int = 1) -> None:
        self._stored.inc(n)

    def ingest_lag(self, seconds: float) -> None:
        self._lag.set(max(seconds, 0.0))

    def results_db_up(self, up: bool) -> None:
        self._db_up.set(1 if up else 0)

    def queue_depth(self, queue: str, n: int) -> None:
        self._depth.labels(queue).set(n)
