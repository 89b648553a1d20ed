"""Runs flagged for a stall, an overrun or a short window are left out of every verdict and of the
number beside it: a block whose run of either side is flagged pairs nothing, the cell says how many
runs were left out and why in every format, and a cell with too few runs left reads ``?``."""

from __future__ import annotations

import csv
import json

from services.common.results.rows import ResultRow
from services.reporting.analysis import CampaignData
from services.reporting.cell_stats import cell_stat_rows
from services.reporting.compare import compare_campaigns, render_compare_text
from services.reporting.options import ReportOptions
from services.reporting.render.formats import render_csv
from services.reporting.render.html import render_html_report
from services.reporting.render.machine_formats import render_json
from services.reporting.report import analyse, render_lines, render_markdown_lines

OLD = [1000.0, 1100.0, 950.0]
NEW = [1021.0, 1122.0, 970.0]


def run(target: str, threads: int, rep: int, qps: float, flags: str = "", cid: str = "c",
        p95: float | None = None) -> ResultRow:
    return ResultRow(run_id=f"{cid}.{target}.w.t{threads}.r{rep}", campaign_id=cid, target=target, workload="w",
                     threads=threads, repetition=rep, status="ok", qps=qps, tps=qps / 10,
                     p95_ms=1000.0 / qps if p95 is None else p95, p99_ms=2000.0 / qps, measured_s=60.0, error=None,
                     quality_flags=flags)


def campaign(flagged: dict[tuple[str, int], str], cid: str = "c", new=NEW, p95=None) -> CampaignData:
    """Two targets at 8 threads, three blocks; ``flagged``: (target, repetition) -> quality flags."""
    runs = [run(t, 8, i, q, flagged.get((t, i), ""), cid, (p95 or {}).get((t, i)))
            for t, qs in (("old", OLD), ("new", new)) for i, q in enumerate(qs, 1)]
    return CampaignData(cid, cid, "finished", ("old", "new"), "old", ("w",), (8,), {}, tuple(runs))


def cell(report):
    return report.main.table.rows[0].cells[0]


def test_a_short_target_run_drops_its_blocks_pair_and_the_cell_says_so():
    """new's run of block 2 measured a 3 s window at 300 q/s: the pair of block 2 leaves the paired
    test (old's run of block 2 included), the ratio stands on blocks 1 and 3, and the cell says it."""
    data = campaign({("new", 2): "short"}, new=[1021.0, 300.0, 970.0])
    c = cell(analyse(data, ReportOptions()))
    v = c.verdict
    assert (v.estimate.method, v.estimate.n_pairs, v.estimate.n_target, v.estimate.n_baseline) == ("paired", 2, 2, 3)
    # The number stands on the pairs the verdict does: not the 76% a 300 q/s window would drag it to.
    assert abs(c.value - (1021 + 970) / (1000 + 950) * 100) < 1e-9
    assert (c.excluded, c.excluded_reason) == (1, "new repetition 2: short window")
    assert "<" in c.mark and v.left_out == "new repetition 2: short window"


def test_a_flagged_baseline_run_leaves_the_target_cells_pair_too():
    """old's stalled run of block 1: the pair of block 1 is dropped and the baseline's number is over 2 runs."""
    c = cell(analyse(campaign({("old", 1): "stall,overrun"}), ReportOptions()))
    assert (c.verdict.estimate.n_pairs, c.comparison.baseline.n, c.stats.n) == (2, 2, 2)
    assert c.excluded_reason == "old repetition 1: stall, overrun"


def test_a_failed_baseline_run_drops_its_block_from_the_shown_ratio_too():
    """old's run of block 3 failed and new's run of block 2 is short: the paired test has blocks 1
    1 and 4; the number beside it stands on the same blocks, so it lies inside its interval."""
    runs = [run("old", 8, i, q) for i, q in enumerate([1000.0, 1100.0, 950.0, 1050.0], 1) if i != 3]
    runs += [run("new", 8, i, q, "short" if i == 2 else "") for i, q in enumerate([1100.0, 300.0, 1400.0, 1150.0], 1)]
    data = CampaignData("c", "c", "finished", ("old", "new"), "old", ("w",), (8,), {}, tuple(runs))
    c = cell(analyse(data, ReportOptions()))
    assert (c.verdict.estimate.method, c.verdict.estimate.n_pairs) == ("paired", 2)
    assert (c.stats.n, c.comparison.baseline.n) == (2, 2)
    assert abs(c.value - (1100 + 1150) / (1000 + 1050) * 100) < 1e-9


def test_every_format_says_how_many_runs_were_left_out_and_why():
    report = analyse(campaign({("new", 2): "short"}, new=[1021.0, 300.0, 970.0]), ReportOptions())
    text = render_lines(report)
    assert "Runs left out of the verdicts (~ a stall or an overrun, < a short window):" in [x.strip() for x in text]
    assert "  new / w / 8 threads: 1 run (new repetition 2: short window)" in [x[1:] for x in text]
    assert any(x.strip().startswith("runs marked ~ or < are left out of their cell's verdict") for x in text)
    md = render_markdown_lines(report)
    assert any(x.startswith("[^qps_ratio-1]:") and "left out: new repetition 2: short window" in x for x in md)
    assert "- new / w / 8 threads: 1 run (new repetition 2: short window)" in md
    head, row = csv.reader(render_csv(report.main.table))
    fields = dict(zip(head, row))
    assert fields["excluded_runs"] == "1" and fields["excluded_reason"] == "new repetition 2: short window"
    doc = json.loads(render_json(report))
    js = doc["tables"][0]["rows"][0]["cells"][0]
    assert (js["excluded_runs"], js["excluded_reason"]) == (1, "new repetition 2: short window")
    assert doc["tables"][0]["left_out"] == ["new / w / 8 threads: 1 run (new repetition 2: short window)"]
    html = render_html_report(analyse(report.data, ReportOptions(all_tables=True)))
    assert "left out: new repetition 2: short window" in html


def test_a_cell_whose_runs_are_all_short_is_undecided_with_the_reason():
    """Every run of new is short: nothing is left to judge, so the cell reads ? with why, and its
    number is still what was measured (over the short runs, marked <)."""
    c = cell(analyse(campaign({("new", i): "short" for i in (1, 2, 3)}), ReportOptions()))
    assert c.verdict.decision == "missing" and c.mark.startswith("?") and "<" in c.mark
    assert c.verdict.reason.startswith("too few runs left to judge once stalled and short runs are left out")
    assert c.excluded == 3 and c.value is not None


def test_one_run_left_of_three_leaves_the_cell_undecided():
    """One pair left is no paired test, one run on a side no Welch: ``?``, not a verdict."""
    c = cell(analyse(campaign({("new", 1): "short", ("new", 2): "short"}), ReportOptions()))
    assert c.verdict.decision == "missing" and c.mark.startswith("?")


def test_runs_left_out_of_different_blocks_on_each_side_leave_welch_on_each_sides_kept_runs():
    """new's block 1 and old's block 2 left out: one pair is left, so each side's two kept runs are
    compared unpaired (Welch), and the ratio stands on them."""
    c = cell(analyse(campaign({("new", 1): "short", ("old", 2): "stall"}), ReportOptions()))
    v = c.verdict.estimate
    assert (v.method, v.n_target, v.n_baseline, c.excluded) == ("welch", 2, 2, 2)
    assert abs(c.value - (1122 + 970) / (1000 + 950) * 100) < 1e-9


def test_the_0_ms_p95_of_a_stalled_run_no_longer_reads_as_better():
    """A run that stalled and completed almost nothing has a near-0 p95: left out, it neither pulls
    the latency ratio down nor marks the cell faster."""
    p95 = {("new", 2): 0.0}
    report = analyse(campaign({("new", 2): "stall"}, new=OLD, p95=p95), ReportOptions(metric="p95_ms"))
    c = cell(report)
    assert abs(c.value - 100.0) < 1e-9  # (not 66.67 with the stalled run's 0 ms)
    assert c.verdict.decision != "faster" and "+" not in c.mark


def test_compare_leaves_a_flagged_run_out_of_its_campaigns_side():
    """Across two campaigns (Welch): B's short run leaves B's side with 2 runs."""
    a = campaign({}, cid="a")
    b = campaign({("new", 3): "short"}, cid="b", new=[1021.0, 1122.0, 90.0])
    c = compare_campaigns(a, b, ReportOptions())
    got = c.tables[c.targets.index("new")].table.rows[0].cells[0]
    assert (got.verdict.estimate.method, got.verdict.estimate.n_target, got.excluded) == ("welch", 2, 1)
    # Its table's rows are the campaigns; A keeps its three runs.
    assert "B / w / 8 threads: 1 run (B repetition 3: short window)" in render_compare_text(c)
    assert got.comparison.baseline.n == 3


def test_stored_cell_statistics_stand_on_the_kept_runs():
    """The cell_stats rows agree with the report: n and mean over the kept runs."""
    rows = {(r.metric, r.target): r for r in cell_stat_rows(campaign({("new", 2): "short"}, new=[1021.0, 300.0, 970.0]))}
    assert (rows[("qps", "new")].n, rows[("qps", "new")].mean) == (2, (1021 + 970) / 2)
