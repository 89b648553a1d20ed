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
    the per-second series is sysbench's per-second report, with what completed in the 5 ms after its
    last line in the last second (so it adds up to the totals); the thread count is read from the output."""
    r = sysbench_result(_file("oltp_read_write_pareto_histogram.txt"), "imp")
    assert round(r.qps, 2) == 13454.89 and abs(r.tps - 671.11) < 0.05
    assert (r.totals.queries, r.totals.transactions, r.totals.ignored_errors) == (40438, 2017, 6)
    assert abs(r.latency.p99_ms - 7.98) / 7.98 < 0.02 and r.latency.max_ms == 11.23 and r.latency.p50_ms > 0
    assert r.cell.threads == 2 and r.series.queries == [13125, 13231, 14067 + 15] and r.series.ignored_errors == [1, 2, 3]
    assert sum(r.series.queries) == r.totals.queries and sum(r.series.transactions) == r.totals.transactions
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


@pytest.mark.parametrize("flag,value,said", [
    ("--campaign", "c" * 129, "argument --campaign: "), ("--campaign", "c" * 65, "argument --campaign: "),
    ("--target", "t" * 65, "argument --target: "), ("--target", "a b", "argument --target: "),
    ("--first-repetition", "0", "argument --first-repetition: must be 1 to 1,000, got 0"),
    ("--threads", "0", "argument --threads: must be 1 to 65,535, got 0"),
])
def test_bad_flags_are_refused_naming_the_flag(flag, value, said, capsys):
    """A name the spec could not hold or a repetition below 1: exit 2 naming the flag, no traceback,
    before any file or DB is read."""
    from services.collector import cli as collector_cli

    argv = {"--campaign": "imp", "--target": "old", "--workload": "oltp_read_write"} | {flag: value}
    with pytest.raises(SystemExit) as e:
        collector_cli.main(["import-sysbench", str(FIXTURES / "oltp_read_write_pareto_histogram.txt"),
                            *[x for kv in argv.items() for x in kv]])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err, err


def test_a_value_the_result_cannot_hold_is_bad_input_not_a_traceback():
    """Reached past the flags (a caller of campaign_of), a workload name too long for the results
    DB is an ExportFileError naming the file and the field."""
    f = SysbenchFile("run.txt", (FIXTURES / "oltp_read_write_pareto_histogram.txt").read_text(), "old", "w" * 70,
                     None, 1, 1000.0)
    with pytest.raises(ExportFileError, match=r"run.txt: workload: String should have at most 64"):
        campaign_of([f], "imp", now=1.0)


def test_only_an_earlier_import_counts_as_one():
    """A campaign the fleet ran is not an import (import-sysbench refuses to add to it without --force)."""
    from services.collector.sysbench_import import is_import
    from services.common.store.campaign_file import CampaignExport, ExportedCampaign
    from tests.unit.consumer_fixtures import SPEC

    imported = campaign_of([_file("oltp_read_write_pareto_histogram.txt")], "imp", now=5.0)
    assert is_import(imported)
    fleet = CampaignExport(campaign=ExportedCampaign(campaign_id="units", name="units", spec=SPEC, spec_hash="h",
                                                     pool="default", baseline="A", total_runs=8, state="finished",
                                                     created_at=1.0), runs=[], results=[])
    assert not is_import(fleet)


def test_an_unfinished_campaign_does_not_travel():
    """An export with runs still pending or running says so (export refuses it; import refuses such
    a file): imported, those runs would be reaped or wait for ever."""
    import json

    from services.common.store.campaign_file import decode_export

    done = campaign_of([_file("oltp_read_write_pareto_histogram.txt")], "imp", now=5.0)
    assert done.unfinished() is None
    doc = json.loads(done.encode())
    doc["runs"][0]["state"] = "running"
    with pytest.raises(ExportFileError, match=r"x.json: runs: campaign imp is not finished \(1 running runs\)"):
        decode_export(json.dumps(doc), "x.json")
