"""The report shows the client's and the server's count of every run side by side, flags ``#`` a
run where they differ by more than max(2 %, in-flight / count), says n/a with why where the server
gave no count, and sums it up in one line, in every format."""

from __future__ import annotations

import csv
import io
import json

from services.common.messages.results import RunResult, ServerCount, ServerReport, Totals
from services.common.messages.runs import Cell
from services.common.results.rows import ResultRow
from services.reporting.analysis import CampaignData
from services.reporting.counts import NOT_RECORDED, run_counts, summary
from services.reporting.options import ReportOptions
from services.reporting.render.html import render_html_report
from services.reporting.render.machine_formats import render_json, render_ods
from services.reporting.report import analyse, render_csv_lines, render_lines, render_markdown_lines

POOL = "the server runs a thread pool without an extra_port"


def run(target: str, rep: int, client: int, server: int | None, *, reason: str | None = None, in_flight: int | None = None,
        status: str = "ok") -> ResultRow:
    return ResultRow(run_id=f"c.{target}.r{rep}", campaign_id="c", target=target, workload="w", threads=16,
                     repetition=rep, status=status, qps=client / 10, tps=client / 10, p95_ms=2.0, p99_ms=3.0,
                     measured_s=10.0, error=None, in_flight_at_end=in_flight, transactions=client,
                     server_transactions=server, server_count_reason=reason)  # type: ignore[arg-type]


RUNS = (
    run("off", 1, 10_000, 10_050),                      # 0.5% off: agrees
    run("off", 2, 10_000, 9_000),                       # 11% off: disagrees
    run("off", 3, 10_000, 9_500, in_flight=600),        # 5.3% off, but 600 in flight allow 6.3%: agrees
    run("on", 1, 10_000, None, reason=POOL),            # n/a with the worker's reason
    run("on", 2, 10_000, None),                         # n/a, stored before the count was recorded
    run("on", 3, 0, 0),                                 # nothing on either side: nothing to agree on (n/a)
    run("on", 4, 0, None, status="failed"),             # a failed run counted nothing to compare
)


def data() -> CampaignData:
    return CampaignData("c", "c", "finished", ("off", "on"), "off", ("w",), (16,), {"name": "c"}, RUNS)


def test_agree_disagree_and_na_by_the_tolerance_rule():
    got = {c.run_id: (c.state, c.reason) for c in run_counts(RUNS)}
    assert got == {"c.off.r1": ("agree", ""), "c.off.r2": ("disagree", ""), "c.off.r3": ("agree", ""),
                   "c.on.r1": ("n/a", POOL), "c.on.r2": ("n/a", NOT_RECORDED), "c.on.r3": ("n/a", "neither side counted a transaction in the window")}
    third = next(c for c in run_counts(RUNS) if c.run_id == "c.off.r3")
    assert abs(third.off - 500 / 9_500) < 1e-6 and abs(third.tolerance - 600 / 9_500) < 1e-6
    assert summary(run_counts(RUNS)).line() == (
        "Client and server counts agree within tolerance (max(2%, in-flight / count)) on 2 of 6 runs; 3 n/a; "
        "1 disagree (#).")


def test_text_report_shows_both_counts_per_run_flags_the_disagreeing_one_and_says_why_na():
    lines = render_lines(analyse(data(), ReportOptions()))
    i = lines.index("Client and server counts, per run:")
    assert lines[i + 1].startswith("Client and server counts agree within tolerance")
    rows = {x.split()[4]: x.split()[5:] for x in lines[i + 3:i + 9]}
    assert rows["c.off.r1"] == ["10,000", "10,050", "0.50%", "2.00%"]
    assert rows["c.off.r2"] == ["10,000", "9,000", "11.11%", "2.00%", "#"]
    assert rows["c.on.r1"] == ["10,000", "n/a", "(1)"] and rows["c.on.r2"] == ["10,000", "n/a", "(2)"]
    assert f"  (1) n/a: {POOL}" in lines and f"  (2) n/a: {NOT_RECORDED}" in lines
    assert any("#: they differ by more than max(2%, in-flight / count)" in x for x in lines)


def test_markdown_csv_json_html_and_ods_carry_both_counts():
    from odf.opendocument import load
    from odf.table import Table, TableRow

    report = analyse(data(), ReportOptions())
    md = render_markdown_lines(report)
    assert "| off | w | 16 | 2 | c.off.r2 | 10,000 | 9,000 | 11.11% | 2.00% | # |" in md
    assert any(x.startswith("Client and server counts agree within tolerance") for x in md)
    rows = list(csv.DictReader(io.StringIO("\n".join(render_csv_lines(report)))))
    on = next(r for r in rows if r["target"] == "on")
    # The cell's client total; its server total is empty since two of its runs have none.
    assert (on["client_transactions"], on["server_transactions"], on["counts_disagree"], on["counts_na"]) == (
        "20000", "", "0", "3")
    doc = json.loads(render_json(analyse(data(), ReportOptions(all_tables=True))))
    assert (doc["counts"]["agree"], doc["counts"]["disagree"], doc["counts"]["na"], doc["counts"]["runs"][1]["state"]) == (
        2, 1, 3, "disagree")
    assert doc["missing"]["c.on.r1"]["server_transactions"] == POOL
    assert next(r for r in doc["runs"] if r["run_id"] == "c.off.r2")["server_transactions"] == 9_000
    html = render_html_report(analyse(data(), ReportOptions(all_tables=True)))
    assert '<h2 id="counts">Client and server counts</h2>' in html
    assert f'<td class="num absent" title="{POOL}">n/a (1)</td>' in html
    assert '<td class="slower">#</td>' in html
    sheets = {t.getAttribute("name"): t for t in load(io.BytesIO(render_ods(report))).spreadsheet.getElementsByType(Table)}
    counted = [str(r) for r in sheets["counts"].getElementsByType(TableRow)]
    assert counted[0].startswith("Client and server counts agree") and any("c.off.r2" in r and "#" in r for r in counted)
    assert any("c.on.r1" in r and "n/a" in r and POOL in r for r in counted)


def test_a_row_carries_the_results_server_count_and_why_it_is_na():
    def result(count: ServerCount | None) -> RunResult:
        return RunResult(run_id="c.off.r1", campaign_id="c", cell=Cell(target="off", workload="w", threads=16),
                         repetition=1, status="ok", worker="w1", host="h", started_at=0.0, ended_at=12.0,
                         warmup_s=2, measured_s=10, totals=Totals(transactions=5_000),
                         server=ServerReport(count=count))

    row = ResultRow.of(result(ServerCount(counter=["Com_commit"], server_transactions=5_010)))
    assert (row.transactions, row.server_transactions, row.server_count_reason) == (5_000, 5_010, None)
    row = ResultRow.of(result(ServerCount(reason=POOL)))
    assert (row.server_transactions, row.server_count_reason) == (None, POOL)
    assert ResultRow.of(result(None)).server_count_reason is None


def test_compare_sums_up_each_campaigns_counts_over_its_compared_runs():
    """`collector compare` says, for A and for B, how many of the compared runs' client and server
    counts agree, disagree and are n/a, in text, Markdown, JSON and HTML; a target only one campaign
    has is not counted."""
    from services.reporting.compare import compare_campaigns, render_compare_markdown, render_compare_text
    from services.reporting.render.html import render_compare_html
    from services.reporting.render.machine_formats import render_compare_json

    a = data()
    b = CampaignData("d", "d", "finished", ("off", "new"), "off", ("w",), (16,), {"name": "d"},
                     (run("off", 1, 10_000, 10_000), run("off", 2, 10_000, 10_010), run("new", 1, 10_000, 5_000)))
    c = compare_campaigns(a, b, ReportOptions())
    text = render_compare_text(c).splitlines()
    at = text.index("Client and server counts:")
    assert text[at + 1] == ("  A: Client and server counts agree within tolerance (max(2%, in-flight / count)) "
                            "on 2 of 3 runs; 0 n/a; 1 disagree (#).")
    assert text[at + 2].startswith("  B: Client and server counts agree within tolerance") and \
        text[at + 2].endswith("on 2 of 2 runs; 0 n/a.")
    assert "- B: Client and server counts agree" in render_compare_markdown(c)
    doc = json.loads(render_compare_json(c))["counts"]
    assert (doc["a"]["runs"], doc["a"]["disagree"], doc["b"]["agree"]) == (3, 1, 2)
    assert "A: Client and server counts agree" in render_compare_html(c)


def test_the_same_report_gives_the_same_ods_bytes_whenever_it_is_rendered(monkeypatch):
    """A spreadsheet attached twice to a thread is one file: no entry carries the time of rendering."""
    import time as clock

    report = analyse(data(), ReportOptions())
    first = render_ods(report)
    later = clock.time() + 3 * 86400
    monkeypatch.setattr(clock, "time", lambda: later)
    assert render_ods(report) == first
