"""Reports mark cells holding a stalled or overrunning run with ``~``, explain it and list the runs,
in every format and in a comparison."""

from __future__ import annotations

import io
import json

from services.common.messages.runs import Cell
from services.common.messages.results import FellBehind, Latency, RunResult, Totals
from services.common.results.rows import ResultRow
from services.common.results.stalls import assess
from services.reporting.analysis import CampaignData
from services.reporting.compare import compare_campaigns, render_compare_text
from services.reporting.options import ReportOptions
from services.reporting.render.html import render_compare_html, render_html_report
from services.reporting.render.machine_formats import render_compare_json, render_compare_ods, render_json, render_ods
from services.reporting.render.formats import render_csv
from services.reporting.report import analyse, render_lines, render_markdown_lines

STEADY = [5400] * 8
#: Issue 18's run: the server stopped after 3 seconds, and the last transactions finished 29 s late.
STALLED = [5400, 5321, 5388, 0, 0, 0, 0, 0]


def result(target: str, threads: int, rep: int, series: list[int] | None, *, wall: float = 10.0,
           max_ms: float = 12.0, cid: str = "c") -> ResultRow:
    """A finished run of oltp_update_index; ``series`` None: stored before runs were assessed."""
    tx = sum(series or STEADY)
    quality = None if series is None else assess(series, warmup_s=2, duration_s=8, wall_s=wall)
    res = RunResult(run_id=f"{cid}.{target}.t{threads}.r{rep}", campaign_id=cid,
                    cell=Cell(target=target, workload="oltp_update_index", threads=threads), repetition=rep,
                    status="ok", worker="w1", host="h", started_at=100.0, ended_at=100.0 + wall, warmup_s=2,
                    measured_s=wall - 2, totals=Totals(transactions=tx, writes=tx),
                    latency=Latency(p50_ms=1.0, p95_ms=3.0, p99_ms=5.0, max_ms=max_ms), quality=quality)
    return ResultRow.of(res)


def campaign(rows, cid="c", name="n") -> CampaignData:
    return CampaignData(cid, name, "finished", ("off", "on"), "off", ("oltp_update_index",), (3, 24),
                        {"name": name}, tuple(rows))


def runs(stalled_target="on", stalled_threads=24, series=None):
    rows = []
    for target in ("off", "on"):
        for threads in (3, 24):
            for rep in (1, 2, 3):
                if (target, threads, rep) == (stalled_target, stalled_threads, 2):
                    rows.append(result(target, threads, rep, STALLED, wall=39.0, max_ms=36340.0))
                else:
                    rows.append(result(target, threads, rep, STEADY if series is None else series))
    return rows


def cells(report) -> dict[tuple[str, int], str]:
    t = report.main.table
    return {(row.target, n): c.mark for row in t.rows for n, c in zip(t.threads, row.cells)}


def test_absolute_text_report_marks_the_stalled_cell_explains_and_lists_the_run():
    """Only the cell holding the stalled repetition gets ~; the legend says what it means and the
    note names the run with its stalled seconds, max latency and overrun."""
    report = analyse(campaign(runs()), ReportOptions(mode="absolute"))
    marks = cells(report)
    assert "~" in marks[("on", 24)]
    assert all("~" not in m for k, m in marks.items() if k != ("on", 24))
    lines = render_lines(report)
    assert (" ~  stall: a run of this cell had seconds without a completed transaction, or overran its planned "
            "time (runs listed below)") in lines
    i = lines.index(next(x for x in lines if x.startswith("Stalls and overruns (~)")))
    assert lines[i + 1] == ("  on / oltp_update_index / 24 threads / repetition 2 (run c.on.t24.r2): stalled 5 s "
                            "(longest 5 s), max latency 36,340 ms, overrun 29.0 s, 435 q/s")
    assert lines[i + 2] == ""


def test_a_ratio_cell_is_marked_when_the_baseline_run_stalled():
    """A ratio depends on both sides: a stall in the baseline's cell marks the compared cell, and the
    legend says so."""
    report = analyse(campaign(runs(stalled_target="off", stalled_threads=3)), ReportOptions())
    assert "~" in cells(report)[("on", 3)] and "~" not in cells(report)[("on", 24)]
    assert [c.stalled for c in report.main.table.rows[0].cells] == [1, 0]
    assert any("a run of this cell or of off's had seconds" in x for x in render_lines(report))


def test_an_overrun_alone_marks_the_run():
    """A run with transactions every second that ended 3 s late (of 10 planned) is marked as an overrun."""
    rows = runs()
    rows = [r for r in rows if r.run_id != "c.on.t24.r2"] + [result("on", 24, 2, STEADY, wall=13.0, max_ms=2900.0)]
    report = analyse(campaign(rows), ReportOptions(mode="absolute"))
    assert "~" in cells(report)[("on", 24)]
    assert [(s.flags, s.stalled_s, s.overrun_s) for s in report.stalled] == [(("overrun",), 0, 3.0)]


def test_a_run_that_fell_behind_its_rate_is_marked_and_listed_with_how_far():
    """An open-loop run ended by its backlog is stored ok with the "behind" flag: its cell gets ~
    and the note gives how many transactions were due, after how long, at what rate."""
    rows = [r for r in runs() if r.run_id != "c.on.t24.r2"]
    behind = result("on", 24, 2, STEADY[:3])
    q = behind.result.quality.model_copy(update={"flags": ["behind"], "behind": FellBehind(
        due=1_000_003, rate=1_000_000, after_s=3.2)})
    rows.append(ResultRow.of(behind.result.model_copy(update={"quality": q})))
    report = analyse(campaign(rows), ReportOptions(mode="absolute"))
    assert "~" in cells(report)[("on", 24)]
    lines = render_lines(report)
    i = lines.index(next(x for x in lines if x.startswith("Fell behind the offered rate (~)")))
    assert lines[i + 1].startswith("  on / oltp_update_index / 24 threads / repetition 2 (run c.on.t24.r2): "
                                   "1,000,003 transactions due and not started after 3.2 s at 1,000,000/s offered")
    assert not any(x.startswith("Stalls and overruns") for x in lines)


def test_clean_campaign_says_no_stall_and_old_results_say_nothing():
    """Assessed runs without a stall get a one-line all clear; results stored before runs were
    assessed get neither marks nor a line (not known is not clean)."""
    clean = [result(t, n, r, STEADY) for t in ("off", "on") for n in (3, 24) for r in (1, 2)]
    lines = render_lines(analyse(campaign(clean), ReportOptions()))
    assert "No stall: every run completed transactions every second and ended within 10% of its planned time." in lines
    old = [result(t, n, r, None) for t in ("off", "on") for n in (3, 24) for r in (1, 2)]
    lines = render_lines(analyse(campaign(old), ReportOptions()))
    assert not any("stall" in x.lower() for x in lines)


def test_markdown_csv_and_html_carry_the_mark():
    """Markdown escapes the ~ (GitHub would strike through), CSV has it in the mark column, HTML
    marks the cell and lists the run in its own section."""
    md = render_markdown_lines(analyse(campaign(runs()), ReportOptions(mode="absolute")))
    row = next(x for x in md if x.startswith("| oltp_update_index | on |"))
    assert row.endswith("\\~ |")
    assert any(x.startswith("- `~` stall:") for x in md)
    assert any(x.startswith("Stalls and overruns (\\~)") for x in md)
    report = analyse(campaign(runs()), ReportOptions(mode="absolute"))
    csv = render_csv(report.main.table)
    head = csv[0].split(",")
    hit = [dict(zip(head, x.split(","))) for x in csv if x.startswith("oltp_update_index,on,off,24,")]
    assert hit and hit[0]["mark"].endswith("~") and hit[0]["stalled_runs"] == "1"
    assert all(dict(zip(head, x.split(",")))["stalled_runs"] == "0" for x in csv[1:]
               if not x.startswith("oltp_update_index,on,off,24,"))
    report = analyse(campaign(runs()), ReportOptions(mode="absolute", all_tables=True))
    html = render_html_report(report)
    # One cell in each table: every metric of a stalled run is off, not only q/s.
    assert len(report.tables) > 1 and html.count('class="num stalled"') == len(report.tables)
    assert '<h2 id="stalls">Stalls and overruns</h2>' in html and "c.on.t24.r2" in html


def test_json_and_ods_list_the_stalled_runs():
    """The JSON export lists the marked run with its numbers; the ODS file has a stalls sheet with it."""
    from odf.opendocument import load
    from odf.table import Table, TableRow

    report = analyse(campaign(runs()), ReportOptions(all_tables=True))
    doc = json.loads(render_json(report))
    assert doc["stalls"]["checked"] is True
    assert [(s["run_id"], s["stalled_s"], s["max_ms"], s["overrun_s"]) for s in doc["stalls"]["runs"]] == [
        ("c.on.t24.r2", 5, 36340.0, 29.0)]
    legend = {e["mark"]: e["meaning"] for e in doc["tables"][0]["legend"]}
    assert legend["~"].startswith("stall: a run of this cell")
    stalled_run = next(r for r in doc["runs"] if r["run_id"] == "c.on.t24.r2")
    assert (stalled_run["stalled_s"], stalled_run["quality_flags"]) == (5, "stall,overrun")
    sheets = {t.getAttribute("name"): t for t in load(io.BytesIO(render_ods(report))).spreadsheet.getElementsByType(Table)}
    rows = sheets["stalls"].getElementsByType(TableRow)
    assert len(rows) == 2 and "c.on.t24.r2" in str(rows[1])


def test_compare_marks_the_campaign_row_holding_the_stall_and_lists_it():
    """Comparing a clean campaign A with B whose 'on' run stalled: B's 24-thread cell of target on
    is marked, target off is not, and the run is listed under B."""
    a = campaign([result(t, n, r, STEADY, cid="a") for t in ("off", "on") for n in (3, 24) for r in (1, 2, 3)],
                 cid="a", name="a")
    b = campaign([r if r.run_id != "c.on.t24.r2" else result("on", 24, 2, STALLED, wall=39.0, max_ms=36340.0, cid="b")
                  for r in runs()], cid="b", name="b")
    c = compare_campaigns(a, b, ReportOptions())
    by_target = {target: t.table for target, t in zip(c.targets, c.tables)}
    on = {n: cell.mark for n, cell in zip(by_target["on"].threads, by_target["on"].rows[0].cells)}
    off = [cell.mark for cell in by_target["off"].rows[0].cells]
    assert "~" in on[24] and "~" not in on[3] and not any("~" in m for m in off)
    text = render_compare_text(c)
    assert "B = b:" in text and "(run b.on.t24.r2): stalled 5 s" in text
    assert "A = a:" not in text
    assert json.loads(render_compare_json(c))["stalls"]["b"][0]["run_id"] == "b.on.t24.r2"
    assert "Stalls and overruns" in render_compare_html(c)
    assert render_compare_ods(c)[:2] == b"PK"


def test_history_counts_the_marked_runs_of_each_campaign():
    """A cell's history says how many of each campaign's runs were marked, with the ~, and leaves them
    out of the campaign's n and of the test."""
    from services.common.results.rows import HistoryEntry
    from services.reporting.history import History, history_points, render_history_text

    entries = [HistoryEntry("a", 100.0, result("on", 24, r, STEADY, cid="a")) for r in (1, 2)] + [
        HistoryEntry("b", 200.0, result("on", 24, 1, STEADY, cid="b")),
        HistoryEntry("b", 200.0, result("on", 24, 2, STALLED, wall=39.0, cid="b"))]
    points = history_points(entries)
    assert [(p.campaign_id, p.stalled) for p in points] == [("a", 0), ("b", 1)]
    text = render_history_text(History("on / oltp_update_index / 24 threads", tuple(points))).splitlines()
    assert [p.stats.n for p in points] == [2, 1]
    assert text[3].split()[8:10] == ["0", "0"] and text[4].split()[3] == "1" and "1~" in text[4].split()
