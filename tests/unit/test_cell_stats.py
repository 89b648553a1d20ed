"""Per-cell statistics stored for SQL users: the report's numbers and verdicts, as rows."""

from services.common.results.rows import ResultRow
from services.reporting.analysis import CampaignData
from services.reporting.cell_stats import cell_stat_rows


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
    assert abs(b.ratio - 120 / 99.5) < 1e-9 and b.ratio_low < b.ratio < b.ratio_high and b.p_value < 0.05
    a = rows[("qps", "A", 1)]
    assert (a.ratio, a.verdict, a.mark, a.stalled_runs, a.n, a.mean) == (None, None, "~", 1, 2, 99.5)
    p95 = rows[("p95_ms", "B", 1)]
    assert p95.verdict == "faster" and p95.ratio < 1 and not p95.higher_is_better


def test_single_runs_are_untested_and_collapse_is_marked():
    """One repetition per cell: `n/a` with `?`; throughput far below the peak at fewer threads gets `!`."""
    runs = [_row("A", 1, 1, 100), _row("A", 64, 1, 10), _row("B", 1, 1, 100), _row("B", 64, 1, 95)]
    rows = {(r.metric, r.target, r.threads): r for r in cell_stat_rows(_data(runs))}
    assert rows[("qps", "B", 64)].verdict == "n/a" and rows[("qps", "B", 64)].mark == "?"
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


def test_stored_marks_are_the_absolute_tables_marks():
    """With the seeds' `*` asked for, every stored q/s mark is the report's absolute q/s table's mark
    for that cell, a noisy target without a baseline cell to test against included (`?` alone)."""
    from services.reporting import metrics_catalog as mc
    from services.reporting.analysis import build, collapse_findings
    from services.reporting.options import ReportOptions

    runs = [_row("A", 1, i, v) for i, v in enumerate([100, 150, 60], 1)]
    runs += [_row("B", 1, i, v) for i, v in enumerate([120, 121, 119], 1)]
    runs += [_row("B", 64, i, v) for i, v in enumerate([30, 90, 10], 1)]
    data = _data(runs)
    opts = ReportOptions(mark_high_cv=True)
    table = build(data, mc.BUILTIN["qps"], "absolute", opts, collapse_findings(data, opts))
    shown = {(row.target, t): c.mark for row in table.rows for t, c in zip(table.threads, row.cells) if c.value}
    stored = {(r.target, r.threads): r.mark for r in cell_stat_rows(data, opts) if r.metric == "qps"}
    assert stored == shown and shown[("B", 64)] == "?" and shown[("A", 1)] == "*"
