"""`collector history` judges each campaign against the one before with the report's verdicts: unpaired
log ratios, one false-discovery family per page, adjusted intervals, missing figures never zero."""

from __future__ import annotations

import json

from services.common.results.rows import HistoryEntry, ResultRow
from services.reporting.history import History, history_points, render_history_json, render_history_text
from services.reporting.options import ReportOptions

QPS = ReportOptions(metric="qps")


def entry(cid: str, at: float, rep: int, qps: float, *, p95: float | None = 1.0, status: str = "ok",
          flags: str | None = None) -> HistoryEntry:
    row = ResultRow(run_id=f"{cid}.r{rep}", campaign_id=cid, target="new", workload="oltp_read_only", threads=8,
                    repetition=rep, status=status, qps=qps, tps=qps / 20, p95_ms=p95, p99_ms=p95, measured_s=60.0,
                    error=None, quality_flags=flags)
    return HistoryEntry(f"nightly-{cid}", at, row)


def campaign(cid: str, at: float, values: list[float], **kw) -> list[HistoryEntry]:
    return [entry(cid, at, i + 1, v, **kw) for i, v in enumerate(values)]


NOISE = [1000.0, 1012.0, 991.0]


def test_a_history_of_identical_campaigns_marks_no_change():
    """Six nightly campaigns with the very same repetitions: no campaign is marked better or worse,
    and the footer says how many comparisons were judged together."""
    entries = [e for n in range(6) for e in campaign(f"c{n}", 100.0 * n, NOISE)]
    h = History("new / oltp_read_only / 8 threads", tuple(history_points(entries, QPS)), QPS)
    decisions = [p.vs_previous.decision for p in h.points[1:]]
    assert h.points[0].vs_previous is None
    assert all(d not in ("faster", "slower") for d in decisions), decisions
    text = render_history_text(h)
    assert "5 comparisons on this page" in text and "0 marked" in text
    assert all(row.split()[10][-1] not in "+-" for row in text.splitlines()[4:9])


def test_a_twenty_percent_step_is_marked_with_its_adjusted_interval():
    """A build that loses 20% of its q/s is marked slower against the night before, and only that
    night; its adjusted interval lies wholly below no change and is printed."""
    entries = (campaign("c0", 0.0, NOISE) + campaign("c1", 100.0, NOISE)
               + campaign("c2", 200.0, [v * 0.8 for v in NOISE]) + campaign("c3", 300.0, [v * 0.8 for v in NOISE]))
    points = history_points(entries, QPS)
    assert [p.vs_previous.decision if p.vs_previous else None for p in points][2] == "slower"
    assert all(p.vs_previous.decision != "slower" for p in points[1:] if p.campaign_id != "c2")
    step = points[2].vs_previous
    assert step.high < 0.9 and step.low > 0.7 and step.selected
    text = render_history_text(History("cell", tuple(points), QPS)).splitlines()
    assert text[5].split()[10] == "-20.00%-"
    assert text[5].split()[11] == f"{(step.low - 1) * 100:+.1f}%..{(step.high - 1) * 100:+.1f}%"
    doc = json.loads(render_history_json(History("cell", tuple(points), QPS)))
    assert doc["family"]["size"] == 3 and doc["family"]["discoveries"] == 1
    assert doc["points"][2]["verdict"]["decision"] == "slower" and doc["points"][2]["verdict"]["q"] < 0.05


def test_one_comparison_among_many_needs_more_than_p_below_alpha():
    """A change that one test alone would call (p < 0.05) is not marked when the page judges many
    comparisons: the false-discovery control spans the page."""
    small = [1000.0, 1010.0, 990.0]
    nudged = [1040.0, 1050.0, 1030.0]
    alone = history_points(campaign("a", 0.0, small) + campaign("b", 100.0, nudged), QPS)
    assert alone[1].vs_previous.estimate.p < 0.05 and alone[1].vs_previous.decision == "faster"
    many = [e for n in range(12) for e in campaign(f"c{n:02}", 100.0 * n, small)]
    many += campaign("z", 5000.0, nudged)
    last = history_points(many, QPS)[-1].vs_previous
    assert last.estimate.p < 0.05 and last.decision != "faster"


def test_stalled_runs_are_left_out_of_the_test_and_counted():
    """A stalled run's low figure neither enters the mean nor the test; the stalled column counts it."""
    entries = campaign("c0", 0.0, NOISE) + campaign("c1", 100.0, NOISE + [1003.0])
    entries.append(entry("c1", 100.0, 5, 50.0, flags="stall"))
    points = history_points(entries, QPS)
    assert (points[1].stats.n, points[1].stalled) == (4, 1)
    assert points[1].vs_previous.decision != "slower"
    assert dict(points[1].figures).get(5) is None


def test_an_empty_figure_is_missing_not_zero():
    """Latency of runs that completed nothing is missing: the campaign shows n/a and 0 runs, and is
    neither compared nor marked; the next campaign is judged against the last one with figures."""
    p95 = ReportOptions(metric="p95_ms")
    entries = (campaign("c0", 0.0, NOISE, p95=2.0) + campaign("c1", 100.0, NOISE, p95=None)
               + campaign("c2", 200.0, NOISE, p95=2.0))
    points = history_points(entries, p95)
    assert points[1].stats is None and points[1].vs_previous is None
    assert points[2].vs_previous.decision == "identical"
    row = render_history_text(History("cell", tuple(points), p95)).splitlines()[4].split()
    assert row[3:5] == ["0", "n/a"]


def test_failed_runs_are_counted_and_one_repetition_is_untested():
    """A campaign whose other runs failed has one figure: it is shown, counted, and marked ? (untested)."""
    entries = campaign("c0", 0.0, NOISE) + [entry("c1", 100.0, 1, 900.0), entry("c1", 100.0, 2, 0.0, status="failed")]
    points = history_points(entries, QPS)
    assert (points[1].stats.n, points[1].failed, points[1].vs_previous.decision) == (1, 1, "missing")
    assert render_history_text(History("cell", tuple(points), QPS)).splitlines()[4].split()[-1] == "?"
