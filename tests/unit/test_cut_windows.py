"""Results stored before the native driver measured a hung server's window to its end are read
over their planned window: the rate a user sees is the one the server ran at, and the run is
marked and listed as a stall (services/common/results/cut_windows.py)."""

from __future__ import annotations

import dataclasses

import pytest

from services.common.results.cut_windows import rejudge_entries, rejudge_rows
from services.common.results.rows import HistoryEntry, ResultRow
from services.common.spec.campaign import CampaignSpec
from services.reporting.stalls import stalled_runs

SPEC = {"name": "pool", "targets": [{"kind": "dsn", "name": "a", "host": "127.0.0.1", "user": "bench"}],
        "workloads": ["oltp_update_non_index", {"name": "oltp_read_write", "duration_by_threads": {4096: "80s"}}],
        "threads": [64, 4096], "duration": "10s", "repeat": 1}


def spec(**extra) -> CampaignSpec:
    return CampaignSpec.model_validate({**SPEC, **extra})


def row(measured_s: float, *, threads: int = 64, workload: str = "oltp_update_non_index", in_flight: int | None = 64,
        status: str = "ok", flags: str = "", tps: float = 33_907.1) -> ResultRow:
    return ResultRow(run_id=f"c.a.{workload}.t{threads}.r1", campaign_id="c", target="a", workload=workload,
                     threads=threads, repetition=1, status=status, qps=tps, tps=tps, p95_ms=3.0, p99_ms=4.0,
                     measured_s=measured_s, error=None, stalled_s=0, longest_stall_s=0, overrun_s=0.0,
                     quality_flags=flags, in_flight_at_end=in_flight, transactions=round(tps * measured_s))


def test_a_window_a_hang_cut_short_is_read_over_its_planned_length_and_listed_as_a_stall():
    """The thread-pool study's pool run: every connection in flight from 7.88 s of a 10 s window on."""
    [cut] = rejudge_rows([row(7.8836)], spec())
    assert cut.measured_s == 10.0
    assert cut.tps == pytest.approx(33_907.1 * 0.78836) and cut.qps == cut.tps
    assert cut.tps * cut.measured_s == pytest.approx(cut.transactions, rel=1e-5)
    assert (cut.flags, cut.stalled_s, cut.longest_stall_s) == (("stall",), 2, 2)
    [listed] = stalled_runs([cut])
    assert listed.run_id == cut.run_id and listed.stalled_s == 2


@pytest.mark.parametrize("kept", [
    row(10.0),                                        # measured to its end
    row(9.4),                                         # no whole second after its last completion
    row(7.9, in_flight=0),                            # every connection stopped: its own end
    row(7.9, in_flight=None),                         # sysbench records no window
    row(7.9, status="failed"),
    row(7.9, flags="overrun,behind"),                 # an open loop its backlog ended
    row(80.0, threads=4096, workload="oltp_read_write"),
])
def test_a_run_measured_to_its_end_or_stopped_by_itself_is_left_as_stored(kept):
    assert rejudge_rows([kept], spec()) == [kept]


def test_the_planned_window_is_the_cells_own_and_open_loops_and_event_budgets_are_left_alone():
    [cut] = rejudge_rows([row(60.2, threads=4096, workload="oltp_read_write", tps=100.0)], spec())
    assert cut.measured_s == 80.0 and cut.stalled_s == 19 and cut.tps == pytest.approx(100.0 * 60.2 / 80)
    for own_end in (spec(rate=500), spec(events=1000)):
        assert rejudge_rows([row(7.9)], own_end) == [row(7.9)]


def test_a_run_already_marked_keeps_its_marks_and_adds_the_silent_seconds():
    [cut] = rejudge_rows([row(6.5, flags="overrun")], spec())
    assert cut.flags == ("stall", "overrun") and cut.stalled_s == 3


def test_a_cells_history_reads_each_night_as_its_report_does():
    """`collector history` and `--changes` read a night cut short by a hang as its report does; a
    night whose campaign is gone from the results DB is left as stored."""
    cut, whole = HistoryEntry("pool", 1.0, row(7.8836)), HistoryEntry("pool", 2.0, row(10.0))
    gone = HistoryEntry("pool", 3.0, dataclasses.replace(row(7.8836), campaign_id="gone", run_id="gone.a.x.t64.r1"))
    read = rejudge_entries([cut, whole, gone], {"c": spec()})
    assert [e.row.measured_s for e in read] == [10.0, 10.0, 7.8836]
    assert read[0].row.flags == ("stall",) and read[0].created_at == 1.0 and read[1] == whole and read[2] == gone
