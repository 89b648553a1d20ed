"""No transaction completed, no latency: an empty histogram, a zero denominator or a figure a
run did not record reads n/a (with why) in every format, is never compared or marked, and
Prometheus exports no sample for it."""

from __future__ import annotations

import dataclasses
import io
import json

from services.collector.prometheus import CollectorMetrics
from services.common.messages.results import NO_LATENCY, NOT_PRINTED, Latency, RunResult, Totals
from services.common.messages.runs import Cell
from services.common.results.histogram import Histogram, summary_ms
from services.common.results.rows import ResultRow
from services.reporting.analysis import CampaignData
from services.reporting.options import ReportOptions
from services.reporting.render.formats import render_csv, render_markdown
from services.reporting.render.html import render_html_report
from services.reporting.render.machine_formats import render_json, render_ods
from services.reporting.report import analyse, render_lines
from services.worker.metrics import WorkerMetrics
from tests.unit.test_metrics import run_spec, snapshot, value

EMPTY_WIRE = {"error": 0.005, "max_us": 0.0, "buckets": {}}


def test_an_old_result_with_an_empty_histogram_reads_its_latency_as_missing():
    """Results stored before wrote 0.0 beside an empty histogram: they decode as None, not 0 ms."""
    old = Latency.model_validate({"p50_ms": 0.0, "p95_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0, "histogram": EMPTY_WIRE})
    assert (old.p50_ms, old.p95_ms, old.p99_ms, old.max_ms) == (None, None, None, None)
    h = Histogram()
    h.record(3000.0)
    measured = Latency.model_validate({"p50_ms": 3.0, "p95_ms": 3.0, "p99_ms": 3.0, "max_ms": 3.0,
                                       "histogram": h.to_wire()})
    assert measured.p95_ms == 3.0
    assert Latency().p95_ms is None  # a result that never measured any


def test_a_histogram_without_a_sample_has_no_percentile():
    s = summary_ms(Histogram())
    assert (s["p50_ms"], s["p95_ms"], s["p99_ms"], s["max_ms"]) == (None, None, None, None)
    h = Histogram()
    h.record(2000.0)
    assert summary_ms(h)["p95_ms"] is not None and summary_ms(h)["p95_ms"] > 0


def row(target: str, threads: int, rep: int, tx: int) -> ResultRow:
    latency = (Latency(p50_ms=1.0, p95_ms=3.0 + rep / 10, p99_ms=5.0, max_ms=9.0) if tx
               else Latency(histogram=EMPTY_WIRE))
    res = RunResult(run_id=f"c.{target}.t{threads}.r{rep}", campaign_id="c",
                    cell=Cell(target=target, workload="oltp_update_index", threads=threads), repetition=rep,
                    status="ok", worker="w1", host="h", started_at=100.0, ended_at=110.0, warmup_s=2, measured_s=8,
                    totals=Totals(transactions=tx, writes=tx), latency=latency)
    return ResultRow.of(res)


def campaign() -> CampaignData:
    """off and on at 4 threads; on's 4096-thread runs completed no transaction (all waited on a lock)."""
    rows = [row(t, n, r, 0 if (t, n) == ("on", 4096) else 800) for t in ("off", "on") for n in (4, 4096)
            for r in (1, 2, 3)]
    return CampaignData("c", "n", "finished", ("off", "on"), "off", ("oltp_update_index",), (4, 4096),
                        {"name": "n"}, tuple(rows))


def p95(report):
    return next(t for t in report.tables if t.metric.key == "p95_ms").table


def test_the_p95_of_runs_that_completed_nothing_reads_na_with_why_and_is_never_compared():
    report = analyse(campaign(), ReportOptions(all_tables=True))
    table = p95(report)
    on = next(r for r in table.rows if r.target == "on")
    cell = on.cells[table.threads.index(4096)]
    assert cell.value is None and cell.comparison is None and cell.mark == ""
    text = "\n".join(render_lines(analyse(campaign(), ReportOptions(metric="p95_ms"))))
    assert "n/a" in text and "no transaction completed in the cell's runs" in text
    assert " 0.00" not in text.split("on", 1)[1].splitlines()[0]


def test_csv_json_html_markdown_and_ods_say_na_never_zero():
    from odf.opendocument import load
    from odf.table import Table, TableRow

    report = analyse(campaign(), ReportOptions(all_tables=True))
    csv = render_csv(p95(report))
    head = csv[0].split(",")
    hit = dict(zip(head, next(x for x in csv if x.startswith("oltp_update_index,on,off,4096,")).split(",")))
    assert hit["value"] == "" and hit["verdict"] == "n/a"
    doc = json.loads(render_json(report))
    tab = next(t for t in doc["tables"] if t["metric"] == "p95_ms")
    cell = next(r for r in tab["rows"] if r["target"] == "on")["cells"][1]
    assert cell["value"] is None and "no transaction completed" in cell["missing"]
    empty = next(r for r in doc["runs"] if r["run_id"] == "c.on.t4096.r1")
    assert empty["p95_ms"] is None and doc["missing"]["c.on.t4096.r1"]["p95_ms"] == NO_LATENCY
    assert "c.on.t4096.r1" in doc["missing"] and "p95_ms" not in doc["missing"].get("c.on.t4.r1", {})
    html = render_html_report(report)
    assert "no transaction completed in the cell&#x27;s runs" in html
    md = "\n".join(render_markdown(p95(report)))
    assert "n/a" in md and "no transaction completed" in md
    sheets = {t.getAttribute("name"): t for t in load(io.BytesIO(render_ods(report))).spreadsheet.getElementsByType(Table)}
    runs = sheets["runs"].getElementsByType(TableRow)
    head = [str(c) for c in runs[0].childNodes]
    empty_row = next(r for r in runs if "c.on.t4096.r1" in str(r))
    assert [str(c) for c in empty_row.childNodes][head.index("p95_ms")] == "n/a"


def test_a_percentile_sysbench_did_not_print_reads_na_as_not_printed_not_as_nothing_completed():
    """Runs read from sysbench's output (an import) that completed transactions but whose p99 sysbench
    did not print (one percentile unless --histogram): the table and the JSON say so, not that no
    transaction completed; a run that completed nothing still says that."""
    def printed(target: str, rep: int) -> ResultRow:
        return dataclasses.replace(row(target, 4, rep, 1000), p99_ms=None)

    runs = [printed(t, rep) for t in ("off", "on") for rep in (1, 2, 3)]
    data = CampaignData("c", "n", "finished", ("off", "on"), "off", ("oltp_update_index",), (4,), {"name": "n"},
                        tuple(runs))
    text = "\n".join(render_lines(analyse(data, ReportOptions(metric="p99_ms"))))
    assert "not printed by sysbench" in text and "no transaction completed" not in text
    doc = json.loads(render_json(analyse(data, ReportOptions(all_tables=True))))
    assert doc["missing"]["c.on.t4.r1"]["p99_ms"] == NOT_PRINTED
    # Beside runs that completed nothing, the table gives both reasons.
    both = CampaignData("c", "n", "finished", ("off", "on"), "off", ("oltp_update_index",), (4, 4096), {"name": "n"},
                        tuple(runs) + tuple(row("on", 4096, rep, 0) for rep in (1, 2, 3)))
    text = "\n".join(render_lines(analyse(both, ReportOptions(metric="p99_ms"))))
    assert "no transaction completed in the cell's runs" in text and "not printed by sysbench" in text


def test_prometheus_exports_no_rate_before_a_second_was_reported_and_no_latency_without_a_sample():
    m, run = WorkerMetrics("w1"), run_spec()
    m.run_started(run)
    text = m.scrape()
    assert value(text, "benchfleet_worker_queries_per_second") is None
    assert value(text, "benchfleet_worker_transaction_latency_seconds_count") is None
    m.observe_progress(run, snapshot(1, 100))
    assert value(m.scrape(), "benchfleet_worker_queries_per_second") == 1000


def test_the_collector_exports_no_cell_mean_for_a_run_that_measured_no_second():
    m = CollectorMetrics()
    spec = run_spec()
    m.observe_result(RunResult(run_id=spec.run_id, campaign_id="c1", cell=spec.cell, repetition=1, status="ok",
                               worker="w1", host="h", started_at=0.0, ended_at=1.0, measured_s=0.0), now=2.0)
    assert value(m.scrape(), "benchfleet_cell_queries_per_second") is None
