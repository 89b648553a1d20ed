"""What the server did per query, on literal deltas: context switches and CPU per query, disk KB
per transaction, hit ratios; /proc parsing; the result's fields; the report metrics and the HTML
section, where a figure a dsn target cannot have says so instead of showing 0."""

from __future__ import annotations

import pytest

from services.common.messages.runs import Cell
from services.common.messages.results import Latency, RunResult, Series, ServerReport, Totals
from services.common.results.rows import ResultRow
from services.common.messages.server_work import server_work
from services.reporting import metrics_catalog as mc
from services.reporting.analysis import CampaignData, report_metrics
from services.reporting.options import ReportOptions
from services.reporting.per_query import ABSENT_DSN, ABSENT_NO_REQUESTS, cell_work
from services.reporting.render.html import render_per_query_html
from services.reporting.report import analyse, render_lines
from services.worker.driver.contract import LoadOutcome
from services.worker.target import info
from services.worker.target.lifecycle import TargetSession, report
from services.worker.target.connect_params import ConnectParams

DELTAS = {"Key_reads": 5, "Key_read_requests": 1000,
          "Innodb_buffer_pool_reads": 30, "Innodb_buffer_pool_read_requests": 60000}


def test_figures_from_literal_deltas():
    """1000 queries in 100 transactions: switches and CPU per query, KB per transaction, 1 - misses/requests."""
    w = server_work(queries=1000, transactions=100, status_deltas=DELTAS, server_cpu_s=0.05, client_cpu_s=0.02,
                    server_ctxt_switches=2500, client_ctxt_switches=1200, disk_read_bytes=0,
                    disk_write_bytes=204800)
    assert w.server_cpu_us_per_query == pytest.approx(50.0)
    assert w.client_cpu_us_per_query == pytest.approx(20.0)
    assert w.server_ctxt_switches_per_query == 2.5
    assert w.client_ctxt_switches_per_query == 1.2
    assert w.disk_read_kb_per_transaction == 0.0  # read nothing: a real zero, not a missing figure
    assert w.disk_write_kb_per_transaction == 2.0
    assert w.key_cache_hit_ratio == pytest.approx(0.995)
    assert w.buffer_pool_hit_ratio == pytest.approx(0.9995)


def test_figures_not_recorded_are_none_never_zero():
    """A dsn target's run has no process figures, and a cache without requests has no hit ratio."""
    w = server_work(queries=1000, transactions=100, status_deltas={"Key_reads": 0, "Key_read_requests": 0},
                    client_cpu_s=0.02, client_ctxt_switches=900)
    assert (w.server_cpu_us_per_query, w.server_ctxt_switches_per_query, w.disk_read_kb_per_transaction,
            w.disk_write_kb_per_transaction) == (None, None, None, None)
    assert w.key_cache_hit_ratio is None and w.buffer_pool_hit_ratio is None
    assert w.client_ctxt_switches_per_query == 0.9
    nothing = server_work(queries=0, transactions=0, status_deltas=DELTAS, server_ctxt_switches=10,
                          disk_write_bytes=4096)
    assert nothing.server_ctxt_switches_per_query is None and nothing.disk_write_kb_per_transaction is None


def test_proc_texts_are_parsed():
    """A thread's switches are voluntary + nonvoluntary; /proc/PID/io gives read_bytes and write_bytes
    (not rchar/wchar, which count the page cache too)."""
    status = "Name:\tmariadbd\nState:\tS (sleeping)\nvoluntary_ctxt_switches:\t1500\nnonvoluntary_ctxt_switches:\t37\n"
    assert info.task_switches(status) == 1537
    io = ("rchar: 900000\nwchar: 800000\nsyscr: 10\nsyscw: 20\nread_bytes: 16384\nwrite_bytes: 1048576\n"
          "cancelled_write_bytes: 0\n")
    assert info.proc_io_bytes(io) == (16384, 1048576)


def test_switch_total_only_grows_when_threads_come_and_go():
    """A thread that exits takes its count away from the sum; the total keeps what it had seen."""
    total = info.SwitchTotal()
    assert total.add({1: 100, 2: 50}) == 150
    assert total.add({1: 110, 2: 70}) == 180
    assert total.add({1: 120, 3: 5}) == 195  # thread 2 ended, thread 3 is new
    assert total.add({1: 120, 3: 5}) == 195


def _sampler() -> info.StatusSampler:
    sampler = info.StatusSampler(ConnectParams())
    sampler.samples = [(10.0, {"Questions": 0, "Key_reads": 0, "Key_read_requests": 0}, 1.0),
                       (11.0, {"Questions": 1000, "Key_reads": 10, "Key_read_requests": 2000}, 1.5),
                       (12.0, {"Questions": 2000, "Key_reads": 20, "Key_read_requests": 4000}, 2.0)]
    sampler.proc_samples = [info.ProcSample(10.0, 0, 0, 0), info.ProcSample(11.0, 3000, 8192, 409600),
                            info.ProcSample(12.0, 6000, 8192, 819200)]
    return sampler


def test_process_counters_are_interpolated_over_the_measured_interval():
    """The server's switches and disk bytes are deltas between the interval's ends, like its CPU."""
    st = _sampler().report(10.5, 12.0)
    assert (st.server_ctxt_switches, st.disk_read_bytes, st.disk_write_bytes) == (4500, 4096, 614400)
    assert st.server_cpu_s == 0.75
    dsn = info.StatusSampler(ConnectParams())
    dsn.samples = _sampler().samples
    st = dsn.report(10.5, 12.0)
    assert (st.server_ctxt_switches, st.disk_read_bytes, st.disk_write_bytes) == (None, None, None)


def _outcome(queries: int, transactions: int) -> LoadOutcome:
    return LoadOutcome(totals=Totals(transactions=transactions, reads=queries), series=Series(),
                       latency=Latency(), errors_by_code={},
                       warmup_s=0.5, measured_s=1.5, started_at=10.0, ended_at=12.0, client_cpu_s=0.03,
                       client_ctxt_switches=1500)


def test_the_worker_stores_the_raw_counts_and_the_figures():
    """A managed run's ``server`` field holds switches, bytes and the per-query and per-transaction figures."""
    session = TargetSession(params=ConnectParams(), client_cpus=None, base=ServerReport(kind="managed"), sampler=_sampler())
    server = report(session, _outcome(queries=3000, transactions=300))
    assert (server.server_ctxt_switches, server.client_ctxt_switches) == (4500, 1500)
    assert (server.server_ctxt_switches_per_query, server.client_ctxt_switches_per_query) == (1.5, 0.5)
    assert (server.disk_read_bytes, server.disk_write_bytes) == (4096, 614400)
    assert server.disk_write_kb_per_transaction == 2.0
    assert server.key_cache_hit_ratio == 0.995 and server.buffer_pool_hit_ratio is None
    assert server.server_cpu_us_per_query == 250.0 and server.client_cpu_us_per_query == 10.0
    dsn = TargetSession(params=ConnectParams(), client_cpus=None, sampler=info.StatusSampler(ConnectParams()))
    dsn.sampler.samples = _sampler().samples
    server = report(dsn, _outcome(queries=3000, transactions=300))
    assert server.kind == "dsn" and server.disk_write_bytes is None and server.server_ctxt_switches_per_query is None
    assert server.key_cache_hit_ratio == 0.995 and server.client_ctxt_switches_per_query == 0.5


def _result(target: str, rep: int, server: ServerReport) -> RunResult:
    return RunResult(run_id=f"c.{target}.r{rep}", campaign_id="c", cell=Cell(target=target, workload="w", threads=4),
                     repetition=rep, status="ok", worker="w1", host="h", started_at=0.0, ended_at=10.0,
                     measured_s=10.0, totals=Totals(transactions=1000, reads=10000), server=server)


MANAGED = [ServerReport(kind="managed", status_deltas=DELTAS, server_cpu_s=0.5, client_cpu_s=0.3,
                        server_ctxt_switches=s, client_ctxt_switches=8000, disk_read_bytes=0,
                        disk_write_bytes=1024 * kb)
           for s, kb in ((20000, 3000), (30000, 5000))]
DSN = ServerReport(kind="dsn", status_deltas={"Key_reads": 0, "Key_read_requests": 0,
                                              "Innodb_buffer_pool_reads": 10, "Innodb_buffer_pool_read_requests": 1000},
                   client_cpu_s=0.3, client_ctxt_switches=9000)


def _campaign() -> CampaignData:
    rows = [ResultRow.of(_result("managed", i + 1, s)) for i, s in enumerate(MANAGED)]
    rows += [ResultRow.of(_result("remote", i + 1, DSN)) for i in range(2)]
    return CampaignData("c", "n", "finished", ("managed", "remote"), "managed", ("w",), (4,), {}, tuple(rows))


def test_report_metrics_give_the_figures_and_na_for_a_dsn_target():
    """`--metric disk_write_kb_per_transaction` shows the managed target's KB and n/a (not 0) for the dsn one."""
    data = _campaign()
    m = mc.metric("disk_write_kb_per_transaction")
    assert [mc.row_value(m, r) for r in data.runs] == [3.0, 5.0, None, None]
    assert mc.value(mc.metric("ctxt_switches_per_query"), data.runs[0].result) == 2.0
    assert mc.value(mc.metric("client_ctxt_switches_per_query"), data.runs[2].result) == 0.9
    assert mc.value(mc.metric("buffer_pool_hit_ratio"), data.runs[2].result) == pytest.approx(0.99)
    assert mc.metric("key_cache_hit_ratio").higher_is_better
    lines = render_lines(analyse(data, ReportOptions(metric="disk_write_kb_per_transaction", mode="absolute")))
    assert "    managed       4.00" in lines and "    remote         n/a" in lines, lines
    assert not any("failed" in line for line in lines), lines  # not recorded is not failed
    keys = [m.key for m in report_metrics(data)]
    assert {"ctxt_switches_per_query", "client_ctxt_switches_per_query", "disk_read_kb_per_transaction",
            "disk_write_kb_per_transaction", "key_cache_hit_ratio", "buffer_pool_hit_ratio"} <= set(keys)


def test_html_section_has_a_table_per_cell_and_says_why_a_figure_is_missing():
    """Each cell gets a table of mean/min/max; the dsn cell says its process figures were not recorded."""
    cells = cell_work(_campaign())
    assert [(c.target, c.kind, c.runs) for c in cells] == [("managed", "managed", 2), ("remote", "dsn", 2)]
    managed = {f.key: f for f in cells[0].figures}
    assert (managed["disk_write_kb_per_transaction"].mean, managed["disk_write_kb_per_transaction"].low,
            managed["disk_write_kb_per_transaction"].high) == (4.0, 3.0, 5.0)
    remote = {f.key: f for f in cells[1].figures}
    assert remote["server_ctxt_switches_per_query"].absent == ABSENT_DSN
    assert remote["key_cache_hit_ratio"].absent == ABSENT_NO_REQUESTS
    assert remote["client_ctxt_switches_per_query"].mean == 0.9
    html = "\n".join(render_per_query_html(cells))
    assert html.count('<table class="cmp per-query">') == 2
    assert "<td>disk KB written per transaction</td><td class=\"num\">4.00</td>" in html
    remote_html = html.split("remote / w")[1]
    assert f"<tr><td>server CPU µs per query</td><td class=\"absent\" colspan=\"4\">n/a: {ABSENT_DSN}</td></tr>" \
        in remote_html
    assert "<td>InnoDB buffer pool hit ratio</td><td class=\"num\">0.9900</td>" in html


def test_a_server_with_many_threads_has_its_switches_read_less_often(monkeypatch):
    """Reading every thread of a 4096-connection server every 0.5 s would cost the worker a fifth
    of a core (bench/sampler); the sampler reads them about every 10 s then, and again at its
    last sample, while status and I/O are still sampled every time. A small server is read at
    every sample."""
    clock = [1000.0]
    reads: list[float] = []

    class Cursor:
        def execute(self, sql):
            pass

        def fetchall(self):
            return [("Questions", "1")]

    class Conn:
        def cursor(self):
            return Cursor()

    def threads_of(count):
        def read(pid):
            reads.append(clock[0])
            return {tid: 10 for tid in range(count)}
        return read

    monkeypatch.setattr(info.time, "time", lambda: clock[0])
    monkeypatch.setattr(info, "read_proc_cpu", lambda pid: 1.0)
    monkeypatch.setattr(info, "read_proc_io", lambda pid: (0, 0))
    for count, expected in ((4096, [1000.0, 1010.5, 1020.0]), (64, [1000.0 + 0.5 * i for i in range(40)] + [1020.0])):
        reads.clear()
        clock[0] = 1000.0
        monkeypatch.setattr(info, "read_thread_switches", threads_of(count))
        s = info.StatusSampler(ConnectParams(), server_pid=1)
        s._conn = Conn()
        for _ in range(40):  # 20 s of samples every 0.5 s
            s._sample()
            clock[0] += 0.5
        assert reads == expected[:-1], count
        s._sample(last=True)
        assert reads == expected, count
        assert len(s.proc_samples) == 41 and all(p.read_bytes == 0 for p in s.proc_samples)
