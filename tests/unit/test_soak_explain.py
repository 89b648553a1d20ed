"""bench/soak explains each failed run: its attempts from the logs, the fault beside each, and
whether the faults account for the failure (literal log lines and faults, no fleet)."""

from __future__ import annotations

import json

from bench.soak_explain import Fault, FailedRun, attempt_windows, explain, explain_all, run_events

RUN = "c1.M.oltp_point_select.t1.r3"
T0 = 1_764_565_200.0  # 2025-12-01T05:00:00Z


def line(offset_s: float, event: str, **fields: object) -> str:
    stamp = f"2025-12-01T05:{int(offset_s // 60):02d}:{offset_s % 60:06.3f}Z"
    return json.dumps({"run_id": RUN, "event": event, "timestamp": stamp, **fields})


def failed(attempts: int = 3, error: str = "MySQL error 2013: Lost connection") -> FailedRun:
    return FailedRun(RUN, attempts, "soak-w1", T0 + 200, T0 + 205, error)


def test_attempts_come_from_the_worker_logs_in_order():
    """Each run_started opens an attempt, closed by that worker's failure or finish line."""
    w1 = [line(10, "run_started", attempt=1), line(20, "run_attempt_failed", attempt=1, error="lost"),
          line(200, "run_started", attempt=3), line(205, "run_finished", status="failed", error="lost again")]
    w2 = [line(100, "run_started", attempt=2), line(110, "run_attempt_failed", attempt=2, error="gone"),
          '{"event": "run_started", "timestamp": "2025-12-01T05:00:01Z"}', "not json"]
    events = run_events("worker1", w1)[RUN] + run_events("worker2", w2)[RUN]
    windows = attempt_windows(events)
    assert [(w.attempt, w.source, w.outcome, w.error) for w in windows] == [
        (1, "worker1", "failed, retried", "lost"), (2, "worker2", "failed, retried", "gone"),
        (3, "worker1", "finished", "lost again")]
    assert windows[1].start == T0 + 100 and windows[1].end == T0 + 110


def test_a_fault_beside_every_failed_attempt_with_attempts_exhausted_is_expected():
    """Three attempts, each failed beside a target kill: the report says expected."""
    events = run_events("worker1", [
        line(10, "run_started", attempt=1), line(20, "run_attempt_failed", attempt=1, error="lost"),
        line(100, "run_started", attempt=2), line(110, "run_attempt_failed", attempt=2, error="lost"),
        line(200, "run_started", attempt=3), line(205, "run_finished", status="failed", error="lost")])[RUN]
    faults = [Fault(T0 + 15, "target-kill", "SIGKILL managed target"), Fault(T0 + 90, "target-kill", "SIGKILL again"),
              Fault(T0 + 204, "target-kill", "SIGKILL managed target")]
    ok, lines = explain(failed(), events, faults, run_attempts=3, zero=T0)
    assert ok, lines
    assert lines[0] == f"{RUN}: 3 of 3 attempt(s), last on soak-w1: MySQL error 2013: Lost connection"
    assert "fault target-kill at   1.5 min: SIGKILL again" in lines[2]
    assert lines[-1].endswith("expected: every failed attempt had a fault beside it, attempts exhausted")


def test_a_failed_attempt_with_no_fault_near_it_is_unexplained():
    """An attempt that failed a minute away from any fault is flagged for someone to look at."""
    events = run_events("worker1", [
        line(10, "run_started", attempt=1), line(20, "run_attempt_failed", attempt=1, error="lost"),
        line(200, "run_started", attempt=2), line(205, "run_finished", status="failed", error="lost")])[RUN]
    ok, lines = explain(failed(attempts=2), events, [Fault(T0 + 204, "target-kill", "x")], run_attempts=2, zero=T0)
    assert not ok
    assert "no fault near it" in lines[1]
    assert lines[-1] == "    => UNEXPLAINED: 1 failed attempt(s) with no fault near"


def test_a_run_failed_before_its_attempts_ran_out_is_unexplained():
    """A fault beside its only attempt, yet stored failed after 1 of 3: a retry was skipped."""
    events = run_events("worker2", [line(200, "run_started", attempt=1),
                                    line(205, "run_finished", status="failed", error="lost")])[RUN]
    ok, lines = explain(failed(attempts=1), events, [Fault(T0 + 203, "target-kill", "x")], run_attempts=3, zero=T0)
    assert not ok
    assert lines[-1] == "    => UNEXPLAINED: failed after 1 of 3 attempts"
    assert "nearest fault to its end: target-kill at   3.4 min (-2 s): x" in lines[-2]


def test_a_run_reaped_beside_a_worker_kill_is_expected():
    """A worker killed mid-run whose run the collector reaped: ended by the collector, explained."""
    events = (run_events("worker1", [line(10, "run_started", attempt=1)])[RUN]
              + run_events("collector", [line(250, "run_reaped", reason="no result 240 s after it started")])[RUN])
    ok, lines = explain(failed(attempts=1, error="no result"), events,
                        [Fault(T0 + 12, "worker-kill", "SIGKILL worker1")], run_attempts=3, zero=T0)
    assert ok, lines
    assert "    run_reaped by collector at   4.2 min: no result 240 s after it started" in lines


def test_a_restart_that_began_long_before_the_attempt_still_counts_while_it_lasts():
    """RabbitMQ down from 0:30 to 1:50: an attempt cut short at 1:40 (its worker wrote no end)
    is beside it, although the restart began more than a minute earlier."""
    events = run_events("worker1", [line(95, "run_started", attempt=1), line(300, "run_started", attempt=3),
                                    line(312, "run_finished", status="failed", error="lost")])[RUN]
    restart = Fault(T0 + 30, "broker-restart", "RabbitMQ restarted (80 s down)", until=T0 + 110)
    kill = Fault(T0 + 310, "target-kill", "SIGKILL")
    ok, lines = explain(failed(attempts=3), events, [restart, kill], run_attempts=3, zero=T0)
    assert ok, lines
    assert "no end logged; fault broker-restart at   0.5 min: RabbitMQ restarted (80 s down)" in lines[1]


def test_a_failed_attempt_beside_a_fault_that_fails_no_run_is_unexplained():
    """bench/soak seed 3: a run redelivered after a broker restart failed three times with
    'Unknown database' on the other worker. A broker restart only redelivers; it explains no error."""
    events = run_events("worker2", [line(54, "run_started", attempt=2),
                                    line(55, "run_attempt_failed", attempt=2, error="MySQL error 1049"),
                                    line(59, "run_started", attempt=3),
                                    line(60, "run_finished", status="failed", error="MySQL error 1049")])[RUN]
    restart = Fault(T0 + 38, "broker-restart", "RabbitMQ restarted (15 s down)", until=T0 + 53)
    ok, lines = explain(failed(), events, [restart], run_attempts=3, zero=T0)
    assert not ok
    assert lines[1].endswith("(MySQL error 1049); no fault near it that fails a run")
    assert lines[-1] == "    => UNEXPLAINED: 2 failed attempt(s) with no fault near"


def test_two_workers_measuring_one_run_at_once_keep_their_own_attempts():
    """After a broker restart the run is redelivered to the other worker while the first still
    measures: each worker's finish closes its own attempt; a killed worker's attempt lasts
    until the run is seen again (a restarted worker writes to the same log)."""
    events = (run_events("worker2", [line(35, "run_started", attempt=1), line(61, "run_finished", status="ok")])[RUN]
              + run_events("worker1", [line(56, "run_started", attempt=2), line(66, "run_finished", status="ok"),
                                       line(120, "run_started", attempt=3)])[RUN]
              + run_events("worker2", [line(130, "run_started", attempt=4)])[RUN])
    windows = attempt_windows(events)
    assert [(w.attempt, w.source, w.end - T0, w.outcome) for w in windows] == [
        (1, "worker2", 61, "finished"), (2, "worker1", 66, "finished"), (3, "worker1", 130, "no end logged"),
        (4, "worker2", 130, "no end logged")]


def test_the_report_part_lists_each_failed_run_and_counts_the_unexplained():
    """From DB rows, kept logs and the soak's fault log (began, kind, what, ended): one block per
    failed run and a count of those no fault explains."""
    logs = {"worker1": "\n".join([line(200, "run_started", attempt=3),
                                  line(205, "run_finished", status="failed", error="lost")]),
            "collector": '{"event": "result_stored"}'}
    rows = [(RUN, 3, "soak-w1", T0 + 200, T0 + 205, "MySQL error 2013: Lost connection"),
            ("c1.D.oltp_point_select.t2.r1", 1, "soak-w2", T0 + 400, T0 + 409, "worker error: boom")]
    unexplained, lines = explain_all(rows, logs, [(T0 + 203, "target-kill", "SIGKILL", T0 + 203)],
                                     run_attempts=3, zero=T0)
    assert unexplained == 1
    assert lines[0] == "failed runs:      2"
    assert lines[1].startswith(f"  - {RUN}: 3 of 3 attempt(s)") and lines[1].endswith("attempts exhausted")
    assert lines[2].startswith("  - c1.D.oltp_point_select.t2.r1: 1 of 3 attempt(s), last on soak-w2: "
                               "worker error: boom")
    assert lines[2].endswith("=> UNEXPLAINED: 1 failed attempt(s) with no fault near; failed after 1 of 3 attempts")
    assert lines[-1] == "failed runs the faults do not explain: 1"
