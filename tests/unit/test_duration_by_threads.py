"""Longer windows for higher thread counts (spec ``duration_by_threads``), and the plan's warning
when a window is shorter than 10 mean response times the previous campaign measured on a cell."""

from __future__ import annotations

from dataclasses import replace

import pytest

from services.common.config import Settings
from services.common.messages.runs import Cell
from services.common.results.rows import HistoryEntry, ResultRow
from services.common.spec.loading import SpecError, load_spec_source, parse_spec
from services.scheduler import plan, preflight
from services.scheduler.cli import main
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
    assert_refused(SPEC.replace("{1024: 60s, 4096: 2m}", field), expected)


def assert_refused(text: str, expected: str) -> None:
    """The spec is refused with a line that says ``expected``."""
    with pytest.raises(SpecError) as info:
        parse_spec(text, "spec.yaml")
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


WORKLOAD_WINDOWS = SPEC.replace("workloads: [oltp_point_select]", """workloads:
  - oltp_point_select
  - {name: oltp_read_write, duration_by_threads: {2048: 5m}, warmup_by_threads: {4096: 30s}}""") + \
    "warmup: 5s\nwarmup_by_threads: {1024: 15s}\n"


def test_a_workload_s_own_windows_replace_the_campaign_s_from_its_lowest_count_on():
    """oltp_read_write measures 5 minutes from 2048 threads on, the campaign's 2m at 4096 included;
    below 2048 it keeps the campaign's windows, and the other workload keeps them all."""
    spec = parse_spec(WORKLOAD_WINDOWS, "spec.yaml")
    runs = plan.run_specs(spec, "c1", now=0.0)
    got = {(r.cell.workload, r.cell.threads): (r.warmup, r.duration) for r in runs}
    assert got == {("oltp_point_select", 16): (5.0, 30.0), ("oltp_point_select", 1024): (15.0, 60.0),
                   ("oltp_point_select", 2048): (15.0, 60.0), ("oltp_point_select", 4096): (15.0, 120.0),
                   ("oltp_read_write", 16): (5.0, 30.0), ("oltp_read_write", 1024): (15.0, 60.0),
                   ("oltp_read_write", 2048): (15.0, 300.0), ("oltp_read_write", 4096): (30.0, 300.0)}
    # 2 targets x every cell's warm-up, window and overhead.
    assert plan.estimated_seconds(spec) == 2 * sum(w + d + plan.RUN_OVERHEAD_S for w, d in got.values())
    back = type(spec).model_validate_json(spec.model_dump_json())
    assert back == spec and back.duration_for(4096, "oltp_read_write") == 300.0


def test_the_plan_prints_each_workload_s_windows(tmp_path, capsys):
    path = tmp_path / "spec.yaml"
    path.write_text(WORKLOAD_WINDOWS)
    assert main(["plan", "--offline", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "runs of oltp_point_select: 5s warm-up + 30s measured at 16 threads; 15s warm-up + 1m measured at " \
           "1024, 2048 threads; 15s warm-up + 2m measured at 4096 threads" in out
    assert "runs of oltp_read_write: 5s warm-up + 30s measured at 16 threads; 15s warm-up + 1m measured at " \
           "1024 threads; 15s warm-up + 5m measured at 2048 threads; 30s warm-up + 5m measured at 4096 threads" in out


def test_duration_and_warmup_on_the_command_line_set_every_run_s(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(WORKLOAD_WINDOWS)
    spec, _ = load_spec_source(path, {"duration": 7.0, "duration_by_threads": {}, "warmup": 1.0,
                                      "warmup_by_threads": {}})
    assert {(r.warmup, r.duration) for r in plan.run_specs(spec, "c1", now=0.0)} == {(1.0, 7.0)}


def test_a_run_too_long_for_the_broker_names_the_workload_s_own_field(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(WORKLOAD_WINDOWS.replace("{2048: 5m}", "{2048: 50m}"))
    spec, source = load_spec_source(path)
    assert dict(preflight.run_parts(spec))["warmup"] == 30.0   # the longest run's own warm-up
    errors = preflight.run_length_errors(spec, replace(Settings(), consumer_timeout_ms=1_800_000), source)
    assert [e.path for e in errors] == ["workloads[1].duration_by_threads"], errors
    assert "a run may take 50m32s" in str(errors[0])


@pytest.mark.parametrize("field, expected", [
    ("{1024: -1s}", "workloads[1].warmup_by_threads[1024]"),
    ("{zero: 1s}", "workloads[1].warmup_by_threads: 'zero' is not a thread count"),
])
def test_a_bad_workload_warm_up_is_refused_naming_the_field(field, expected):
    assert_refused(WORKLOAD_WINDOWS.replace("{4096: 30s}", field), expected)
