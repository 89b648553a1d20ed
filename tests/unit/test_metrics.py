"""Worker and collector metrics fed with literal reports: what a Prometheus scrape would show."""

from __future__ import annotations

import json

from prometheus_client.parser import text_string_to_metric_families

from services.collector.prometheus import CollectorMetrics
from services.common.results.histogram import Histogram
from services.common.messages.results import RunResult, Totals
from services.common.messages.runs import RunSpec
from services.common.monitoring.discovery import remove_sd_file, write_sd_file
from services.worker.driver.contract import Counts, Progress
from services.worker.metrics import WorkerMetrics


def run_spec(repetition: int = 1, threads: int = 16, target: str = "off") -> RunSpec:
    run_id = f"c1.{target}.oltp_point_select.t{threads}.r{repetition}"
    return RunSpec.model_validate({
        "schema": "benchfleet.run/1", "run_id": run_id, "campaign_id": "c1", "campaign_name": "c", "seq": 1,
        "total_runs": 4, "cell": {"target": target, "workload": "oltp_point_select", "threads": threads},
        "repetition": repetition, "target": {"kind": "dsn", "name": target, "user": "bench"}, "workload": {"name": "oltp_point_select"},
        "data": {}, "duration": 10, "warmup": 2, "seed": 1, "published_at": 0})


def result(run: RunSpec, queries: int, status: str = "ok", measured_s: float = 10.0) -> RunResult:
    return RunResult(run_id=run.run_id, campaign_id=run.campaign_id, cell=run.cell, repetition=run.repetition,
                     status=status, worker="w1", host="h", started_at=0.0, ended_at=100.0, measured_s=measured_s,
                     totals=Totals(transactions=queries // 10, reads=queries))


def samples(registry_text: bytes) -> dict[tuple[str, frozenset], float]:
    out = {}
    for fam in text_string_to_metric_families(registry_text.decode()):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(text: bytes, name: str, **labels: str) -> float | None:
    hits = [v for (n, ls), v in samples(text).items() if n == name and set(labels.items()) <= set(ls)]
    return sum(hits) if hits else None


def snapshot(second: int, tx: int, phase: str = "measure", latency: Histogram | None = None, **counts) -> Progress:
    """A driver's report: counts cumulative since the phase began."""
    return Progress(phase, float(second), Counts(transactions=tx, reads=tx * 8, writes=tx, other=tx, **counts),
                    latency=latency)


def test_per_second_reports_become_counters_and_current_rates():
    """Cumulative reports show as _total counters by kind and as the last second's q/s and tps."""
    m, run = WorkerMetrics("w1"), run_spec()
    m.run_started(run)
    m.observe_progress(run, snapshot(1, 100))
    m.observe_progress(run, snapshot(2, 250))
    text = m.scrape()
    assert value(text, "benchfleet_worker_queries_total", kind="read", threads="16") == 2000
    assert value(text, "benchfleet_worker_transactions_total") == 250
    assert value(text, "benchfleet_worker_queries_per_second") == 150 * 10
    assert value(text, "benchfleet_worker_transactions_per_second") == 150
    assert value(text, "benchfleet_worker_run_phase", phase="measure") == 1
    assert value(text, "benchfleet_worker_run_progress_ratio") == (2 + 2) / 12
    assert value(text, "benchfleet_worker_busy") == 1


def test_counters_never_go_down_when_measurement_restarts_the_counts():
    """Counts restarting at the start of measurement are folded in, so rate() sees no reset."""
    m, run = WorkerMetrics("w1"), run_spec()
    m.run_started(run)
    m.observe_progress(run, snapshot(1, 50, phase="warmup"))
    m.observe_progress(run, snapshot(1, 10))
    assert value(m.scrape(), "benchfleet_worker_transactions_total") == 60
    assert value(m.scrape(), "benchfleet_worker_run_progress_ratio") == 3 / 12


def test_warmup_reports_without_counts_only_move_progress():
    """The load engine's warm-up notes carry no counts; they advance progress and phase only."""
    m, run = WorkerMetrics("w1"), run_spec()
    m.run_started(run)
    m.observe_progress(run, Progress("warmup", 1.0))
    text = m.scrape()
    assert value(text, "benchfleet_worker_run_phase", phase="warmup") == 1
    assert value(text, "benchfleet_worker_run_progress_ratio") == 1 / 12
    assert value(text, "benchfleet_worker_transactions_total") == 0


def test_errors_by_code_and_latency_histogram():
    """Errors are split by server error code (rest 'unknown'); latency becomes a seconds histogram."""
    m, run = WorkerMetrics("w1"), run_spec()
    m.run_started(run)
    h = Histogram()
    for us in (400, 900, 3000, 80_000):
        h.record(us)
    m.observe_progress(run, snapshot(1, 10, errors=5, errors_by_code={"1205": 3}, latency=h))
    text = m.scrape()
    assert value(text, "benchfleet_worker_errors_total", code="1205") == 3
    assert value(text, "benchfleet_worker_errors_total", code="unknown") == 2
    assert value(text, "benchfleet_worker_transaction_latency_seconds_bucket", le="0.001") == 2
    assert value(text, "benchfleet_worker_transaction_latency_seconds_bucket", le="+Inf") == 4
    assert abs(value(text, "benchfleet_worker_transaction_latency_seconds_sum") - 0.0843) < 0.001


def test_errors_say_whether_the_run_ignores_their_code():
    """An error code the run's ignore_errors lists is labelled ignored="true" (a restarted transaction,
    which the error-rate alert leaves out); any other code, and errors without a code, "false"."""
    m, run = WorkerMetrics("w1"), run_spec()
    strict = run_spec(target="strict").model_copy(update={"ignore_errors": "all"})
    for r in (run, strict):
        m.run_started(r)
        m.observe_progress(r, snapshot(1, 10, errors=6, errors_by_code={"1205": 3, "1062": 1}))
    text = m.scrape()
    assert value(text, "benchfleet_worker_errors_total", target="off", code="1205", ignored="true") == 3
    assert value(text, "benchfleet_worker_errors_total", target="off", code="1062", ignored="false") == 1
    assert value(text, "benchfleet_worker_errors_total", target="off", code="unknown", ignored="false") == 2
    assert value(text, "benchfleet_worker_errors_total", target="strict", code="unknown", ignored="true") == 2


def test_finished_runs_leave_no_series_behind():
    """After many runs only worker-level series remain, so cardinality stays bounded."""
    m = WorkerMetrics("w1")
    for n in range(20):
        run = run_spec(threads=n + 1)
        m.run_started(run)
        m.observe_progress(run, snapshot(1, 10))
        m.run_finished(run, result(run, 100))
    text = m.scrape()
    assert value(text, "benchfleet_worker_queries_total") is None
    assert value(text, "benchfleet_worker_runs_total", status="ok") == 20
    assert value(text, "benchfleet_worker_busy") == 0
    assert value(text, "benchfleet_worker_up") == 1


def test_collector_cells_means_threads_and_collapse_ratio():
    """A cell exports its mean q/s/tps and thread count; the ratio compares the top count with the peak below."""
    m = CollectorMetrics()
    m.cell_finished("c1", "tpc", "oltp_simple", 128, [172000.0, 172166.0], [8600.0, 8608.0])
    m.cell_finished("c1", "tpc", "oltp_simple", 4096, [282.0], [14.0])
    text = m.scrape()
    assert value(text, "benchfleet_cell_queries_per_second", threads="128") == 172083
    assert value(text, "benchfleet_cell_transactions_per_second", threads="128") == 8604
    assert value(text, "benchfleet_cell_threads", threads="4096") == 4096
    assert value(text, "benchfleet_cell_repetitions", threads="128") == 2
    assert abs(value(text, "benchfleet_collapse_ratio", campaign="c1", target="tpc") - 282 / 172083) < 1e-12


def test_a_campaign_on_two_pools_exports_each_pools_cells_and_collapse_apart():
    """Results of one cell on two pools (run ids ending @POOL) are two series, not one mean of both:
    B collapses on rhel only, and only rhel's collapse ratio says so."""
    m = CollectorMetrics()
    for pool, top in (("suse", 9000.0), ("rhel", 300.0)):
        for threads, q in ((16, 10000.0), (256, top)):
            run = run_spec(threads=threads, target="B")
            run = run.model_copy(update={"run_id": f"{run.run_id}@{pool}"})
            m.observe_result(result(run, int(q * 10)), now=105.0)
    text = m.scrape()
    assert value(text, "benchfleet_cell_queries_per_second", threads="256", pool="suse") == 9000
    assert value(text, "benchfleet_cell_queries_per_second", threads="256", pool="rhel") == 300
    assert value(text, "benchfleet_collapse_ratio", target="B", pool="rhel") == 0.03
    assert value(text, "benchfleet_collapse_ratio", target="B", pool="suse") == 0.9
    # A campaign on one pool has no pool of its own in its labels (empty, which Prometheus drops).
    one = CollectorMetrics()
    one.observe_result(result(run_spec(), 1000), now=105.0)
    assert value(one.scrape(), "benchfleet_cell_queries_per_second", pool="") == 100


def test_ended_campaigns_export_when_they_ended():
    """A campaign the collector learnt has ended exports its end time (the collapse alert resolves
    after it); a running one exports none and is listed to be asked about again."""
    m = CollectorMetrics(max_campaigns=2)
    for campaign in ("c1", "c2"):
        m.cell_finished(campaign, "a", "oltp_point_select", 8, [100.0], [10.0])
    m.campaign_ended("c1", 1700000000.0)
    m.campaign_ended("unknown", 1.0)  # not exported: nothing to resolve
    text = m.scrape()
    assert value(text, "benchfleet_campaign_ended_timestamp_seconds", campaign="c1") == 1700000000.0
    assert value(text, "benchfleet_campaign_ended_timestamp_seconds", campaign="c2") is None
    assert value(text, "benchfleet_campaign_ended_timestamp_seconds", campaign="unknown") is None
    assert m.running_campaigns() == ["c2"]
    m.cell_finished("c3", "a", "oltp_point_select", 8, [100.0], [10.0])  # c1 is dropped, its end too
    assert value(m.scrape(), "benchfleet_campaign_ended_timestamp_seconds") is None
    assert m.running_campaigns() == ["c2", "c3"]


def test_collapse_ratio_is_the_highest_the_repetitions_allow():
    """With repetitions the exported ratio is check_peak's upper bound: a top at 49% of a clear
    peak stays above the 50% fraction (no alert), a fall to 10% stays below it; one repetition
    keeps the means' ratio."""
    from services.collector.prometheus import sure_ratio

    peak = [1000.0, 1010.0, 990.0]
    near = sure_ratio({4: peak, 8: [480.0, 520.0, 470.0]}, 490 / 1000)
    assert near > 0.5 > 490 / 1000
    far = sure_ratio({4: peak, 8: [100.0, 104.0, 96.0]}, 0.1)
    assert 0.1 < far < 0.5
    assert sure_ratio({4: [1000.0], 8: [100.0]}, 0.1) == 0.1


def test_collector_observe_result_replaces_redelivered_repetitions():
    """A redelivered result replaces its repetition instead of skewing the cell's mean."""
    m, run = CollectorMetrics(), run_spec()
    m.observe_result(result(run, 1000), now=105.0)
    m.observe_result(result(run, 3000), now=106.0)
    m.observe_result(result(run_spec(repetition=2), 1000), now=107.0)
    text = m.scrape()
    assert value(text, "benchfleet_cell_queries_per_second") == (300 + 100) / 2
    assert value(text, "benchfleet_collector_results_stored_total") == 3
    assert value(text, "benchfleet_collector_ingest_lag_seconds") == 7


def test_collector_keeps_only_recent_campaigns():
    """Cells of the oldest campaigns are dropped once more than max_campaigns are exported."""
    m = CollectorMetrics(max_campaigns=2)
    for c in ("a", "b", "c"):
        m.cell_finished(c, "t", "w", 8, [1.0], [1.0])
    names = {dict(ls)["campaign"] for (n, ls) in samples(m.scrape()) if n == "benchfleet_cell_threads"}
    assert names == {"b", "c"}


def test_sd_file_announces_endpoint_and_can_be_withdrawn(tmp_path):
    """The file-SD JSON names host:port and labels; removing it withdraws the target."""
    path = write_sd_file(tmp_path, "worker", "127.0.0.1", 9101, {"pool": "default"})
    assert path.name == "worker-127.0.0.1-9101.json"
    assert json.loads(path.read_text()) == [{"targets": ["127.0.0.1:9101"], "labels": {"pool": "default"}}]
    remove_sd_file(path)
    remove_sd_file(path)
    assert list(tmp_path.iterdir()) == []


def test_announced_serves_then_withdraws(tmp_path):
    """While a service runs its /metrics is served and announced; a clean stop withdraws both."""
    import urllib.request
    from dataclasses import replace

    from services.common.config import Settings
    from services.common.monitoring.discovery import announced

    m = WorkerMetrics("w-ann")
    settings = replace(Settings(), sd_dir=str(tmp_path))
    with announced(m, settings, "worker", {"pool": "p"}) as port:
        files = list(tmp_path.glob("worker-*.json"))
        assert len(files) == 1 and f":{port}" in files[0].read_text()
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
        assert b"benchfleet_worker_up" in body
    assert not list(tmp_path.glob("worker-*.json"))


def test_collector_restore_exports_earlier_cells_without_counting_them_as_stored():
    """A restarted collector shows the cells already in the results DB; a later redelivery still
    replaces its repetition instead of adding one."""
    from services.common.results.rows import ResultRow

    def row(run_id: str, threads: int, qps: float, status: str = "ok") -> ResultRow:
        return ResultRow(run_id=run_id, campaign_id="c0", target="off", workload="oltp_point_select",
                         threads=threads, repetition=1, status=status, qps=qps, tps=qps / 2, p95_ms=1.0,
                         p99_ms=2.0, measured_s=10.0, error=None)

    m = CollectorMetrics()
    m.restore([row("c0/a", 1, 100.0), row("c0/b", 1, 300.0), row("c0/c", 8, 50.0, "failed")])
    text = m.scrape()
    assert value(text, "benchfleet_cell_queries_per_second", campaign="c0", threads="1") == 200
    assert value(text, "benchfleet_cell_repetitions", campaign="c0", threads="1") == 2
    assert b'threads="8"' not in text
    assert value(text, "benchfleet_collector_results_stored_total") == 0


def test_stalled_seconds_count_live_and_survive_the_run():
    """Measured seconds without a transaction count as they are reported (warm-up never does), the
    counter stays after the run ends, and the result adds the seconds whose reports never came
    (sysbench leaves out its last)."""
    from services.common.results.stalls import assess

    m, run = WorkerMetrics("w1"), run_spec()
    m.run_started(run)
    assert value(m.scrape(), "benchfleet_worker_stalled_seconds_total", target="off") == 0
    m.observe_progress(run, Progress("warmup", 1.0))
    m.observe_progress(run, snapshot(1, 100))
    for second in (2, 3, 4):  # nothing completes
        m.observe_progress(run, snapshot(second, 100))
    m.observe_progress(run, snapshot(5, 180))
    m.observe_progress(run, snapshot(7, 180))  # a report two seconds late, still nothing: 2 more
    assert value(m.scrape(), "benchfleet_worker_stalled_seconds_total", target="off") == 3 + 2
    series = [100, 0, 0, 0, 80, 0, 0, 0, 0, 0]
    done = result(run, 1800).model_copy(update={"quality": assess(series, warmup_s=2, duration_s=10, wall_s=40)})
    m.run_finished(run, done)
    text = m.scrape()
    assert value(text, "benchfleet_worker_transactions_total") is None  # the run's own series are gone
    assert value(text, "benchfleet_worker_stalled_seconds_total", target="off", workload="oltp_point_select",
                 campaign="c1", threads="16", worker="w1") == 8


def test_stalls_of_a_slow_open_loop_run_are_not_counted():
    """At 1 transaction/s an empty second is expected: the counter stays at 0."""
    m = WorkerMetrics("w1")
    run = run_spec().model_copy(update={"rate": 1.0})
    m.run_started(run)
    for second in (1, 2, 3):
        m.observe_progress(run, snapshot(second, 1))
    assert value(m.scrape(), "benchfleet_worker_stalled_seconds_total") == 0


def test_stall_counters_are_bounded():
    """Cells beyond MAX_STALL_SERIES drop the oldest counter, so a long-lived worker stays bounded."""
    from services.worker import metrics as wm

    m = WorkerMetrics("w1")
    for i in range(wm.MAX_STALL_SERIES + 3):
        run = run_spec(target=f"t{i}")
        m.run_started(run)
        m.run_finished(run, None)
    names = [ls for (n, ls) in samples(m.scrape()) if n == "benchfleet_worker_stalled_seconds_total"]
    assert len(names) == wm.MAX_STALL_SERIES
    assert not any(("target", "t0") in ls for ls in names)
