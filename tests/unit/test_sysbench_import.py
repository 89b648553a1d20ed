"""Runs measured with plain sysbench 1.0, read from its text output into results and a campaign."""

from pathlib import Path

import pytest

from services.collector.sysbench_import import SysbenchFile, campaign_of, sysbench_result
from services.common.errors import ExportFileError

FIXTURES = Path(__file__).parent / "fixtures" / "sysbench"


def _file(name: str, target: str = "old", rep: int = 1, threads: int | None = None) -> SysbenchFile:
    return SysbenchFile(name, (FIXTURES / name).read_text(), target, "oltp_read_write", threads, rep, 1000.0)


def test_result_reproduces_sysbench_qps_tps_and_percentiles():
    """q/s and tps are the ones sysbench printed; p99 is its 99th percentile within a histogram bucket;
    the per-second series is sysbench's per-second report; the thread count is read from the output."""
    r = sysbench_result(_file("oltp_read_write_pareto_histogram.txt"), "imp")
    assert round(r.qps, 2) == 13454.89 and abs(r.tps - 671.11) < 0.05
    assert (r.totals.queries, r.totals.transactions, r.totals.ignored_errors) == (40438, 2017, 6)
    assert abs(r.latency.p99_ms - 7.98) / 7.98 < 0.02 and r.latency.max_ms == 11.23 and r.latency.p50_ms > 0
    assert r.cell.threads == 2 and r.series.queries == [13125, 13231, 14067] and r.series.ignored_errors == [1, 2, 3]
    assert r.versions == {"sysbench": "1.0.20"} and r.run_id == "imp.old.oltp_read_write.t2.r1"


def test_campaign_of_adds_targets_to_an_earlier_import():
    """A second import with another target adds it to the campaign; the first target stays the baseline."""
    first = campaign_of([_file("oltp_read_write_pareto_histogram.txt", "old", 1),
                         _file("oltp_read_write_pareto_histogram.txt", "old", 2)], "imp", now=5.0)
    both = campaign_of([_file("oltp_read_write_pareto_histogram.txt", "new", 1)], "imp", earlier=first, now=6.0)
    assert [t.name for t in both.campaign.spec.targets] == ["old", "new"] and both.campaign.baseline == "old"
    assert len(both.results) == 3 and both.campaign.spec.repeat == 2 and both.campaign.total_runs == 3
    assert both.campaign.spec.threads == [2] and both.campaign.created_at == 5.0


def test_unusable_output_is_bad_input_naming_the_file():
    """Output of a run that failed, or a thread count that contradicts the output, is refused naming the file."""
    with pytest.raises(ExportFileError, match="connect_refused.txt: sysbench did not finish the run"):
        sysbench_result(_file("connect_refused.txt"), "imp")
    with pytest.raises(ExportFileError, match="--threads 8, but the output says Number of threads: 2"):
        sysbench_result(_file("oltp_read_write_pareto_histogram.txt", threads=8), "imp")
