"""A page's marks come from one family of verdicts over every table it shows (BH across them),
paired within a campaign, unpaired across two; duplicated cells and proportional metrics count once."""

from __future__ import annotations

from services.common.results.rows import ResultRow
from services.reporting.analysis import CampaignData
from services.reporting.compare import compare_campaigns
from services.reporting.options import ReportOptions
from services.reporting.render.formats import render_markdown
from services.reporting.report import analyse, render_lines
from services.reporting.verdicts import CellFigures, judge, judge_groups


def run(target, threads, rep, qps, tps=None, cid="c"):
    return ResultRow(run_id=f"{cid}.{target}.w.t{threads}.r{rep}", campaign_id=cid, target=target, workload="w",
                     threads=threads, repetition=rep, status="ok", qps=qps, tps=qps if tps is None else tps,
                     p95_ms=1000.0 / qps, p99_ms=2000.0 / qps, measured_s=60.0, error=None)


def campaign(cells, cid="c"):
    """``cells``: (target, threads) -> q/s per repetition."""
    runs = tuple(run(t, n, i + 1, q, cid=cid) for (t, n), qs in cells.items() for i, q in enumerate(qs))
    return CampaignData(cid, cid, "finished", ("old", "new"), "old", ("w",), (4, 8), {}, runs)


# A drift shared by both targets in each block: paired, 8 threads is clearly 2% faster; 4 is equal.
DRIFT = campaign({("old", 4): [1000.0, 1100.0, 950.0], ("new", 4): [1000.0, 1100.0, 950.0],
                  ("old", 8): [1000.0, 1100.0, 950.0], ("new", 8): [1021.0, 1121.0, 970.0]})


def cell_marks(report):
    return [c.mark for row in report.main.table.rows for c in row.cells]


def test_a_shared_drift_is_cancelled_by_pairing_within_a_campaign():
    """The 2% gain hides in a 15% block-to-block drift for Welch, but the page pairs the blocks and marks it."""
    report = analyse(DRIFT, ReportOptions())
    assert cell_marks(report) == ["=", "+"]
    v = report.main.table.rows[0].cells[1].verdict
    assert v.estimate.method == "paired" and v.low > 1.0
    assert report.main.table.family.size == 1  # the identical 4-thread cell has no p-value


def test_across_campaigns_the_same_figures_are_compared_unpaired():
    """Two campaigns share no block: the same drift leaves the 2% gain undecided."""
    old = campaign({("new", 4): [1000.0, 1100.0, 950.0], ("new", 8): [1000.0, 1100.0, 950.0]}, cid="a")
    new = campaign({("new", 4): [1000.0, 1100.0, 950.0], ("new", 8): [1021.0, 1121.0, 970.0]}, cid="b")
    c = compare_campaigns(old, new, ReportOptions())
    cell = c.tables[c.targets.index("new")].table.rows[0].cells[1]
    assert cell.verdict.estimate.method == "welch" and cell.mark == "°"


def test_every_table_of_the_page_is_one_family_and_qps_tps_count_once():
    """All tables of a page join one family; a cell shown twice and tps equal to q/s count once,
    and the page says how many cells it compared and how many marks chance would give."""
    report = analyse(DRIFT, ReportOptions(all_tables=True))
    fam = report.main.table.family
    # q/s 8 threads (also in the absolute table, and tps is the same figure) + p95 + p99 at 8 threads.
    assert fam.size == 3 and fam.discoveries == 3
    assert all(t.table.family == fam for t in report.tables)
    text = "\n".join(render_lines(report))
    assert "3 cells compared on this page (paired over the blocks both ran" in text
    assert "3 marked, of which about 0.15 expected by chance" in text


def test_markdown_gives_each_judged_cell_a_footnote():
    report = analyse(DRIFT, ReportOptions())
    md = render_markdown(report.main.table, "qps_ratio")
    assert "| w | 100.00[^qps_ratio-1]= | 102.03[^qps_ratio-2]+ |" in md
    assert any(x.startswith("[^qps_ratio-2]: w / 8: faster: ratio 1.0") and "q = " in x for x in md)


def test_judge_groups_is_one_bh_family_over_metrics_of_both_directions():
    """Two groups share one selection: its family size is their sum and a latency rise reads slower."""
    up = CellFigures("up", {1: 110.0, 2: 111.0, 3: 109.0}, {1: 100.0, 2: 100.5, 3: 99.5})
    pages = judge_groups([([up], True), ([up], False)], family="page")
    assert pages[0].selection is pages[1].selection and pages[0].selection.family_size == 2
    assert [p.verdicts[0].decision for p in pages] == ["faster", "slower"]
    assert judge([up], family="one", higher_is_better=True).selection.family_size == 1


def test_a_collapse_is_reported_only_when_the_drop_clears_the_fraction_with_confidence():
    """49% of the peak is below the 50% fraction, but its interval reaches above it: no collapse;
    a fall to 10% is one, with its interval and how sure the report is."""
    from services.reporting.analysis import collapse_findings

    def curve(top):
        runs = tuple(run("new", n, i + 1, q) for n, qs in ((4, [1000.0, 1010.0, 990.0]), (8, top))
                     for i, q in enumerate(qs))
        return CampaignData("c", "c", "finished", ("new",), "new", ("w",), (4, 8), {}, runs)

    assert collapse_findings(curve([480.0, 520.0, 470.0])) == []
    [found] = collapse_findings(curve([100.0, 104.0, 96.0]))
    assert found.basis == "significant" and found.p < 0.05
    assert -0.92 < found.drop_low < found.drop_high < -0.88 and found.level == 0.95


def test_two_noisy_repetitions_at_a_strict_level_give_an_unbounded_interval_not_an_error():
    """Paired over 2 blocks (1 df) at a 99.99% level the upper bound overflows exp(): it is infinite."""
    from services.reporting.log_ratio import log_ratio

    est = log_ratio({1: 1.0, 2: 1000.0}, {1: 1000.0, 2: 1.0})
    low, high = est.interval(0.9999)
    assert low == 0.0 or low < 1e-300
    assert high == float("inf")
