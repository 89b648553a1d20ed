"""`--fail-on-slower PCT --confirm`: the failing cells, and only they, re-run with their baseline as
a campaign of their own, and judged again as a fresh family of just those cells."""

from __future__ import annotations

import pytest

from services.common.spec.campaign import CampaignSpec
from services.reporting.gate import confirm, regressions
from services.reporting.options import ReportOptions
from services.reporting.report import analyse
from services.scheduler import cli as scheduler_cli
from services.scheduler.confirm_plan import confirming_name, confirming_runs, confirming_spec

from tests.unit.test_report_formats import campaign, run

SPEC = CampaignSpec(name="nightly", targets=[{"name": "old", "user": "bench"}, {"name": "new", "user": "bench"}, {"name": "other", "user": "bench"}],
                    workloads=["oltp_point_select", "oltp_read_only"], threads=[1, 8, 64], duration=60,
                    duration_by_threads={64: 120}, repeat=3, seed=5)


def test_the_confirming_spec_keeps_the_failing_cells_and_their_baseline():
    """Only the failing targets (with the baseline), workloads and thread counts stay; targets,
    durations, seed and repeat are the failing campaign's, under a name that says it confirms."""
    s = confirming_spec(SPEC, [("new", "oltp_read_only", 64)])
    assert [t.name for t in s.targets] == ["old", "new"] and s.baseline_name == "old"
    assert [w.key for w in s.workloads] == ["oltp_read_only"] and s.threads == [64]
    assert (s.repeat, s.seed, s.duration_for(64), s.target("new")) == (3, 5, 120, SPEC.target("new"))
    assert s.name == "nightly-confirm" and len(confirming_name("x" * 64)) == 64


def test_a_cell_not_of_the_campaign_or_of_its_baseline_is_refused():
    """A cell the campaign never ran, or the baseline's own, names itself in the error."""
    with pytest.raises(ValueError, match="new / oltp_read_only / 16 threads is not a cell"):
        confirming_spec(SPEC, [("new", "oltp_read_only", 16)])
    with pytest.raises(ValueError, match="old is the baseline"):
        confirming_spec(SPEC, [("old", "oltp_read_only", 8)])
    with pytest.raises(ValueError, match="no failing cell"):
        confirming_spec(SPEC, [])


def test_the_confirming_runs_are_the_failing_cells_alone_in_blocks():
    """Two failing cells in different rows and columns: each repetition runs each failing cell and
    its baseline's back to back, and nothing else (not the cells the narrowed matrix also holds)."""
    cells = [("new", "oltp_read_only", 8), ("other", "oltp_point_select", 64)]
    s = confirming_spec(SPEC, cells)
    runs = confirming_runs(s, cells, "c2", now=0.0)
    got = {(r.cell.target, r.cell.workload, r.cell.threads) for r in runs}
    assert got == {*cells, ("old", "oltp_read_only", 8), ("old", "oltp_point_select", 64)}
    assert len(runs) == 4 * 3 and [r.seq for r in runs] == list(range(12)) and {r.total_runs for r in runs} == {12}
    assert all(r.run_id.startswith("c2.") and r.campaign_id == "c2" for r in runs)
    for rep in (1, 2, 3):
        block = [(r.cell.target, r.cell.workload) for r in runs if r.repetition == rep and r.cell.threads == 8]
        assert sorted(block) == [("new", "oltp_read_only"), ("old", "oltp_read_only")]


BASE = [1000.0, 1010.0, 990.0]


def _campaign(new: dict[int, list[float]], cid: str):
    """old and new at 1 and 8 threads; ``new`` gives new's figures per thread count (old's are BASE)."""
    runs = [run(t, "oltp_point_select", n, i + 1, q) for n in (1, 8) for t, qs in (("old", BASE), ("new", new.get(n, BASE)))
            for i, q in enumerate(qs)]
    return campaign(runs, targets=("old", "new"), threads=(1, 8), cid=cid)


def _tables(data):
    return analyse(data, ReportOptions()).tables


#: 20% slower, with its own noise (exact multiples of BASE would have no spread to judge against).
SLOW = [800.0, 812.0, 788.0]
#: No change, with noise.
SAME = [1004.0, 1003.0, 993.0]


def test_the_gate_names_the_cells_slower_beyond_pct_over_their_interval():
    """20% slower at 8 threads fails a 5% gate and no other cell does; a 25% gate passes it."""
    first = regressions(_tables(_campaign({8: SLOW}, "c1")), 0.05)
    assert [r.key for r in first] == [("new", "oltp_point_select", 8)]
    assert first[0].high < 0.95 and "vs old 0.80" in first[0].describe("q/s", "vs old")
    assert regressions(_tables(_campaign({8: SLOW}, "c1")), 0.25) == []


def test_a_failing_cell_slower_again_is_confirmed():
    """The re-run shows the same 20% loss: the cell is confirmed and the gate fails."""
    first = regressions(_tables(_campaign({8: SLOW}, "c1")), 0.05)
    result = confirm(first, _tables(_campaign({8: SLOW}, "c2")), 0.05, "c2")
    assert [c.state for c in result.cells] == ["confirmed"] and result.failed
    assert result.lines("q/s", "vs old")[1].startswith("confirmed: new oltp_point_select t=8: vs old 0.80")


def test_a_failing_cell_that_was_noise_is_cleared():
    """The re-run shows no loss: the cell is not confirmed and the gate passes, saying so."""
    first = regressions(_tables(_campaign({8: SLOW}, "c1")), 0.05)
    result = confirm(first, _tables(_campaign({8: SAME}, "c2")), 0.05, "c2")
    assert [c.state for c in result.cells] == ["cleared"] and not result.failed
    assert result.lines("q/s", "vs old")[1].startswith("not confirmed: new oltp_point_select t=8")


def test_the_confirmation_is_a_fresh_family_of_the_failing_cells_alone():
    """Whatever else the re-run measured (a 1-thread cell far slower) is neither judged nor counted:
    the family is the one failing cell."""
    first = regressions(_tables(_campaign({8: SLOW}, "c1")), 0.05)
    result = confirm(first, _tables(_campaign({1: [500.0, 512.0, 490.0], 8: SAME}, "c2")), 0.05, "c2")
    assert result.family_size == 1 and [c.first.key for c in result.cells] == [("new", "oltp_point_select", 8)]
    assert not result.failed


def test_a_cell_the_rerun_could_not_measure_keeps_the_gate_failed():
    """Every re-run of the cell failed: it is not measured again, and the gate is not cleared."""
    first = regressions(_tables(_campaign({8: SLOW}, "c1")), 0.05)
    runs = [r for r in _campaign({}, "c2").runs if not (r.target == "new" and r.threads == 8)]
    runs += [run("new", "oltp_point_select", 8, i, 0.0, status="failed", cid="c2") for i in (1, 2, 3)]
    result = confirm(first, _tables(campaign(runs, targets=("old", "new"), threads=(1, 8), cid="c2")), 0.05, "c2")
    assert [c.state for c in result.cells] == ["unmeasured"] and result.failed
    assert "not measured again" in result.lines("q/s")[1]


@pytest.mark.parametrize("argv, why", [
    (["--fail-on-slower", "3"], "add --wait"),
    (["--wait", "--confirm"], "--confirm re-runs the cells that fail --fail-on-slower PCT"),
])
def test_submit_refuses_gate_flags_it_cannot_honour(argv, why):
    """`--fail-on-slower` needs `--wait` (the gate reads the finished campaign), `--confirm` needs
    `--fail-on-slower`; both refused before anything is submitted."""
    args = scheduler_cli._parser().parse_args(["submit", "s.yaml", *argv])
    assert why in (scheduler_cli._report_flags_refused(args) or "")


class _Campaigns:
    def get(self, ref):
        from services.common.store.campaigns import CampaignRow

        return CampaignRow("c1", "nightly", SPEC, "old", 18, "finished", 0.0) if ref in ("c1", "nightly") else None


class _Runs:
    pending = 0

    def counts(self, campaign_id):
        return {"pending": self.pending, "running": 0, "done": 18, "failed": 0, "cancelled": 0}


class _Judgements:
    """The gate verdicts a gate recorded, in memory."""

    def __init__(self):
        self.kept = []

    def keep_gate(self, verdict, warn):
        self.kept.append(verdict)


def _fake_store(monkeypatch, data, pending=0):
    from services.reporting import load as load_module
    from services.scheduler import confirm as confirm_module

    judgements = _Judgements()

    class Store:
        def __init__(self, settings):
            self.campaigns, self.runs, self.judgements = _Campaigns(), _Runs(), judgements
            self.runs.pending = pending

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

    monkeypatch.setattr(confirm_module, "Store", Store)
    monkeypatch.setattr(load_module, "load", lambda store, ref, with_results=True: data)
    confirm_module.kept = judgements.kept  # type: ignore[attr-defined]
    return confirm_module


def test_scheduler_gate_fails_on_the_slower_cell_and_names_it(monkeypatch, capsys):
    """`scheduler gate c1 --fail-on-slower 5`: exit 5 listing the cell against the baseline; a
    25% gate passes it, saying none was slower."""
    from services.common import cli

    kept = _fake_store(monkeypatch, _campaign({8: SLOW}, "c1")).kept
    assert scheduler_cli.main(["gate", "c1", "--fail-on-slower", "5"]) == cli.EXIT_SLOWER
    err = capsys.readouterr().err
    assert "error: 1 cell(s) of c1 significantly slower than baseline old by more than 5%" in err
    assert "error:   new oltp_point_select t=8: vs old 0.80" in err
    assert scheduler_cli.main(["gate", "c1", "--fail-on-slower", "25"]) == cli.EXIT_OK
    assert "gate: no cell of c1 slower than baseline old by more than 25%" in capsys.readouterr().err
    # Each verdict recorded for the history board, against the campaign's own baseline.
    assert [(v.campaign_id, v.against_campaign, v.verdict, v.beyond, v.slower_cells) for v in kept] == [
        ("c1", None, "failed", 0.05, 1), ("c1", None, "passed", 0.25, 0)]


def test_scheduler_gate_refuses_a_campaign_still_running(monkeypatch, capsys):
    """A campaign with runs still pending is not gated (its cells may still change): exit 2 saying why."""
    from services.common import cli

    _fake_store(monkeypatch, _campaign({8: SLOW}, "c1"), pending=3)
    assert scheduler_cli.main(["gate", "c1", "--fail-on-slower", "5", "--confirm"]) == cli.EXIT_USAGE
    assert "campaign c1 is not finished (3 runs pending, 0 running)" in capsys.readouterr().err


def test_submit_wait_gates_only_a_campaign_that_ended_well(monkeypatch):
    """`submit --wait --fail-on-slower 3 --confirm` gates (confirming) after the report; a wait that
    failed (runs failed: exit 1) is not gated over."""
    import argparse

    from services.common import cli
    from services.common.config import Settings

    seen = []
    monkeypatch.setattr(scheduler_cli, "gate_campaign", lambda settings, req: seen.append(req) or cli.EXIT_SLOWER)
    args = argparse.Namespace(fail_on_slower=0.03, confirm=True, poll=0.5)
    monkeypatch.setattr(scheduler_cli, "wait", lambda settings, cid, spec, args: cli.EXIT_OK)
    assert scheduler_cli._wait_and_gate(Settings(), "c1", SPEC, args) == cli.EXIT_SLOWER
    assert [(r.campaign, r.beyond, r.confirm) for r in seen] == [("c1", 0.03, True)]
    monkeypatch.setattr(scheduler_cli, "wait", lambda settings, cid, spec, args: cli.EXIT_FAILED)
    assert scheduler_cli._wait_and_gate(Settings(), "c1", SPEC, args) == cli.EXIT_FAILED and len(seen) == 1
