"""Longer windows for higher thread counts (spec ``duration_by_threads``), and the plan's warning
when a window is shorter than 10 mean response times the previous campaign measured on a cell."""

from __future__ import annotations

import pytest

from services.common.messages.runs import Cell
from services.common.results.rows import HistoryEntry, ResultRow
from services.common.spec.loading import SpecError, parse_spec
from services.scheduler import plan
from services.scheduler.windows import MeasuredCell, previous_measurement, window_warnings

SPEC = """\
name: pool
targets: [{name: off, user: bench, database: sb_off}, {name: on, user: bench, database: sb_on}]
workloads: [oltp_point_select]
threads: [16, 1024, 2048, 4096]
duration: 30s
duration_by_threads: {1024: 60s, 4096: 2m}
"""


def test_each_run_measures_the_duration_of_the_highest_count_at_or_below_its_threads():
    spec = parse_spec(SPEC, "spec.yaml")
    assert [spec.duration_for(t) for t in spec.threads] == [30.0, 60.0, 60.0, 120.0]
    runs = plan.run_specs(spec, "c1", now=0.0)
    assert {(r.cell.threads, r.duration) for r in runs} == {(16, 30.0), (1024, 60.0), (2048, 60.0), (4096, 120.0)}
    # 2 targets x (30 + 60 + 60 + 120 s + 2 s overhead each)
    assert plan.estimated_seconds(spec) == 2 * (270 + 4 * plan.RUN_OVERHEAD_S)


def test_without_the_field_every_run_measures_duration():
    spec = parse_spec(SPEC.replace("duration_by_threads: {1024: 60s, 4096: 2m}\n", ""), "spec.yaml")
    assert {r.duration for r in plan.run_specs(spec, "c1", now=0.0)} == {30.0}


def test_a_stored_spec_read_back_from_json_keeps_the_durations():
    spec = parse_spec(SPEC, "spec.yaml")
    back = type(spec).model_validate_json(spec.model_dump_json())
    assert back.duration_for(4096) == 120.0 and back == spec


@pytest.mark.parametrize("field, expected", [
    ("{1024: 0s}", "duration_by_threads[1024]: must be > 0"),
    ("{1024: soon}", "duration_by_threads[1024]: 'soon' is not a duration"),
    ("{0: 60s}", "duration_by_threads: '0' is not a thread count"),
    ("{many: 60s}", "duration_by_threads: 'many' is not a thread count"),
    ("[60s]", "duration_by_threads: must be a mapping"),
])
def test_a_bad_entry_is_refused_naming_the_field(field, expected):
    with pytest.raises(SpecError) as info:
        parse_spec(SPEC.replace("{1024: 60s, 4096: 2m}", field), "spec.yaml")
    assert any(expected in line for line in str(info.value).splitlines()), str(info.value)


def entry(campaign: str, created: float, threads: int, tps: float, status: str = "ok") -> HistoryEntry:
    cell = Cell(target="on", workload="oltp_point_select", threads=threads)
    row = ResultRow(run_id=f"{campaign}.on.oltp_point_select.t{threads}.r1", campaign_id=campaign, target=cell.target,
                    workload=cell.workload, threads=threads, repetition=1, status=status, qps=tps, tps=tps,
                    p95_ms=1.0, p99_ms=2.0, measured_s=30.0, error=None)
    return HistoryEntry("pool", created, row)


def test_the_latest_campaign_gives_the_mean_response_time_by_littles_law():
    """4096 connections at 1,024 tps: each waits 4 s for its transaction (an older, faster campaign is not used)."""
    m = previous_measurement([entry("old", 1.0, 4096, 40_960.0), entry("new", 2.0, 4096, 1_024.0),
                              entry("new", 2.0, 4096, 0.0, status="failed")])
    assert m is not None and (m.campaign, m.runs) == ("new", 1) and m.mean_response_s == pytest.approx(4.0)
    assert previous_measurement([entry("new", 2.0, 4096, 0.0, status="failed")]) is None


def test_plan_warns_for_a_window_shorter_than_ten_mean_response_times():
    spec = parse_spec(SPEC, "spec.yaml")
    slow = MeasuredCell("on", "oltp_point_select", 4096, "new", 15.0, 3)   # needs 150 s, gets 120 s
    fast = MeasuredCell("on", "oltp_point_select", 1024, "new", 0.5, 3)    # needs 5 s, gets 60 s
    warnings = window_warnings(spec, [fast, slow])
    assert len(warnings) == 1
    assert warnings[0].startswith("on / oltp_point_select / 4096 threads: a 2m window is shorter than 10 x the mean "
                                  "response time campaign new measured there (15 s = threads / mean tps")
    assert warnings[0].endswith("measure at least 2m30s (duration_by_threads)")
    longer = parse_spec(SPEC.replace("4096: 2m", "4096: 3m"), "spec.yaml")
    assert window_warnings(longer, [fast, slow]) == []
    open_loop = parse_spec(SPEC + "rate: 100\n", "spec.yaml")
    assert window_warnings(open_loop, [slow]) == []
