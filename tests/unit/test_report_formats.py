"""Reports on literal campaigns: collapse marks and list, metrics from stored results, JSON and
ODS exports, campaign comparison and a cell's history."""

from __future__ import annotations

import io
import json
import math
import zipfile

import pytest

from services.common.messages.runs import Cell
from services.common.messages.results import Latency, RunResult, ServerReport, Totals
from services.common.results.rows import HistoryEntry, ResultRow
from services.reporting import metrics_catalog as mc
from services.reporting.analysis import CampaignData, collapse_findings
from services.reporting.compare import compare_campaigns, render_compare_csv, render_compare_text
from services.reporting.history import History, history_points, render_history_text
from services.reporting.options import ReportOptions
from services.reporting.render.html import render_compare_html
from services.reporting.render.machine_formats import render_json, render_ods
from services.reporting.report import analyse, render_lines


def run(target, workload, threads, rep, qps, *, status="ok", result=None, cid="c"):
    return ResultRow(run_id=f"{cid}.{target}.{workload}.t{threads}.r{rep}", campaign_id=cid, target=target,
                     workload=workload, threads=threads, repetition=rep, status=status, qps=qps, tps=qps,
                     p95_ms=1.0, p99_ms=2.0, measured_s=60.0, error=None, result=result)


def campaign(runs, targets=("tpc", "pool"), threads=(16, 4096), cid="c", name="pool"):
    return CampaignData(cid, name, "finished", tuple(targets), targets[0], ("oltp_point_select",), tuple(threads),
                        {"name": name, "duration": 60, "repeat": 3}, tuple(runs))


# The seeds' thread pool study: thread-per-connection collapses at 4096 clients, the pool holds.
POOL_RUNS = (
    [run("tpc", "oltp_point_select", 16, i + 1, q) for i, q in enumerate([172083.0, 171500.0, 172600.0])]
    + [run("pool", "oltp_point_select", 16, i + 1, q) for i, q in enumerate([170100.0, 171000.0, 170500.0])]
    + [run("tpc", "oltp_point_select", 4096, i + 1, q) for i, q in enumerate([282.0, 301.0, 275.0])]
    + [run("pool", "oltp_point_select", 4096, i + 1, q) for i, q in enumerate([98100.0, 97900.0, 98450.0])]
)


def test_absolute_report_marks_the_collapsed_cell_and_lists_it():
    """An absolute q/s report puts ! on the collapsed thread-per-connection cell, explains it in the
    legend and lists the drop against the 16-client peak with its p value."""
    lines = render_lines(analyse(campaign(POOL_RUNS), ReportOptions(mode="absolute")))
    body = lines[lines.index(" sysbench test"):]
    assert body[:4] == [
        " sysbench test",
        "  oltp_point_select",
        "    tpc                172061      286!",
        # 170533 against 172061 (-0.9%): three repetitions cannot tell that from no change.
        "    pool               170533°   98150+",
    ]
    assert " !  collapse: throughput far below the peak at fewer threads (listed below)" in lines
    at = lines.index("Collapse (!): q/s below 50% of the peak at fewer threads:")
    assert lines[at + 1].startswith("  tpc / oltp_point_select / 4096 threads: 286 q/s = 0.2% of 172061 q/s at 16 "
                                "threads (p = ")


def test_noisy_drop_is_not_a_collapse_but_a_single_run_is_judged_by_the_fraction_alone():
    """A drop below half the peak that the repetitions cannot tell from noise is not a collapse;
    with one run per cell the fraction alone decides and the finding says it was untested."""
    noisy = [run("a", "w", 1, i + 1, q) for i, q in enumerate([1000.0, 100.0, 1900.0])] + \
            [run("a", "w", 8, i + 1, q) for i, q in enumerate([50.0, 900.0, 30.0])]
    data = CampaignData("c", "n", "finished", ("a",), "a", ("w",), (1, 8), {}, tuple(noisy))
    assert collapse_findings(data) == []
    single = (run("a", "w", 1, 1, 1000.0), run("a", "w", 8, 1, 100.0))
    found = collapse_findings(CampaignData("c", "n", "finished", ("a",), "a", ("w",), (1, 8), {}, single))
    assert [(f.threads, f.basis) for f in found] == [(8, "untested")] and math.isnan(found[0].p)


def test_collapse_fraction_is_settable():
    """With a fraction of 0.001 the seeds' 282-of-172083 drop no longer counts as a collapse."""
    assert collapse_findings(campaign(POOL_RUNS), ReportOptions(collapse_fraction=0.001)) == []


def _result(transactions, queries, key_reads=None, server_cpu=None, target="t", rep=1):
    server = ServerReport(status_deltas={} if key_reads is None else {"Key_reads": key_reads},
                          server_cpu_s=server_cpu)
    return RunResult(run_id=f"c.{target}.r{rep}", campaign_id="c", cell=Cell(target=target, workload="w", threads=4),
                     repetition=rep, status="ok", worker="w1", host="h", started_at=0.0, ended_at=10.0,
                     measured_s=10.0, totals=Totals(transactions=transactions, reads=queries),
                     latency=Latency(p50_ms=1.5, p95_ms=4.0, p99_ms=9.0), server=server)


def test_status_delta_and_cpu_metrics_are_per_transaction_and_per_query_and_absent_when_not_recorded():
    """Key_reads per transaction and server CPU µs per query come from the stored result; a result
    without them gives no value rather than zero."""
    doc = _result(1000, 10000, key_reads=250, server_cpu=2.0)
    assert mc.value(mc.metric("status:Key_reads"), doc) == 0.25
    assert mc.value(mc.metric("cpu_us_per_query"), doc) == pytest.approx(200.0)
    assert mc.value(mc.metric("p50_ms"), doc) == 1.5
    bare = _result(1000, 10000)
    assert mc.value(mc.metric("status:Key_reads"), bare) is None
    assert mc.value(mc.metric("cpu_us_per_query"), bare) is None
    with pytest.raises(ValueError, match="unknown metric 'bogus'"):
        mc.metric("bogus")


def test_key_reads_per_transaction_table_says_fewer_is_better():
    """A table of status:Key_reads marks the target with fewer reads per transaction as better (+)."""
    runs = [run(t, "w", 4, i + 1, 1.0, result=_result(1000, 1000, key_reads=k, target=t, rep=i + 1))
            for t, ks in (("off", [500, 505, 495]), ("8", [100, 102, 98])) for i, k in enumerate(ks)]
    data = CampaignData("c", "n", "finished", ("off", "8"), "off", ("w",), (4,), {}, tuple(runs))
    lines = render_lines(analyse(data, ReportOptions(metric="status:Key_reads")))
    assert "  w               20.00+" in lines
    assert " (8 Key_reads/trx / off Key_reads/trx * 100)" in lines


def test_json_export_carries_every_table_with_marks_statistics_and_legend():
    """The JSON export has the main table first, each cell's mark, verdict and p, the legend and the collapse."""
    doc = json.loads(render_json(analyse(campaign(POOL_RUNS), ReportOptions(all_tables=True))))
    assert doc["format_version"] == 1
    main = doc["tables"][0]
    assert (main["key"], main["mode"], main["threads"]) == ("qps_ratio", "ratio", [16, 4096])
    cell = main["rows"][0]["cells"][1]
    assert cell["text"] == "34318.18" and cell["mark"] == "+" and cell["verdict"] == "faster" and cell["p"] < 0.05
    assert {"mark": "+", "meaning": main["legend"][0]["meaning"]} in main["legend"]
    assert [t["key"] for t in doc["tables"]][:3] == ["qps_ratio", "qps_absolute", "tps_absolute"]
    assert [(c["target"], c["threads"], c["basis"]) for c in doc["collapse"]] == [("tpc", 4096, "significant")]
    assert len(doc["runs"]) == 12


def test_ods_export_has_a_sheet_per_table_and_the_raw_runs():
    """The ODS file opens as a zip spreadsheet with settings, one sheet per table, collapse and runs."""
    from odf.opendocument import load
    from odf.table import Table, TableRow

    data = analyse(campaign(POOL_RUNS), ReportOptions(all_tables=True))
    blob = render_ods(data)
    assert zipfile.ZipFile(io.BytesIO(blob)).read("mimetype") == b"application/vnd.oasis.opendocument.spreadsheet"
    sheets = {t.getAttribute("name"): t for t in load(io.BytesIO(blob)).spreadsheet.getElementsByType(Table)}
    assert list(sheets)[:3] == ["settings", "qps_ratio", "qps_absolute"]
    assert list(sheets)[-3:] == ["collapse", "counts", "runs"]
    assert len(sheets["runs"].getElementsByType(TableRow)) == 1 + 12
    text = str(sheets["qps_absolute"])
    assert "286!" in text and "98150+" in text and "collapse: throughput far below" in text


def test_compare_two_campaigns_cell_by_cell():
    """B's pool is 5% faster than A's at 16 threads (+) and the same at 4096; targets only one campaign has are named."""
    a = campaign(POOL_RUNS, cid="pool-a")
    faster = [run(r.target, r.workload, r.threads, r.repetition, r.qps * (1.05 if r.threads == 16 else 1.0))
              for r in POOL_RUNS if r.target == "pool"]
    b = campaign(faster + [run("extra", "oltp_point_select", 16, 1, 1.0)], targets=("pool", "extra"), cid="pool-b")
    c = compare_campaigns(a, b, ReportOptions(metric="qps"))
    out = render_compare_text(c).splitlines()
    assert out[:3] == ["A = pool-a (pool, finished)", "B = pool-b (pool, finished)",
                       "Targets in only one campaign (not compared): extra, tpc"]
    assert "  oltp_point_select    105.00+  100.00=" in out
    assert " (B q/s / A q/s * 100)" in out
    rows = render_compare_csv(c).splitlines()
    assert rows[0].startswith("compared_target,workload,target,baseline,threads")
    assert rows[1].startswith("pool,oltp_point_select,B,A,16,ratio,105.00,+,faster")


def test_compare_as_html_and_spreadsheet():
    """A comparison also comes as a self-contained HTML page and an ODS file with the same marked cells."""
    import io
    import zipfile

    from services.reporting.render.machine_formats import render_compare_ods

    a = campaign(POOL_RUNS, cid="pool-a")
    faster = [run(r.target, r.workload, r.threads, r.repetition, r.qps * (1.05 if r.threads == 16 else 1.0))
              for r in POOL_RUNS if r.target == "pool"]
    c = compare_campaigns(a, campaign(faster, targets=("pool",), cid="pool-b"), ReportOptions(metric="qps"))
    page = render_compare_html(c)
    assert page.startswith("<!DOCTYPE html>") and "http" not in page.split("<body>")[1]
    assert 'class="num faster"' in page and "105.00+" in page and "B = pool-b" in page
    content = zipfile.ZipFile(io.BytesIO(render_compare_ods(c))).read("content.xml").decode()
    assert "105.00+" in content and "pool-a" in content and 'table:name="runs B"' in content


def _history_row(cid, name, at, rep, qps, status="ok"):
    return HistoryEntry(name, at, run("off", "w", 8, rep, qps, status=status, cid=cid))


def test_history_compares_each_campaign_with_the_one_before():
    """The history lists campaigns oldest first and marks a significant regression against the previous one."""
    rows = ([_history_row("c1", "n", 100.0, i + 1, q) for i, q in enumerate([1000.0, 1005.0, 995.0])]
            + [_history_row("c2", "n", 200.0, i + 1, q) for i, q in enumerate([900.0, 905.0, 895.0])]
            + [_history_row("c2", "n", 200.0, 4, 0.0, status="failed")])
    points = history_points(rows, ReportOptions(metric="qps"))
    assert [(p.campaign_id, p.stats.n, p.failed) for p in points] == [("c1", 3, 0), ("c2", 3, 1)]
    assert points[1].vs_previous.decision == "slower"
    text = render_history_text(History("off / w / 8 threads", tuple(points), ReportOptions(metric="qps"))).splitlines()
    assert text[0] == "History of off / w / 8 threads (q/s)"
    assert text[3].split()[:4] == ["c1", "1970-01-01", "00:01", "3"]
    assert text[4].split()[10] == "-10.00%-"
