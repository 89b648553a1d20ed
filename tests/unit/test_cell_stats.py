"""Per-cell statistics stored for SQL users: the report's numbers and verdicts, as rows."""

import math

from services.common.results.rows import ResultRow
from services.reporting.analysis import CampaignData
from services.reporting.cell_stats import STORED_METRICS, cell_stat_rows
from services.reporting.options import ReportOptions
from services.reporting.report import analyse


def _row(target: str, threads: int, rep: int, qps: float, status: str = "ok", flags: str | None = None) -> ResultRow:
    return ResultRow(run_id=f"{target}-{threads}-{rep}", campaign_id="c", target=target, workload="w", threads=threads,
                     repetition=rep, status=status, qps=qps, tps=qps / 10, p95_ms=1000 / max(qps, 1),
                     p99_ms=2000 / max(qps, 1), measured_s=10, error=None, quality_flags=flags)  # type: ignore[arg-type]


def _data(runs: list[ResultRow]) -> CampaignData:
    return CampaignData(campaign_id="c", name="c", state="finished", targets=("A", "B"), baseline="A",
                        workloads=("w",), threads=(1, 64), runs=tuple(runs))


def test_rows_carry_summary_ratio_verdict_and_marks():
    """B, 20% faster with little noise, is `faster` with `+`; the baseline's row has no ratio; its
    stalled run gives `~` to it and to B's comparison; latency metrics read lower as better; a failed
    run is counted, not summarised."""
    runs = [_row("A", 1, i, v, flags="stall" if i == 2 else None) for i, v in enumerate([100, 101, 99], 1)]
    runs += [_row("B", 1, i, v) for i, v in enumerate([120, 121, 119], 1)] + [_row("B", 1, 4, 0, "failed")]
    rows = {(r.metric, r.target, r.threads): r for r in cell_stat_rows(_data(runs))}
    b = rows[("qps", "B", 1)]
    # A's stalled run is marked on B's ratio too, and left out of both cells' numbers as the report leaves it.
    assert (b.n, b.failed, b.mean, b.verdict, b.mark, b.stalled_runs) == (3, 1, 120.0, "faster", "+~", 1)
    # The ratio stands on the blocks the paired test keeps (A's repetition 2 pairs nothing), as the report's.
    assert abs(b.ratio - 119.5 / 99.5) < 1e-9 and b.ratio_low < b.ratio < b.ratio_high and b.p_value < 0.05
    assert b.excluded_runs == 1 and b.q_value < 0.05 and b.interval_low > 1 and b.interval_level < 1
    a = rows[("qps", "A", 1)]
    assert (a.ratio, a.verdict, a.mark, a.stalled_runs, a.n, a.mean) == (None, None, "~", 1, 2, 99.5)
    p95 = rows[("p95_ms", "B", 1)]
    assert p95.verdict == "faster" and p95.ratio < 1 and not p95.higher_is_better


def test_single_runs_are_untested_and_collapse_is_marked():
    """One repetition per cell: `missing` with `?`; throughput far below the peak at fewer threads gets `!`."""
    runs = [_row("A", 1, 1, 100), _row("A", 64, 1, 10), _row("B", 1, 1, 100), _row("B", 64, 1, 95)]
    rows = {(r.metric, r.target, r.threads): r for r in cell_stat_rows(_data(runs))}
    assert rows[("qps", "B", 64)].verdict == "missing" and rows[("qps", "B", 64)].mark == "?"
    assert rows[("qps", "B", 64)].q_value is None and rows[("qps", "B", 64)].p_value is None
    assert rows[("qps", "A", 64)].collapsed and rows[("qps", "A", 64)].mark == "!"
    assert rows[("qps", "A", 64)].collapse_ratio == 0.1 and rows[("qps", "A", 64)].stdev is None


def test_runs_failed_without_a_result_count_as_failed():
    """A run the collector failed with no result (dead-lettered or reaped) counts in its cell's
    failed runs, and a cell whose every run failed that way still has a row."""
    runs = [_row("A", 1, i, 100 + i) for i in (1, 2)] + [_row("B", 1, 1, 120, "failed")]
    rows = {(r.metric, r.target, r.threads): r
            for r in cell_stat_rows(_data(runs), unstored_failures={("B", "w", 1): 2, ("A", "w", 64): 3})}
    assert (rows[("qps", "B", 1)].failed, rows[("qps", "B", 1)].n) == (3, 0)
    assert (rows[("qps", "A", 64)].failed, rows[("qps", "A", 64)].n, rows[("qps", "A", 64)].mean) == (3, 0, None)
    assert rows[("qps", "A", 1)].failed == 0


def test_stored_marks_are_the_reports_marks():
    """With the seeds' `*` asked for, every stored q/s mark is the mark of that cell in the report's
    absolute q/s table, a noisy target without a baseline cell to test against included (`?` alone)."""
    runs = [_row("A", 1, i, v) for i, v in enumerate([100, 150, 60], 1)]
    runs += [_row("B", 1, i, v) for i, v in enumerate([120, 121, 119], 1)]
    runs += [_row("B", 64, i, v) for i, v in enumerate([30, 90, 10], 1)]
    data = _data(runs)
    opts = ReportOptions(mark_high_cv=True, mode="absolute")
    table = analyse(data, opts).main.table
    shown = {(row.target, t): c.mark for row in table.rows for t, c in zip(table.threads, row.cells) if c.value}
    stored = {(r.target, r.threads): r.mark for r in cell_stat_rows(data, opts) if r.metric == "qps"}
    assert stored == shown and shown[("B", 64)] == "?" and shown[("A", 1)] == "*" and shown[("B", 1)] == "°*"


def _campaign() -> CampaignData:
    """Two workloads, three targets: B 20% faster everywhere with little noise, C as noisy as A."""
    runs = []
    for w in ("w1", "w2"):
        for t, level, noise in (("A", 100.0, (0, 3, -2)), ("B", 120.0, (1, -1, 0)), ("C", 100.0, (-4, 5, 1))):
            for th in (1, 64):
                for rep, n in enumerate(noise, 1):
                    runs.append(ResultRow(run_id=f"{t}-{w}-{th}-{rep}", campaign_id="c", target=t, workload=w,
                                          threads=th, repetition=rep, status="ok", qps=level + n + th / 100,
                                          tps=(level + n) / 10, p95_ms=1000 / (level + n), p99_ms=2000 / (level + n),
                                          measured_s=10, error=None))  # type: ignore[arg-type]
    return CampaignData(campaign_id="c", name="c", state="finished", targets=("A", "B", "C"), baseline="A",
                        workloads=("w1", "w2"), threads=(1, 64), runs=tuple(runs))


def test_stored_decisions_are_those_of_the_report_of_each_metric():
    """Each stored metric's decisions, q-values and adjusted intervals are those of `collector report
    --metric M`: the metric's compared cells of every workload judged as one family."""
    data = _campaign()
    stored = {(r.metric, r.workload, r.threads, r.target): r for r in cell_stat_rows(data)}
    for metric in STORED_METRICS:
        table = analyse(data, ReportOptions(metric=metric)).main.table
        assert table.family is not None and table.family.size == 8  # 2 targets x 2 workloads x 2 thread counts
        for row in table.rows:
            for t, c in zip(table.threads, row.cells):
                s = stored[(metric, row.workload, t, row.target)]
                assert (s.verdict, s.q_value, s.interval_low, s.interval_high, s.interval_level) == (
                    c.verdict.decision, c.verdict.q, c.verdict.low, c.verdict.high, c.verdict.level), (metric, row)
                assert s.mark == c.mark and math.isclose(s.ratio * 100, c.value)
    assert {stored[("qps", w, t, "B")].verdict for w in ("w1", "w2") for t in (1, 64)} == {"faster"}
    assert stored[("qps", "w1", 1, "A")].verdict is None  # the baseline's own row


def test_rows_of_part_of_a_campaign_claim_no_verdict():
    """Rows computed from part of a campaign carry figures, the cell's own test and no decision,
    q-value or decision mark: the family they were not given is not theirs to claim."""
    data = _campaign()
    whole = {(r.metric, r.workload, r.threads, r.target): r for r in cell_stat_rows(data)}
    part = {(r.metric, r.workload, r.threads, r.target): r for r in cell_stat_rows(data, judged=False)}
    assert part.keys() == whole.keys()
    for k, r in part.items():
        assert (r.verdict, r.q_value, r.interval_low, r.interval_high, r.interval_level) == (None,) * 5
        assert (r.n, r.mean, r.ratio, r.p_value, r.ratio_low) == (whole[k].n, whole[k].mean, whole[k].ratio,
                                                                  whole[k].p_value, whole[k].ratio_low)
    assert whole[("qps", "w1", 1, "B")].mark == "+" and part[("qps", "w1", 1, "B")].mark == ""
