"""One table of output formats: a format registered once is a `--format` choice of `collector
report`, `compare`, `history` and `scheduler submit --wait`, and each renders through it."""

from __future__ import annotations

import argparse

import pytest

from services.common import cli
from services.common.config import Settings
from services.common.results.rows import HistoryEntry
from services.common.spec.campaign import CampaignSpec
from services.reporting.compare import CampaignComparison
from services.reporting.history import History
from services.reporting.render import registry
from services.reporting.report import Report
from tests.unit.test_report_formats import POOL_RUNS, campaign, run
from tests.unit.report_sample import FinishedRuns


def _report(report: Report) -> str:
    return f"tally report {report.data.campaign_id}: {len(report.tables)} table(s)\n"


def _compare(c: CampaignComparison) -> str:
    return f"tally compare {c.a.campaign_id} against {c.b.campaign_id}: {len(c.tables)} table(s)\n"


def _history(h: History) -> str:
    return f"tally history {h.cell}: {len(h.points)} campaign(s)\n"


@pytest.fixture
def tally():
    """A tiny format, registered for the test and gone after it."""
    r = registry.register(registry.Renderer("tally", ".tally", report=_report, compare=_compare, history=_history))
    yield r
    registry.unregister("tally")
    assert "tally" not in registry.names("report")


class _Results:
    def history(self, target, workload, threads, *, with_results):
        return [HistoryEntry(cid, at, run("pool", "oltp_point_select", 16, rep, 1000.0 + rep, cid=cid))
                for cid, at in (("c1", 100.0), ("c2", 200.0)) for rep in (1, 2, 3)]


class _NoCampaigns:
    """History reads each row's campaign spec; these literal rows have none stored."""

    def specs(self, campaign_ids):
        return {}


class _Store:
    """What the report commands ask of the results DB, from literals."""

    def __init__(self, settings=None):
        self.results, self.runs = _Results(), FinishedRuns()
        self.campaigns = _NoCampaigns()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def open(self):
        return self

    def close(self):
        pass



def test_a_format_registered_once_is_a_choice_of_every_report_command(tally):
    """The parsers of report, compare, history and submit take the new format; unknown ones stay refused."""
    from services.collector import cli as collector_cli
    from services.scheduler import cli as scheduler_cli

    p = collector_cli._parser()
    assert p.parse_args(["report", "c", "--format", "tally"]).fmt == "tally"
    assert p.parse_args(["compare", "a", "b", "--format", "tally"]).fmt == "tally"
    assert p.parse_args(["history", "--target", "t", "--workload", "w", "--threads", "1", "--format", "tally"]).fmt == "tally"
    assert scheduler_cli._parser().parse_args(["submit", "s.yaml", "--wait", "--format", "tally"]).fmt == "tally"
    for argv in (["report", "c", "--format", "tallies"], ["compare", "a", "b", "--format", "tallies"]):
        with pytest.raises(SystemExit):
            p.parse_args(argv)
    with pytest.raises(ValueError, match="already registered"):
        registry.register(tally)


def test_each_report_command_renders_through_the_registered_format(tally, monkeypatch, capsys):
    """`collector report`, `compare` and `history` print what the new renderer returns."""
    from services.collector import cli as collector_cli
    from services.collector.commands import compare as compare_command
    from services.collector.commands import history as history_command
    from services.collector.commands import report as report_command
    from services.reporting import load as load_module

    a, b = campaign(POOL_RUNS, cid="pool-a"), campaign(POOL_RUNS, cid="pool-b")
    for module in (report_command, compare_command, history_command):
        monkeypatch.setattr(module, "Store", _Store)
    monkeypatch.setattr(load_module, "load_for", lambda store, ref, opts, plots=False, pool=None: a)
    monkeypatch.setattr(load_module, "load", lambda store, ref, with_results=True: {"a": a, "b": b}[ref])

    assert collector_cli.main(["report", "pool-a", "--format", "tally"]) == cli.EXIT_OK
    assert capsys.readouterr().out == "tally report pool-a: 1 table(s)\n"
    assert collector_cli.main(["compare", "a", "b", "--format", "tally"]) == cli.EXIT_OK
    assert capsys.readouterr().out == "tally compare pool-a against pool-b: 2 table(s)\n"
    assert collector_cli.main(["history", "--target", "pool", "--workload", "oltp_point_select", "--threads", "16",
                               "--format", "tally"]) == cli.EXIT_OK
    assert capsys.readouterr().out == "tally history pool / oltp_point_select / 16 threads: 2 campaign(s)\n"


def test_submit_wait_prints_the_final_report_in_the_registered_format(tally, monkeypatch, capsys, tmp_path):
    """`scheduler submit --wait --format tally` prints the finished campaign's report as the new
    renderer returns it, or writes it to --out."""
    from services.reporting import load as load_module
    from services.reporting.report import analyse
    from services.scheduler import follow

    monkeypatch.setattr(follow, "Store", _Store)
    monkeypatch.setattr(load_module, "load_report",
                        lambda store, ref, opts, plots=False: analyse(campaign(POOL_RUNS, cid=ref), opts))
    spec = CampaignSpec(name="pool", targets=[{"name": "tpc", "user": "bench"}, {"name": "pool", "user": "bench"}],
                        workloads=["oltp_point_select"],
                        threads=[16, 4096], duration=60, repeat=3)
    args = argparse.Namespace(poll=0.01, fmt="tally", out=None)
    assert follow.wait(Settings(), "c", spec, args) == cli.EXIT_OK
    assert capsys.readouterr().out == "tally report c: 1 table(s)\n"
    args.out = str(tmp_path / "final.tally")
    assert follow.wait(Settings(), "c", spec, args) == cli.EXIT_OK
    assert capsys.readouterr().out == "" and (tmp_path / "final.tally").read_text() == "tally report c: 1 table(s)\n"


def test_a_format_that_renders_no_history_is_no_history_choice(monkeypatch):
    """A format without a history renderer is offered by report and compare, not by history."""
    from services.collector import cli as collector_cli

    registry.register(registry.Renderer("pages", ".pages", report=_report, compare=_compare, to_file=True))
    try:
        p = collector_cli._parser()
        assert p.parse_args(["report", "c", "--format", "pages", "--out", "x"]).fmt == "pages"
        with pytest.raises(SystemExit):
            p.parse_args(["history", "--target", "t", "--workload", "w", "--threads", "1", "--format", "pages"])
        # It writes a file: without --out the report is refused before reading anything.
        assert collector_cli.main(["report", "c", "--format", "pages"]) == cli.EXIT_USAGE
    finally:
        registry.unregister("pages")


@pytest.mark.parametrize(("argv", "why"), [
    (["--format", "csv"], "add --wait"),
    (["--wait", "--json", "--format", "csv"], "leave out --format"),
    (["--wait", "--format", "ods"], "--format ods writes a file: give --out FILE"),
    (["--wait", "--format", "html"], "--format html writes a file: give --out FILE"),
], ids=["without-wait", "with-json", "ods-without-out", "html-without-out"])
def test_submit_refuses_a_report_format_it_could_not_honour_before_submitting(argv, why):
    """`scheduler submit` checks --format/--out up front: a report that could not be written is
    refused before the campaign runs for hours, not after."""
    from services.scheduler import cli as scheduler_cli

    args = scheduler_cli._parser().parse_args(["submit", "s.yaml", *argv])
    assert why in (scheduler_cli._report_flags_refused(args) or "")
    args = scheduler_cli._parser().parse_args(["submit", "s.yaml", "--wait", "--format", "html", "--out", "r.html"])
    assert scheduler_cli._report_flags_refused(args) is None


def test_every_built_in_format_names_render_functions_that_exist_and_listing_them_loads_none():
    """The table names its formats' functions by module and name, loaded at their first use: each
    named function exists, and a fresh process that lists the formats loads no format's module."""
    import importlib
    import subprocess
    import sys
    from dataclasses import fields

    named = [getattr(r, f.name) for r in registry._RENDERERS.values() for f in fields(r)]
    later = [fn.lines if isinstance(fn, registry._Lines) else fn for fn in named
             if isinstance(fn, (registry._Later, registry._Lines))]
    assert len(later) == 25, "every built-in format's functions are named lazily"
    for fn in later:
        assert callable(getattr(importlib.import_module(fn.module), fn.name)), f"{fn.module}.{fn.name}"
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys; from services.reporting.render import registry; registry.names('report');"
                               "print(' '.join(m for m in sys.modules if m.startswith('services.reporting')))"],
        capture_output=True, text=True, check=True).stdout.split()
    assert not {"services.reporting.render.html", "services.reporting.render.machine_formats",
                "services.reporting.report", "services.reporting.compare"} & set(loaded), loaded
