"""A window holding fewer than 10 completed transactions per connection is "short": flagged by
the run's quality, marked ``<`` in every report format, listed with its per-connection figures,
and it fails a study's premise."""

from __future__ import annotations

import io
import json

import pytest

from services.common.messages.results import Latency, RunQuality, RunResult, Totals, Window
from services.common.messages.runs import Cell
from services.common.results.rows import ResultRow
from services.common.results.stalls import assess
from services.reporting import premises
from services.reporting.analysis import CampaignData
from services.reporting.options import ReportOptions
from services.reporting.render.formats import render_csv
from services.reporting.render.html import render_html_report
from services.reporting.render.machine_formats import render_json, render_ods
from services.reporting.report import analyse, render_lines, render_markdown_lines

STEADY = [50] * 8


@pytest.mark.parametrize("completed, threads, rate, flagged", [
    (9_990, 1000, None, True),      # 9.99 per connection: one short of ten mean response times
    (10_000, 1000, None, False),    # exactly ten
    (400, 4096, None, True),        # 4096 connections that mostly waited on a lock
    (40, 4096, 50.0, False),        # an open loop's idle connections say nothing of its response time
    (0, 0, None, False),            # no connections, no figure
])
def test_a_closed_loop_window_under_ten_completions_per_connection_is_short(completed, threads, rate, flagged):
    q = assess(STEADY, warmup_s=2, duration_s=8, wall_s=10, rate=rate, completed=completed, threads=threads)
    assert ("short" in q.flags) is flagged
    assert q.version == 2


def test_a_short_window_is_flagged_beside_a_stall_and_keeps_its_figure():
    q = assess([50, 0, 0, 50, 50, 50, 50, 50], warmup_s=2, duration_s=8, wall_s=10, completed=300, threads=64)
    assert q.flags == ["stall", "short"]
    assert q.completed_per_connection == pytest.approx(300 / 64)


def test_a_version_1_quality_still_decodes_without_the_figure():
    old = RunQuality.model_validate({"version": 1, "planned_s": 10, "wall_s": 10, "overrun_s": 0, "flags": ["stall"]})
    assert old.version == 1 and old.completed_per_connection is None and old.flags == ["stall"]


def result(target: str, threads: int, rep: int, tx: int, *, window: Window | None = None) -> ResultRow:
    quality = assess(STEADY, warmup_s=2, duration_s=8, wall_s=10, completed=tx, threads=threads)
    res = RunResult(run_id=f"c.{target}.t{threads}.r{rep}", campaign_id="c",
                    cell=Cell(target=target, workload="oltp_update_index", threads=threads), repetition=rep,
                    status="ok", worker="w1", host="h", started_at=100.0, ended_at=110.0, warmup_s=2,
                    measured_s=8, totals=Totals(transactions=tx, writes=tx),
                    latency=Latency(p50_ms=1.0, p95_ms=3.0, p99_ms=5.0, max_ms=9.0), window=window, quality=quality)
    return ResultRow.of(res)


def campaign(short_target: str = "on") -> CampaignData:
    rows = []
    for target in ("off", "on"):
        for threads in (4, 256):
            for rep in (1, 2, 3):
                if (target, threads, rep) == (short_target, 256, 2):
                    w = Window(connections=256, completed_per_connection_min=0, completed_per_connection_median=3.0,
                               starved_connections=12, in_flight_at_end=256, oldest_in_flight_s=7.5)
                    rows.append(result(target, threads, rep, 1024, window=w))
                else:
                    rows.append(result(target, threads, rep, 40 * threads))
    return CampaignData("c", "n", "finished", ("off", "on"), "off", ("oltp_update_index",), (4, 256),
                        {"name": "n"}, tuple(rows))


def marks(report) -> dict[tuple[str, int], str]:
    t = report.main.table
    return {(row.target, n): c.mark for row in t.rows for n, c in zip(t.threads, row.cells)}


def test_text_report_marks_the_short_cell_explains_the_mark_and_lists_the_run():
    report = analyse(campaign(), ReportOptions(mode="absolute"))
    m = marks(report)
    assert "<" in m[("on", 256)] and "~" not in m[("on", 256)]
    assert all("<" not in v for k, v in m.items() if k != ("on", 256))
    lines = render_lines(report)
    assert any("<  short window: a run of this cell completed fewer than 10 transactions per connection" in x
               for x in lines)
    i = lines.index(next(x for x in lines if x.startswith("Short windows (<)")))
    assert lines[i + 1] == ("  on / oltp_update_index / 256 threads / repetition 2 (run c.on.t256.r2): "
                            "4.0 transactions per connection (fewest 0, median 3.0), 128 q/s")


def test_a_ratio_cell_is_marked_when_the_baseline_window_was_short():
    report = analyse(campaign(short_target="off"), ReportOptions())
    assert "<" in marks(report)[("on", 256)] and "<" not in marks(report)[("on", 4)]
    assert any("a run of this cell or of off's completed fewer than 10" in x for x in render_lines(report))


def test_markdown_csv_html_json_and_ods_carry_the_short_run():
    from odf.opendocument import load
    from odf.table import Table, TableRow

    report = analyse(campaign(), ReportOptions(mode="absolute"))
    md = render_markdown_lines(report)
    assert any(x.startswith("Short windows (") for x in md)
    csv = render_csv(report.main.table)
    head = csv[0].split(",")
    hit = [dict(zip(head, x.split(","))) for x in csv if x.startswith("oltp_update_index,on,off,256,")]
    assert hit[0]["mark"].endswith("<") and hit[0]["stalled_runs"] == "1"
    html = render_html_report(report)
    assert 'class="num stalled"' in html and "Short windows" in html and "c.on.t256.r2" in html
    doc = json.loads(render_json(report))
    listed = [(s["run_id"], s["flags"], s["per_connection"], s["per_connection_min"]) for s in doc["stalls"]["runs"]]
    assert listed == [("c.on.t256.r2", ["short"], 4.0, 0)]
    sheets = {t.getAttribute("name"): t for t in load(io.BytesIO(render_ods(report))).spreadsheet.getElementsByType(Table)}
    rows = sheets["stalls"].getElementsByType(TableRow)
    assert len(rows) == 2 and "per_connection" in str(rows[0]) and "c.on.t256.r2" in str(rows[1])


def test_a_short_window_fails_the_study_premise_and_long_ones_pass():
    failed = premises.windows_long_enough(campaign())
    assert not failed.ok and "on oltp_update_index t=256 (4.0 per connection)" in failed.detail
    clean = CampaignData("c", "n", "finished", ("off",), "off", ("oltp_update_index",), (4,), {"name": "n"},
                         tuple(result("off", 4, r, 400) for r in (1, 2)))
    assert premises.windows_long_enough(clean).ok


def test_starved_connections_of_a_long_enough_window_are_listed_beside_the_collapse_check():
    """A window of 40 transactions per connection in which 3 of 256 connections completed none
    is a finding (listed with the oldest in-flight age in every format); the short window's
    starved connections are not (it is listed as short)."""
    from odf.opendocument import load
    from odf.table import Table, TableRow

    data = campaign()
    w = Window(connections=256, completed_per_connection_min=0, completed_per_connection_median=41.0,
               starved_connections=3, in_flight_at_end=256, oldest_in_flight_s=12.25)
    rows = tuple(result("off", 256, 1, 40 * 256, window=w) if r.run_id == "c.off.t256.r1" else r for r in data.runs)
    report = analyse(CampaignData("c", "n", "finished", ("off", "on"), "off", ("oltp_update_index",), (4, 256),
                                  {"name": "n"}, rows), ReportOptions(mode="absolute"))
    assert [(c.target, c.threads, c.runs, c.recorded, c.starved_max, c.oldest_in_flight_s) for c in report.starved] == [
        ("off", 256, 1, 1, 3, 12.25)]
    lines = render_lines(report)
    i = lines.index(next(x for x in lines if x.startswith("Starved connections:")))
    assert i > lines.index(next(x for x in lines if "ollapse" in x))
    assert lines[i + 1] == ("  off / oltp_update_index / 256 threads: 1 of 1 runs, at most 3 of 256 connections "
                            "starved; 256 transactions in flight at the window's end, the oldest for 12.2 s")
    assert any(x.startswith("Starved connections:") for x in render_markdown_lines(report))
    html = render_html_report(report)
    assert '<h2 id="starved">Starved connections</h2>' in html and "the oldest for 12.2 s" in html
    assert json.loads(render_json(report))["starved"][0]["oldest_in_flight_s"] == 12.25
    sheets = {t.getAttribute("name"): t for t in load(io.BytesIO(render_ods(report))).spreadsheet.getElementsByType(Table)}
    assert len(sheets["starved"].getElementsByType(TableRow)) == 2
    # Without a starved connection in a long window, nothing is said.
    assert not any("Starved" in x for x in render_lines(analyse(campaign(), ReportOptions(mode="absolute"))))


def test_stored_cell_statistics_mark_a_short_cell_as_the_report_does():
    from services.reporting.cell_stats import cell_stat_rows

    rows = {(r.metric, r.target, r.threads): r for r in cell_stat_rows(campaign())}
    assert rows[("qps", "on", 256)].mark.endswith("<") and "~" not in rows[("qps", "on", 256)].mark
    assert rows[("qps", "on", 256)].stalled_runs == 1 and "<" not in rows[("qps", "on", 4)].mark
