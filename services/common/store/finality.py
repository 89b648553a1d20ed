"""When a running run without a result is overdue (its worker vanished), and the records of
overdue and failed runs; pure, the queries are in store/runs.py."""

from __future__ import annotations

from dataclasses import dataclass

from services.common.spec.campaign import CampaignSpec
from services.common.spec.durations import parse_duration

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


def run_span(spec: dict, parsed: CampaignSpec | None, threads: int, workload: str | None) -> float:
    """Warm-up plus measured time of one run: its cell's own (windows by thread count, a workload's
    own) when the stored spec reads with this version, else the campaign's (``spec``, the JSON)."""
    if parsed is not None:
        try:
            return parsed.warmup_for(threads, workload) + parsed.duration_for(threads, workload)
        except KeyError:  # a workload the spec no longer names: the campaign's lengths
            return parsed.warmup_for(threads) + parsed.duration_for(threads)
    return parse_duration(spec.get("warmup") or 0) + parse_duration(spec["duration"])


def deadline(started_at: float, measuring_at: float | None, span_s: float, start_s: float, grace_s: float) -> float:
    """When a running run without a result is overdue. Before its measured part began
    (``measuring_at`` None), the start allowance ``start_s`` + warm-up and duration ``span_s`` +
    grace from ``started_at`` (a worker that never says "measuring", an older one, still fits);
    after, warm-up and duration + grace from that moment."""
    if measuring_at is None:
        return started_at + start_s + span_s + grace_s
    return measuring_at + span_s + grace_s
