"""Why each failed run of a soak failed: its attempts as the worker and collector logs tell them,
the fault nearest to each, and whether the faults account for the failure.

Pure: bench/soak hands it the failed runs from the results DB, the faults it injected and the
log lines it kept; it returns text. A failure is *explained* when every attempt that failed had
a fault close to it and the run used all its attempts (or was reaped / dead-lettered beside a
fault); anything else is marked UNEXPLAINED, for someone to look at.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Mapping, Sequence

#: Seconds before an attempt's start in which a fault still counts as its cause: a restarted
#: broker or DB, a killed target, is still coming back when the next attempt starts.
FAULT_BEFORE_S = 30.0
#: Seconds after an attempt's last sign of life in which a fault still counts (a worker killed
#: mid-run writes nothing more; the reaper or a redelivery tells of it later).
FAULT_AFTER_S = 5.0
#: Faults that can make an attempt end *failed* (its measurement lost the target). The others
#: only cut an attempt short (worker-kill, broker-restart: the run is redelivered) or touch the
#: results side (DB, collector, poison), so a failed attempt beside one of them is no excuse.
FAILING_KINDS = frozenset({"target-kill"})
#: Log events that say something about one run, kept in its timeline.
RUN_EVENTS = ("run_started", "run_attempt_failed", "run_finished", "run_crashed", "run_requeued_on_shutdown",
              "run_reaped", "run_failed_dead_lettered", "result_publish_retry", "run_already_done")


@dataclass(frozen=True)
class Fault:
    """One injected fault: when it began and ended (epoch seconds; a restart takes a while),
    which kind, and what it did."""

    at: float
    kind: str
    what: str
    until: float | None = None

    @property
    def end(self) -> float:
        return self.at if self.until is None else self.until


@dataclass(frozen=True)
class FailedRun:
    """A run stored as failed, as the results DB has it."""

    run_id: str
    attempts: int
    worker: str | None
    started_at: float | None
    ended_at: float | None
    error: str | None


@dataclass(frozen=True)
class LogEvent:
    """One log line about a run: when, where (the log's name), the event, its attempt and error."""

    at: float
    source: str
    event: str
    attempt: int | None = None
    error: str | None = None


@dataclass(frozen=True)
class AttemptWindow:
    """One attempt of a run, from its run_started to its last event before the next attempt."""

    attempt: int | None
    source: str
    start: float
    end: float
    outcome: str
    error: str | None


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def run_events(source: str, lines: Iterable[str]) -> dict[str, list[LogEvent]]:
    """The events of ``RUN_EVENTS`` in a service's JSON log lines, by run id."""
    out: dict[str, list[LogEvent]] = {}
    for line in lines:
        if not line.startswith("{"):
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if not isinstance(doc, dict) or doc.get("event") not in RUN_EVENTS or not doc.get("run_id"):
            continue
        try:
            at = _epoch(str(doc["timestamp"]))
        except (KeyError, ValueError):
            continue
        error = doc.get("error") or doc.get("reason")
        attempt = doc.get("attempt")
        out.setdefault(str(doc["run_id"]), []).append(
            LogEvent(at, source, str(doc["event"]), int(attempt) if isinstance(attempt, int) else None,
                     None if error is None else str(error)))
    return out


def attempt_windows(events: list[LogEvent]) -> list[AttemptWindow]:
    """A run's attempts from its events (any order), by start: each run_started opens one,
    closed by the last event of the same log before that log's next start (two workers may
    measure one run at once after a redelivery). An attempt with no end logged was cut short
    (its worker killed, or the run taken back): it lasts until the run's next event elsewhere."""
    by_source: dict[str, list[LogEvent]] = {}
    for e in sorted(events, key=lambda e: e.at):
        by_source.setdefault(e.source, []).append(e)
    opened: list[tuple[LogEvent, LogEvent | None]] = []
    for evs in by_source.values():
        current: list[LogEvent] = []
        for e in [*evs, None]:
            if e is None or e.event == "run_started":
                if current:
                    opened.append((current[0], current[-1] if len(current) > 1 else None))
                current = [e] if e is not None else []
            elif current:
                current.append(e)
    opened.sort(key=lambda p: p[0].at)
    windows = []
    for first, last in opened:
        if last is None:
            later = [e.at for e in events if e.at > first.at]
            windows.append(AttemptWindow(first.attempt, first.source, first.at, min(later, default=first.at),
                                         "no end logged", None))
            continue
        outcome = {"run_attempt_failed": "failed, retried", "run_finished": "finished", "run_crashed": "crashed",
                   "run_requeued_on_shutdown": "handed back on shutdown"}.get(last.event, last.event)
        windows.append(AttemptWindow(first.attempt, first.source, first.at, last.at, outcome, last.error))
    return windows


def fault_near(faults: list[Fault], start: float, end: float, kinds: frozenset[str] | None = None) -> Fault | None:
    """The fault (of ``kinds``, None: any) that could have cut an attempt running from ``start``
    to ``end`` short: one inside it or just before/after it (FAULT_BEFORE_S / FAULT_AFTER_S), the latest."""
    near = [f for f in faults if f.end >= start - FAULT_BEFORE_S and f.at <= end + FAULT_AFTER_S
            and (kinds is None or f.kind in kinds)]
    return max(near, key=lambda f: f.at) if near else None


def nearest_fault(faults: list[Fault], at: float) -> tuple[Fault, float] | None:
    """The fault closest in time to ``at`` and its offset in seconds (negative: it ended before,
    0: ``at`` fell inside it)."""
    if not faults:
        return None

    def offset(f: Fault) -> float:
        return f.end - at if f.end < at else (f.at - at if f.at > at else 0.0)

    f = min(faults, key=lambda f: abs(offset(f)))
    return f, offset(f)


def _clock(t: float, zero: float) -> str:
    return f"{(t - zero) / 60:5.1f} min"


def explain(run: FailedRun, events: list[LogEvent], faults: list[Fault], *, run_attempts: int,
            zero: float) -> tuple[bool, list[str]]:
    """Whether the faults explain ``run``'s failure, and the lines saying so: its error, each
    attempt with the fault near it, and a verdict. Times are minutes since ``zero``."""
    lines = [f"{run.run_id}: {run.attempts} of {run_attempts} attempt(s), last on {run.worker or '?'}: {run.error}"]
    windows = attempt_windows(events)
    failed_windows = [w for w in windows if w.outcome != "finished" or (w.error is not None)]
    unexplained = 0
    for w in windows:
        # An attempt that ended with an error needs a fault that fails attempts; one cut short, any.
        kinds = FAILING_KINDS if w.error is not None else None
        f = fault_near(faults, w.start, w.end, kinds)
        cause = (f"fault {f.kind} at {_clock(f.at, zero)}: {f.what}" if f else
                 "no fault near it" if kinds is None else "no fault near it that fails a run")
        which = f"attempt {w.attempt}" if w.attempt is not None else "attempt ?"
        lines.append(f"    {which} on {w.source} {_clock(w.start, zero)} .. {_clock(w.end, zero)}: {w.outcome}"
                     + (f" ({w.error})" if w.error else "") + f"; {cause}")
        if w in failed_windows and f is None:
            unexplained += 1
    for e in events:
        if e.event in ("run_reaped", "run_failed_dead_lettered"):
            lines.append(f"    {e.event} by {e.source} at {_clock(e.at, zero)}: {e.error}")
    if not windows:
        # No log of its attempts: place the run's own span against the faults.
        start = run.started_at if run.started_at is not None else run.ended_at
        end = run.ended_at if run.ended_at is not None else start
        if start is not None and end is not None and fault_near(faults, start, end) is None:
            unexplained += 1
    near = nearest_fault(faults, run.ended_at if run.ended_at is not None else (run.started_at or zero))
    if near is not None:
        f, off = near
        lines.append(f"    nearest fault to its end: {f.kind} at {_clock(f.at, zero)} ({off:+.0f} s): {f.what}")
    exhausted = run.attempts >= run_attempts
    finished_by_collector = any(e.event in ("run_reaped", "run_failed_dead_lettered") for e in events)
    explained = unexplained == 0 and (exhausted or finished_by_collector)
    if explained:
        verdict = "expected: every failed attempt had a fault beside it" + (
            ", attempts exhausted" if exhausted else ", ended by the collector")
    else:
        why = []
        if unexplained:
            why.append(f"{unexplained} failed attempt(s) with no fault near")
        if not exhausted and not finished_by_collector:
            why.append(f"failed after {run.attempts} of {run_attempts} attempts")
        verdict = "UNEXPLAINED: " + "; ".join(why)
    lines.append(f"    => {verdict}")
    return explained, lines


def explain_all(rows: Sequence[Sequence[Any]], logs: Mapping[str, str], fault_log: Sequence[Sequence[Any]], *,
                run_attempts: int, zero: float) -> tuple[int, list[str]]:
    """The report's failed-runs part: ``rows`` are (run_id, attempts, worker, started_at, ended_at,
    error) from the results DB, ``logs`` each kept log's text by service name, ``fault_log`` the
    soak's (began, kind, what[, ended]). How many the faults do not explain, and the lines."""
    events: dict[str, list[LogEvent]] = {}
    for source, text in sorted(logs.items()):
        for rid, evs in run_events(source, text.splitlines()).items():
            events.setdefault(rid, []).extend(evs)
    faults = [Fault(float(f[0]), str(f[1]), str(f[2]), float(f[3]) if len(f) > 3 else None) for f in fault_log]
    unexplained = 0
    out = [f"failed runs:      {len(rows)}"]
    for rid, attempts, worker, started, ended, error in rows:
        run = FailedRun(str(rid), int(attempts), None if worker is None else str(worker),
                        None if started is None else float(started), None if ended is None else float(ended),
                        None if error is None else str(error))
        ok, lines = explain(run, events.get(run.run_id, []), faults, run_attempts=run_attempts, zero=zero)
        unexplained += not ok
        out.append("  - " + "\n".join(lines))
    if rows:
        out.append(f"failed runs the faults do not explain: {unexplained}")
    return unexplained, out
