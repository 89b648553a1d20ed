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

from services.common.spec.durations import parse_duration
from services.common.messages.runs import Cell
from services.common.store import Store
from services.common.store.campaigns import FINAL_STATES

#: The reason kept in runs.error (a TEXT column) is cut to this many characters.
MAX_REASON = 2000


#: What the reaper allows for a managed server's start and for quiesce when the stored spec does
#: not say (the spec model's defaults).
DEFAULT_START_TIMEOUT_S = 60.0
DEFAULT_QUIESCE_TIMEOUT_S = 300.0
#: Prepare allowance: a floor, plus the campaign's rows at a rate well below what prepare does on a
#: slow disk (bench/prepare), so a live worker still preparing is never taken for a gone one.
PREPARE_FLOOR_S = 120.0
PREPARE_ROWS_PER_S = 10_000.0


@dataclass(frozen=True)
class OverdueRun:
    """A run marked running whose allowance (see ``deadline``) has passed without a result."""

    run_id: str
    campaign_id: str
    worker: str | None
    started_at: float
    #: Seconds from ``started_at`` the run was allowed before it is overdue.
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


def start_allowance(spec: dict, target: str) -> float:
    """Seconds a run of ``target`` may take from the worker taking it to its warm-up: the managed
    server's start_timeout, the quiesce timeout (when quiesce is on) and a prepare allowance for
    the campaign's tables. ``spec`` is the stored spec JSON, read leniently (older campaigns)."""
    t = next((x for x in spec.get("targets") or [] if isinstance(x, dict) and x.get("name") == target), {})
    managed = t.get("kind") == "managed"
    allowance = parse_duration(t.get("start_timeout") or DEFAULT_START_TIMEOUT_S) if managed else 0.0
    quiesce = t.get("quiesce") or {}
    if quiesce.get("enabled", managed):
        allowance += parse_duration(quiesce.get("timeout") or DEFAULT_QUIESCE_TIMEOUT_S)
    data = spec.get("data") or {}
    rows = int(data.get("tables") or 1) * int(data.get("table_size") or 10_000)
    return allowance + PREPARE_FLOOR_S + rows / PREPARE_ROWS_PER_S


def deadline(started_at: float, measuring_at: float | None, span_s: float, start_s: float, grace_s: float) -> float:
    """When a running run without a result is overdue. Before its measured part began
    (``measuring_at`` None), the start allowance ``start_s`` + warm-up and duration ``span_s`` +
    grace from ``started_at`` (a worker that never says "measuring", an older one, still fits);
    after, warm-up and duration + grace from that moment."""
    if measuring_at is None:
        return started_at + start_s + span_s + grace_s
    return measuring_at + span_s + grace_s


def overdue_runs(store: Store, now: float, grace_s: float) -> list[OverdueRun]:
    """Runs still marked running past their deadline (see ``deadline``). updated_at is later than
    started_at once the worker said the warm-up began (Store.mark_running)."""
    rows = store._rows(
        "SELECT r.run_id, r.campaign_id, r.worker, r.started_at, r.updated_at, r.target, c.spec_json, r.workload"
        " FROM runs r"
        " JOIN campaigns c ON c.campaign_id = r.campaign_id WHERE r.state='running' AND r.started_at IS NOT NULL")
    specs: dict[str, dict] = {}
    out = []
    for run_id, campaign_id, worker, started_at, updated_at, target, spec_json, workload in rows:
        if campaign_id not in specs:
            specs[campaign_id] = json.loads(spec_json)  # recorded by the scheduler from a validated spec
        spec = specs[campaign_id]
        span = parse_duration(spec.get("warmup") or 0) + parse_duration(spec["duration"])
        started = float(started_at)
        measuring = float(updated_at) if updated_at is not None and float(updated_at) > started else None
        due = deadline(started, measuring, span, start_allowance(spec, str(target)), grace_s)
        if due < now:
            out.append(OverdueRun(run_id, campaign_id, worker, started, due - started, workload))
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
