"""CI gates: `collector compare --fail-on-slower` finds cells of B significantly slower than A
beyond a threshold, on literal data; the exit codes are named and distinct."""

from __future__ import annotations

import re

import pytest

from services.common import cli
from services.common.results.rows import ResultRow
from services.reporting.analysis import CampaignData
from services.reporting.compare import compare_campaigns, regressions
from services.reporting.options import ReportOptions


def run(cid, threads, rep, qps, p95=1.0):
    return ResultRow(run_id=f"{cid}.t.w.t{threads}.r{rep}", campaign_id=cid, target="new", workload="update_index",
                     threads=threads, repetition=rep, status="ok", qps=qps, tps=qps, p95_ms=p95, p99_ms=p95,
                     measured_s=60.0, error=None)


def campaign(cid, cells):
    """``cells``: threads -> three q/s values (p95 ms = 1000 / q/s, so latency moves the other way)."""
    runs = [run(cid, t, i + 1, q, 1000.0 / q) for t, qs in cells.items() for i, q in enumerate(qs)]
    return CampaignData(cid, cid, "finished", ("new",), "new", ("update_index",), tuple(cells), {}, tuple(runs))


A = campaign("a", {4: [1000.0, 1010.0, 990.0], 64: [5000.0, 5050.0, 4950.0], 256: [3000.0, 3010.0, 2990.0]})
# 4 threads: 3% slower, significant; 64: 20% slower, significant; 256: 10% faster.
B = campaign("b", {4: [970.0, 980.0, 960.0], 64: [4000.0, 4040.0, 3960.0], 256: [3300.0, 3310.0, 3290.0]})


def test_slower_cells_beyond_the_threshold_fail_the_gate():
    """Only significant slowdowns beyond the threshold count; a faster cell never does."""
    c = compare_campaigns(A, B, ReportOptions(metric="qps"))
    assert [(r.threads, round(r.ratio, 3)) for r in regressions(c, 0.0)] == [(4, 0.97), (64, 0.8)]
    assert [r.threads for r in regressions(c, 0.05)] == [64]
    assert regressions(c, 0.25) == []
    # The other way round, only the cell where A was faster is a regression.
    assert [r.threads for r in regressions(compare_campaigns(B, A, ReportOptions(metric="qps")), 0.0)] == [256]
    assert regressions(c, 0.05)[0].describe("q/s").startswith("new update_index t=64: B/A 0.800 (-20.0% q/s, 95% interval -21.8% to -18.2%, q = ")


def test_latency_regressions_count_a_higher_value_as_slower():
    """For p95 latency, lower is better: B's higher latency is the regression."""
    c = compare_campaigns(A, B, ReportOptions(metric="p95_ms"))
    assert [r.threads for r in regressions(c, 0.05)] == [64]


def test_min_effect_still_applies():
    """A significant 3% slowdown below --min-effect 5% is no regression even with threshold 0."""
    c = compare_campaigns(A, B, ReportOptions(metric="qps", min_effect=0.05))
    assert [r.threads for r in regressions(c, 0.0)] == [64]


def test_exit_codes_are_distinct_and_documented():
    codes = [cli.EXIT_OK, cli.EXIT_FAILED, cli.EXIT_USAGE, cli.EXIT_CONNECT, cli.EXIT_COLLAPSE, cli.EXIT_SLOWER]
    assert len(set(codes)) == len(codes)
    assert re.search(rf"^\s*{cli.EXIT_SLOWER}\s+significantly slower \(--fail-on-slower\)", cli.EXIT_CODES_HELP, re.M)


def test_a_comparison_says_which_build_each_campaign_ran():
    """The header names each campaign's version and digest for a target, as the report's settings do."""
    from dataclasses import replace

    from services.reporting.compare import header_lines

    a = replace(A, settings={"targets": [{"name": "new", "version": "10.11.18-MariaDB", "sha256": "17310a092049"}]})
    b = replace(B, settings={"targets": [{"name": "new", "version": "10.11.19-MariaDB", "sha256": "9b44b62ca595",
                                          "malloc_loaded": "jemalloc"}]})
    lines = header_lines(compare_campaigns(a, b, ReportOptions(metric="qps")))
    assert lines[2] == ("target new: A ran version=10.11.18-MariaDB sha256=17310a092049; "
                        "B ran version=10.11.19-MariaDB sha256=9b44b62ca595 malloc_loaded=jemalloc")


def test_collector_compare_exits_5_naming_the_slower_cells(monkeypatch, capsys):
    """`collector compare A B --fail-on-slower 5` writes the comparison, lists the 64-thread cell on
    stderr and exits EXIT_SLOWER; 25% lets it pass; without the flag it never fails."""
    import contextlib

    from services.collector import cli as collector_cli
    from services.collector.commands import compare as compare_command
    from services.reporting import load as load_module

    class NoHistory:
        """A results DB holding A and B only: no earlier campaign shows how whole campaigns shift."""

        class results:
            @staticmethod
            def history(target, workload, threads, with_results=False):
                return []

    monkeypatch.setattr(compare_command, "Store", lambda settings: contextlib.nullcontext(NoHistory()))
    monkeypatch.setattr(load_module, "load", lambda store, ref, with_results=True: {"a": A, "b": B}[ref])
    assert collector_cli.main(["compare", "a", "b", "--fail-on-slower", "5"]) == cli.EXIT_SLOWER
    out, err = capsys.readouterr()
    assert "B = b (b, finished)" in out  # the comparison is still written
    assert "error: 1 cell(s) of b significantly slower than a by more than 5%: over their whole adjusted interval" in err
    assert "new update_index t=64: B/A 0.800" in err and "t=4:" not in err
    assert collector_cli.main(["compare", "a", "b", "--fail-on-slower", "25"]) == cli.EXIT_OK
    assert collector_cli.main(["compare", "a", "b", "--fail-on-slower", "0"]) == cli.EXIT_SLOWER  # any, beyond min-effect
    assert collector_cli.main(["compare", "a", "b"]) == cli.EXIT_OK
    with pytest.raises(SystemExit) as e:
        collector_cli.main(["compare", "a", "b", "--fail-on-slower", "abc"])
    assert e.value.code == cli.EXIT_USAGE


@pytest.mark.parametrize("argv", [["compare", "--fail-on-slower", "a", "b"], ["compare", "a", "b", "--fail-on-slower"]],
                         ids=["before-the-campaigns", "without-PCT"])
def test_fail_on_slower_never_takes_a_campaign_as_its_percentage(argv, capsys):
    """`--fail-on-slower` needs its PCT: written before the campaigns it does not swallow campaign A
    (the command is refused, exit 2, naming the flag), and without a value it is refused too."""
    from services.collector import cli as collector_cli

    with pytest.raises(SystemExit) as e:
        collector_cli.main(argv)
    assert e.value.code == cli.EXIT_USAGE
    assert "--fail-on-slower" in capsys.readouterr().err


def test_submit_wait_fails_on_collapse_only_when_asked(monkeypatch, capsys):
    """`scheduler submit --wait --fail-on-collapse` exits EXIT_COLLAPSE when the final report lists a
    collapsed cell (the seeds' thread-per-connection at 4096 clients); without the flag, 0."""
    import argparse

    from services.common.config import Settings
    from services.common.spec.campaign import CampaignSpec
    from services.reporting import load as load_module
    from services.reporting.report import analyse
    from services.scheduler import follow
    from tests.unit.report_sample import FinishedRuns
    from tests.unit.test_report_formats import POOL_RUNS, campaign as pool_campaign

    class DoneStore:
        def __init__(self, settings):
            self.runs = FinishedRuns()

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

        def open(self):
            return self

        def close(self):
            pass

    monkeypatch.setattr(follow, "Store", DoneStore)
    monkeypatch.setattr(load_module, "load_report", lambda store, ref, opts, plots=False: analyse(pool_campaign(POOL_RUNS), opts))
    spec = CampaignSpec(name="pool", targets=[{"name": "tpc", "user": "bench"}, {"name": "pool", "user": "bench"}],
                        workloads=["oltp_point_select"],
                        threads=[16, 4096], duration=60, repeat=3)
    args = argparse.Namespace(poll=0.01, fail_on_collapse=True)
    assert follow.wait(Settings(), "c", spec, args) == cli.EXIT_COLLAPSE
    assert "error: 1 collapsed cell(s) in c" in capsys.readouterr().err
    args.fail_on_collapse = False
    assert follow.wait(Settings(), "c", spec, args) == cli.EXIT_OK
