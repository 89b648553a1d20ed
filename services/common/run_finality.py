"""Final states of runs in the results DB beyond a stored result: a run failed with a reason
(its run spec or result was dead-lettered, or its worker vanished), the runs overdue for a
result, and the failed runs of a campaign with their reasons.

Kept apart from store.py like campaigns.py: the collector's finaliser and the scheduler's status
use these; they go through the Store's connection and its error handling.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from services.common.durations import parse_duration
from services.common.messages import Cell
from services.common.store import FINAL_STATES, Store

#: The reason kept in runs.error (a TEXT column) is cut to this many characters.
MAX_REASON = 2000


@dataclass(frozen=True)
class OverdueRun:
    """A run marked running whose warm-up + duration + grace have passed without a result."""

    run_id: str
    campaign_id: str
    worker: str | None
    started_at: float
    #: Seconds the run may take before it is overdue: warm-up + duration + grace.
    allowed_s: float
    #: Its workload, whose cell statistics change when it is failed (None: not known).
    workload: str | None = None


@dataclass(frozen=True)
class FailedRun:
    run_id: str
    error: str | None


def fail_run(store: Store, run_id: str, campaign_id: str, reason: str, now: float, cell: Cell | None = None) -> bool:
    """Mark a run of ``campaign_id`` failed with ``reason`` unless it already has its final state
    (a stored result keeps its own word); with ``cell``, only when the run is of that cell, so a
    forged message cannot fail another run. Finishes the campaign when that was its last run.
    Whether the run was changed."""
    sql = ("UPDATE runs SET state='failed', error=%s, ended_at=COALESCE(ended_at, %s), updated_at=%s"
           " WHERE run_id=%s AND campaign_id=%s AND state NOT IN (" + ",".join(["%s"] * len(FINAL_STATES)) + ")")
    params: list[object] = [reason[:MAX_REASON], now, now, run_id, campaign_id, *FINAL_STATES]
    if cell is not None:
        sql += " AND target=%s AND workload=%s AND threads=%s"
        params += [cell.target, cell.workload, cell.threads]
    changed = bool(store._execute(sql, params).rowcount)
    # Even when nothing changed: a statement retried after a lost connection reports 0 rows
    # although its first try failed the run, and the campaign must still be finished.
    store._finish_campaign_if_done(campaign_id)
    return changed


def overdue_runs(store: Store, now: float, grace_s: float) -> list[OverdueRun]:
    """Runs still marked running ``grace_s`` seconds after their warm-up and duration ended."""
    rows = store._rows(
        "SELECT r.run_id, r.campaign_id, r.worker, r.started_at, c.spec_json, r.workload FROM runs r"
        " JOIN campaigns c ON c.campaign_id = r.campaign_id WHERE r.state='running' AND r.started_at IS NOT NULL")
    span: dict[str, float] = {}
    out = []
    for run_id, campaign_id, worker, started_at, spec_json, workload in rows:
        if campaign_id not in span:
            spec = json.loads(spec_json)  # recorded by the scheduler from a validated spec
            span[campaign_id] = parse_duration(spec.get("warmup") or 0) + parse_duration(spec["duration"])
        allowed = span[campaign_id] + grace_s
        if float(started_at) + allowed < now:
            out.append(OverdueRun(run_id, campaign_id, worker, float(started_at), allowed, workload))
    return out


def failed_runs(store: Store, campaign_id: str) -> list[FailedRun]:
    """The failed runs of a campaign with their reasons, in plan order."""
    return [FailedRun(r[0], r[1]) for r in store._rows(
        "SELECT run_id, error FROM runs WHERE campaign_id=%s AND state='failed' ORDER BY seq", (campaign_id,))]


class RunStore(Store):
    """The results store with the finaliser's writes as methods (the collector opens this one)."""

    def fail_run(self, run_id: str, campaign_id: str, reason: str, cell: Cell | None = None) -> bool:
        return fail_run(self, run_id, campaign_id, reason, time.time(), cell)

    def overdue_runs(self, now: float, grace_s: float) -> list[OverdueRun]:
        return overdue_runs(self, now, grace_s)


def unstored_failures(store: Store, campaign_id: str, workload: str | None = None) -> dict[tuple[str, str, int], int]:
    """How many runs of each (target, workload, threads) cell failed without a stored result
    (their run spec or result dead-lettered, or reaped): the cell statistics count them as failed."""
    sql = ("SELECT r.target, r.workload, r.threads, COUNT(*) FROM runs r LEFT JOIN results s ON s.run_id = r.run_id"
           " WHERE r.campaign_id=%s AND r.state IN ('failed', 'cancelled') AND s.run_id IS NULL")
    params: list[object] = [campaign_id]
    if workload is not None:
        sql += " AND r.workload=%s"
        params.append(workload)
    rows = store._rows(sql + " GROUP BY r.target, r.workload, r.threads", params)
    return {(t, w, int(n)): int(c) for t, w, n, c in rows}
