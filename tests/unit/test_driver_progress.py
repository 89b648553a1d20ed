"""Live progress of both drivers through the worker's metrics: what a Prometheus scrape shows."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from services.common.results.histogram import Histogram
from services.worker.driver.contract import Counts, Progress
from services.worker.driver.native import child, parent
from services.common.results import sysbench_output as so
from services.worker.driver.sysbench.live import LiveProgress
from services.worker.metrics import WorkerMetrics
from tests.unit.test_metrics import run_spec, value

FIXTURES = Path(__file__).parent / "fixtures" / "sysbench"


def _sysbench_progress(fixture: str, *, open_loop: bool = False) -> list[Progress]:
    """What the sysbench driver reports while sysbench prints ``fixture``, line by line."""
    seen: list[Progress] = []
    live = LiveProgress(seen.append, open_loop=open_loop)
    for line in (FIXTURES / fixture).read_text().splitlines(keepends=True):
        live.feed(line)
    live.flush()
    return seen


def test_sysbench_progress_exports_running_totals_and_the_last_seconds_rate():
    """sysbench prints per-second rates (653.79, 660.86, 700.08 tx/s); the worker exports their
    running total (2015) and the last second's rate (700), not the last rate as a total."""
    m, run = WorkerMetrics("w1"), run_spec()
    m.run_started(run)
    for p in _sysbench_progress("oltp_read_write_pareto_histogram.txt"):
        m.observe_progress(run, p)
    text = m.scrape()
    assert value(text, "benchfleet_worker_transactions_total") == 2015
    assert value(text, "benchfleet_worker_transactions_per_second") == 700
    # 9194.94 + 9264.01 + 9858.10 reads, 2619.14 + 2643.43 + 2805.31 writes
    assert value(text, "benchfleet_worker_queries_total", kind="read") == 28317
    assert value(text, "benchfleet_worker_queries_total", kind="write") == 8068
    assert value(text, "benchfleet_worker_queries_per_second") == 14066
    # err/s 1, 2, 3: sysbench only survives errors it ignores
    assert value(text, "benchfleet_worker_ignored_errors_total") == 6
    assert value(text, "benchfleet_worker_run_phase", phase="measure") == 1


def test_sysbench_running_totals_round_once_so_they_do_not_drift():
    """555.47 + 531.21 + 520.01 tx/s add up to 1607, sysbench's own final count; rounding each
    second first would give 1606. With --rate each Progress carries its second's queue line."""
    text = (FIXTURES / "oltp_point_select_rate.txt").read_text()
    seen = _sysbench_progress("oltp_point_select_rate.txt", open_loop=True)
    assert [p.elapsed_s for p in seen] == [1.0, 2.0, 3.0]
    assert [p.counts.transactions for p in seen] == [555, 1087, 1607]
    assert seen[-1].counts.transactions == so.parse_final(text).transactions
    assert [p.queue for p in seen] == [0, 0, 0]


class FakeCore:
    """What a load process's control thread reads of its core: counts so far, latency, queue."""

    def __init__(self):
        self.total = Counts()

    def add(self, **counts) -> None:
        codes = dict(self.total.errors_by_code)
        for code, n in counts.pop("errors_by_code", {}).items():
            codes[code] = codes.get(code, 0) + n
        fields = {k: getattr(self.total, k) + v for k, v in counts.items()}
        self.total = dataclasses.replace(self.total, errors_by_code=codes, **fields)

    def counts(self) -> Counts:
        return self.total

    def latency(self) -> Histogram:
        return Histogram()

    def queue(self, now: float) -> None:
        return None


def _native_second(seconds: list[child._Seconds]) -> Progress:
    """Every load process closes its second; the parent merges their Ticks."""
    return parent._progress([s.close() for s in seconds])


def test_native_progress_from_two_load_processes_exports_totals_and_rates():
    """Two load processes of two connections each count in their cores as the load loop does;
    the merged Progress exports the whole run's totals, its last second's rates and error codes."""
    m, run = WorkerMetrics("w1"), run_spec()
    m.run_started(run)
    cores = [FakeCore() for _ in range(2)]
    seconds = [child._Seconds(c, t_end=1e9) for c in cores]
    for tx_per_client in (100, 90, 110):
        for c in cores:
            c.add(transactions=2 * tx_per_client, reads=2 * 10 * tx_per_client)
        cores[0].add(errors_by_code={"1213": 1}, ignored_errors=1)
        cores[1].add(errors_by_code={"2013": 1}, reconnects=1)
        m.observe_progress(run, _native_second(seconds))
    text = m.scrape()
    assert value(text, "benchfleet_worker_transactions_total") == 4 * 300
    assert value(text, "benchfleet_worker_transactions_per_second") == 4 * 110
    assert value(text, "benchfleet_worker_queries_total", kind="read") == 4 * 3000
    assert value(text, "benchfleet_worker_queries_per_second") == 4 * 1100
    assert value(text, "benchfleet_worker_errors_total", code="1213") == 3
    assert value(text, "benchfleet_worker_ignored_errors_total") == 3
    assert value(text, "benchfleet_worker_reconnects_total") == 3
    # Each process's series holds its own per-second counts, not running totals, ignored errors
    # and reconnects included.
    assert seconds[0].series().transactions == [200, 180, 220]
    assert seconds[0].series().ignored_errors == [1, 1, 1] and seconds[1].series().reconnects == [1, 1, 1]


def test_native_warmup_notes_then_measurement():
    """The native driver's warm-up notes move progress; measured seconds then count from zero."""
    m, run = WorkerMetrics("w1"), run_spec()
    m.run_started(run)
    m.observe_progress(run, Progress("warmup", 1.0))
    assert value(m.scrape(), "benchfleet_worker_run_phase", phase="warmup") == 1
    core = FakeCore()
    seconds = [child._Seconds(core, t_end=1e9)]
    core.add(transactions=7)
    m.observe_progress(run, _native_second(seconds))
    text = m.scrape()
    assert value(text, "benchfleet_worker_transactions_total") == 7
    assert value(text, "benchfleet_worker_transactions_per_second") == 7
    assert value(text, "benchfleet_worker_run_progress_ratio") == 3 / 12
