"""The thread-pool monitor: the per-second series built from literal status samples and table
rows, the per-cell summary, and the reading sentence its thresholds decide."""

from __future__ import annotations

from services.common.messages.pool import PoolSecond, PoolSeries
from services.common.messages.results import RunResult, ServerReport
from services.common.messages.runs import Cell
from services.common.results.rows import ResultRow
from services.reporting import pool as report_pool
from services.reporting.analysis import CampaignData
from services.reporting.options import ReportOptions
from services.reporting.render.html import render_html_report
from services.reporting.report import analyse, render_lines, render_markdown_lines
from services.worker.target.pool_figures import GroupRow, QueueRow, StatsRow, pool_series, tables_sample

T0 = 1_000_000.0  # the warm-up's start


def _status(t: float, commits: float, **gauges: float) -> tuple[float, dict[str, float]]:
    return (t, {"Com_commit": commits, "Threadpool_threads": 5, "Threadpool_idle_threads": 1,
                "Threads_running": 3, "Threads_connected": 65, **gauges})


def test_tables_are_summed_over_groups_and_queues_split_by_priority():
    """Two groups, one stalled: queue lengths and active threads add up, the high-priority queue
    (0) is apart from the low one, and the longest wait is in milliseconds."""
    s = tables_sample(T0, [GroupRow(0, 40, 3, 2, 0, 30, True, True), GroupRow(1, 24, 2, 1, 0, 5, True, False)],
                      [QueueRow(0, 12, 250_000), QueueRow(1, 23, 1_200_000)],
                      [StatsRow(0, 4, 1, 9), StatsRow(1, 0, 2, 1)])
    assert (s.groups, s.stalled_groups, s.active_threads, s.queue_length) == (2, 1, 3, 35)
    assert (s.queued_high, s.queued_low, s.oldest_queued_ms) == (12, 23, 1200.0)
    assert (s.stalls, s.stall_thread_creations, s.throttles) == (10, 4, 3)


def test_an_empty_queue_waits_zero_ms():
    """A read that found nobody queued says 0 ms, a measured figure, not n/a."""
    assert tables_sample(T0, [GroupRow(0, 1, 1, 0, 0, 0, True, False)], [], []).oldest_queued_ms == 0.0


def test_series_has_one_second_per_second_warm_up_negative_and_commit_rates():
    """1 s of warm-up and 2 s of window give seconds -1, 0, 1; Com_commit 100/s reads 100 each
    second, gauges come from the second's last sample, stall rates from two table reads."""
    status = [_status(T0 + i * 0.5, 50.0 * i, Threads_running=i) for i in range(7)]
    tables = [tables_sample(T0 + 0.2 + i, [GroupRow(0, 64, 4, 3, 0, 10 * i, True, i == 2)], [QueueRow(0, 10 * i, 1000)],
                            [StatsRow(0, i, 0, 2 * i)]) for i in range(3)]
    series = pool_series(status, tables, started_at=T0, window_start=T0 + 1, ended_at=T0 + 3, tables_reason=None)
    assert [s.second for s in series.seconds] == [-1, 0, 1]
    assert [s.commits_per_s for s in series.seconds] == [100.0, 100.0, 100.0]
    assert [s.threads_running for s in series.seconds] == [1, 3, 5]
    assert [s.queue_length for s in series.seconds] == [0, 10, 20]
    assert [s.stalled_groups for s in series.seconds] == [0, 0, 1]
    assert [s.stalls_per_s for s in series.seconds] == [None, 2.0, 2.0]
    assert [s.second for s in series.window()] == [0, 1]


def test_a_server_without_pool_tables_has_none_not_zero():
    """Without table reads the pool's figures are None and the reason is kept; the gauges stay."""
    status = [_status(T0 + i * 0.5, 10.0 * i) for i in range(5)]
    series = pool_series(status, [], started_at=T0, window_start=T0, ended_at=T0 + 2,
                         tables_reason="the server runs no thread pool")
    assert all(s.queue_length is None and s.stalled_groups is None for s in series.seconds)
    assert all(s.threads == 5 for s in series.seconds)
    wire = RunResult.model_validate_json(_result(series, threads=64).encode())
    assert wire.server.pool == series
    assert "queue_length" not in wire.encode().decode()


def test_a_second_the_monitor_missed_is_none():
    """A second with no status sample (the monitor fell behind) has no gauge and no rate."""
    status = [_status(T0, 0.0), _status(T0 + 2.5, 250.0)]
    series = pool_series(status, [], started_at=T0, window_start=T0, ended_at=T0 + 3, tables_reason="x")
    assert [s.threads for s in series.seconds] == [5, None, 5]
    assert series.seconds[1].commits_per_s == 100.0  # interpolated inside the sampled span
    after = pool_series(status, [], started_at=T0, window_start=T0, ended_at=T0 + 4, tables_reason="x")
    assert after.seconds[3].commits_per_s is None  # past the last sample: never extrapolated


def _second(k: int, *, queue: int = 100, stalled: int = 0, commits: float = 50.0, oldest: float = 300.0) -> PoolSecond:
    return PoolSecond(second=k, threads=6, idle_threads=1, threads_running=4, threads_connected=4096,
                      commits_per_s=commits, groups=1, stalled_groups=stalled, active_threads=1, queue_length=queue,
                      queued_high=queue // 2, queued_low=queue - queue // 2, oldest_queued_ms=oldest)


def _result(series: PoolSeries, *, threads: int, target: str = "pool", rep: int = 1,
            workload: str = "oltp_read_write") -> RunResult:
    return RunResult(run_id=f"c.{target}.{threads}.{rep}", campaign_id="c",
                     cell=Cell(target=target, workload=workload, threads=threads), repetition=rep, status="ok",
                     worker="w", host="h", started_at=T0, ended_at=T0 + 30, warmup_s=2, measured_s=20,
                     server=ServerReport(kind="managed", pool=series))


def _cells(*results: RunResult) -> list[report_pool.PoolCell]:
    return report_pool.pool_cells(ResultRow.of(r) for r in results)


def test_a_pool_that_drains_its_queue_held():
    """No stall, commits every second and a 300 ms oldest wait read as held, with the figures."""
    held = PoolSeries(seconds=[_second(k) for k in range(-2, 20)])
    low = PoolSeries(seconds=[_second(k, stalled=1) for k in range(0, 20)])
    said = report_pool.readings(_cells(_result(held, threads=4096), _result(low, threads=16)))
    assert [r.line() for r in said] == [
        "pool / oltp_read_write: the pool held at 4096 threads: queues drained (median oldest wait 300 ms, median "
        "queue length 100), no stalled groups, commits in every second."]


def test_stalled_groups_and_long_waits_read_as_not_held():
    """Groups stalled in 5 of 20 s (over 10 %) and a 4 s median oldest wait: the pool did not hold."""
    seconds = [_second(k, stalled=int(k < 5), oldest=4000.0, queue=4000) for k in range(20)]
    (r,) = report_pool.readings(_cells(_result(PoolSeries(seconds=seconds), threads=4096)))
    assert not r.held
    assert r.line() == ("pool / oltp_read_write: the pool did not hold at 4096 threads: median queue length 4000, "
                        "median oldest wait 4000 ms (over 1000 ms), groups stalled in 5 of 20 s (over 10%), commits "
                        "in every second.")


def test_seconds_queued_without_a_commit_break_the_pool_at_the_threshold():
    """Two of 20 seconds queued with no commit is exactly 10 %: held; three is over it."""
    def series(n: int) -> PoolSeries:
        return PoolSeries(seconds=[_second(k, commits=0.0 if k < n else 50.0) for k in range(20)])
    assert report_pool.readings(_cells(_result(series(2), threads=4096)))[0].held
    (r,) = report_pool.readings(_cells(_result(series(3), threads=4096)))
    assert not r.held and "3 of 20 s with connections queued and no commit (over 10%)" in r.line()


def test_per_connection_runs_have_gauges_but_no_reading():
    """A server without the pool's tables shows its gauges and n/a for the queue, and no reading."""
    seconds = [PoolSecond(second=k, threads_running=900, threads_connected=1024, commits_per_s=10.0) for k in range(5)]
    cells = _cells(_result(PoolSeries(seconds=seconds, tables_reason="the server runs no thread pool"),
                           threads=1024, target="per-connection"))
    assert report_pool.readings(cells) == []
    (row,) = report_pool.table_rows(cells)
    assert row[7:11] == ("900", "1,024", "10", "n/a") and row[14] == "n/a"
    lines = report_pool.pool_lines(cells)
    assert "No run read the thread pool's tables." in lines
    assert "No pool figures: the server runs no thread pool." in lines


def test_reports_show_the_section_and_the_html_the_plot():
    """Text, Markdown and HTML reports of runs with a monitor series carry the summary and the
    reading; the HTML report draws the pool plot per thread count."""
    results = [_result(PoolSeries(seconds=[_second(k) for k in range(-1, 10)]), threads=t, rep=rep)
               for t in (16, 64) for rep in (1, 2)]
    for r in results:
        r.series.queries.extend([100] * 10)
    data = CampaignData("c", "c", "finished", ("pool",), "pool", ("oltp_read_write",), (16, 64), {"name": "c"},
                        tuple(ResultRow.of(r) for r in results))
    report = analyse(data, ReportOptions())
    text = render_lines(report)
    assert "Thread pool monitor" in text
    assert any(line.startswith("pool / oltp_read_write: the pool held at 64 threads") for line in text)
    assert "## Thread pool monitor" in render_markdown_lines(report)
    page = render_html_report(report)
    assert 'id="plot-pool-oltp_read_write"' in page and "64 threads" in page and 'id="pool"' in page


class _Cursor:
    """Answers the probe's three reads with literal rows, or fails as a server without the tables."""

    def __init__(self, tables: bool = True):
        self.tables = tables
        self.sent: list[str] = []
        self._rows: list[tuple] = []

    def execute(self, sql: str) -> None:
        self.sent.append(sql)
        if not self.tables:
            raise RuntimeError("1109 (42S02): Unknown table 'THREAD_POOL_GROUPS' in information_schema")
        self._rows = ([(0, 64, 4, 2, 0, 7, 1, 0)] if "GROUPS" in sql else [(0, 3, 1500), (1, 4, 90)]
                      if "QUEUES" in sql else [(0, 1, 0, 2)])

    def fetchall(self) -> list[tuple]:
        return self._rows


def test_the_probe_reads_once_a_second_and_counts_its_own_selects():
    """Samples every half second read the tables every second and count the SELECTs they sent (the
    sampler takes them out of Com_select); a server without the tables gives a reason and no more reads."""
    from services.worker.target.pool_probe import PoolProbe

    probe, cur = PoolProbe(), _Cursor()
    for i in range(5):
        probe.sample(cur, T0 + i * 0.5)
    assert [s.t for s in probe.samples] == [T0, T0 + 1, T0 + 2]
    assert (probe.samples[0].queue_length, probe.samples[0].queued_high, probe.samples[0].oldest_queued_ms) == (7, 3, 1.5)
    assert probe.selects == [(T0, 3), (T0 + 1, 3), (T0 + 2, 3)]
    gone, cur = PoolProbe(), _Cursor(tables=False)
    gone.sample(cur, T0)
    gone.sample(cur, T0 + 2)
    assert gone.samples == [] and "Unknown table" in (gone.reason or "") and len(cur.sent) == 1
    assert gone.selects == [(T0, 1)]


def test_the_study_page_prints_the_monitor_section_under_its_campaign():
    """The runner's page section: a level-3 heading, the reading and the Markdown table; nothing for
    a campaign whose runs carry no monitor series."""
    import importlib.machinery
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "studies" / "run"
    loader = importlib.machinery.SourceFileLoader("study_runner_pool", str(path))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("study_runner_pool", loader))
    loader.exec_module(module)
    rows = (ResultRow.of(_result(PoolSeries(seconds=[_second(k) for k in range(5)]), threads=4096)),)
    data = CampaignData("c", "c", "finished", ("pool",), "pool", ("oltp_read_write",), (4096,), {}, rows)
    section = module.pool_section(data)
    assert section[0] == "### Thread pool monitor"
    assert any(line.startswith("- pool / oltp_read_write: the pool held at 4096 threads") for line in section)
    assert any(line.startswith("| pool | oltp_read_write | 4096 |") for line in section)
    empty = CampaignData("c", "c", "finished", ("pool",), "pool", ("oltp_read_write",), (4096,), {}, ())
    assert module.pool_section(empty) == []
