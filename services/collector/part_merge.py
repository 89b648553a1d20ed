"""The parts of one run (spec ``load_hosts``) merged into the run's one result, exactly.

Counts are summed; per-second series are summed second by second; latency histograms are
merged bucket-wise (services/common/results/histogram.py) and the percentiles read from the merged
histogram, never averaged; the maximum is the largest part's. The per-connection Window: minimum
of minimums, in-flight and starved summed, oldest in flight the maximum, median weighted (merge_windows). Every part warmed up from the
same agreed instant (each on its own clock corrected by its measured offset to the
coordinator's), so second i of every part's series is second i after the one agreed
measurement start; a part whose series is shorter (its last partial second) counts 0 there.
What describes the one server (status deltas, variables, version, the quiesce) is taken once,
from part 0, never N times, and the figures only the server's own host sees (server CPU, context
switches, disk) from whichever part ran there; what describes the load hosts (client CPU,
context switches) is summed. Start and end are put on the coordinator's clock (each part's
measured offset added), so clock skew between load hosts is no phantom overrun. Pure: the collector calls it once every part of a group has arrived.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from services.common.results import stalls
from services.common.results.histogram import Histogram, summary_ms
from services.common.messages.results import Latency, RunResult, Series, Totals, Window
from services.common.messages.parts import PartReport, part_failure
from services.common.messages.server_work import server_work

_SERIES = ("transactions", "queries", "errors", "queue", "ignored_errors", "reconnects")
_TOTALS = ("transactions", "reads", "writes", "other", "errors", "ignored_errors", "reconnects")
#: Figures read on the server's host (/proc of its process, its disk): only a part whose worker
#: shares that host has them, not necessarily part 0.
_SERVER_HOST = ("server_cpu_s", "server_ctxt_switches", "disk_read_bytes", "disk_write_bytes")
#: Per-query figures stored with a result, and their digits (as services/worker/target/lifecycle.py).
_ROUNDING = {"server_cpu_us_per_query": 2, "client_cpu_us_per_query": 2, "server_ctxt_switches_per_query": 3,
             "client_ctxt_switches_per_query": 3, "disk_read_kb_per_transaction": 3,
             "disk_write_kb_per_transaction": 3, "key_cache_hit_ratio": 6, "buffer_pool_hit_ratio": 6}


class PartsMismatch(ValueError):
    """Parts that are not one run's complete group: they must never be merged."""


def complete(parts: Sequence[RunResult]) -> bool:
    """Whether ``parts`` are every part of one group of one run (each index once)."""
    reports = [p.part for p in parts]
    if not parts or any(r is None for r in reports):
        return False
    first = reports[0]
    assert first is not None
    return (len({p.run_id for p in parts}) == 1 and all(r.group == first.group and r.count == first.count
                                                         for r in reports if r is not None)
            and sorted(r.index for r in reports if r is not None) == list(range(first.count)))


def sum_series(series: Sequence[Sequence[int]]) -> list[int]:
    """Second by second, padded with 0 where a part's series ends early."""
    out = [0] * max((len(s) for s in series), default=0)
    for s in series:
        for i, v in enumerate(s):
            out[i] += v
    return out


def merge_histograms(wires: Sequence[Mapping[str, Any]]) -> Histogram:
    """The histograms of the parts (wire form) added bucket by bucket."""
    return Histogram.merged(Histogram.from_wire(w) for w in wires if w)


def merge_latency(latencies: Sequence[Latency]) -> Latency:
    """One Latency from the parts': histograms merged, percentiles read from the merge."""
    hist = merge_histograms([lat.histogram for lat in latencies])
    # A part without a histogram (an empty run) still has its max.
    hist.max_us = max([hist.max_us] + [lat.max_ms * 1000 for lat in latencies
                                       if not lat.histogram and lat.max_ms is not None])
    kinds = sorted({k for lat in latencies for k in lat.by_kind})
    by_kind = {k: summary_ms(merge_histograms([lat.by_kind[k].get("histogram", {}) for lat in latencies
                                             if k in lat.by_kind])) for k in kinds}
    return Latency(**summary_ms(hist), by_kind=by_kind)


def merge_windows(windows: Sequence[Window | None]) -> Window | None:
    """One Window from the parts': connections, starved connections and transactions in flight
    summed, the minimum the parts' least, the oldest in flight the parts' oldest. A part carries
    its median, not its connections' counts, so the run's median is the median of the parts'
    medians, each weighted by its connections: exact for one part or for parts alike, otherwise
    a value between the parts' medians. None when a part has none (no per-connection counts)."""
    if not windows or any(w is None for w in windows):
        return None
    parts = [w for w in windows if w is not None]
    by_median = sorted(parts, key=lambda w: w.completed_per_connection_median)
    half, seen, median = sum(w.connections for w in parts) / 2, 0, by_median[-1].completed_per_connection_median
    for w in by_median:
        seen += w.connections
        if seen >= half:
            median = w.completed_per_connection_median
            break
    return Window(
        connections=sum(w.connections for w in parts),
        completed_per_connection_min=min(w.completed_per_connection_min for w in parts),
        completed_per_connection_median=median,
        starved_connections=sum(w.starved_connections for w in parts),
        in_flight_at_end=sum(w.in_flight_at_end for w in parts),
        oldest_in_flight_s=max(w.oldest_in_flight_s for w in parts),
    )


def _reports(parts: Sequence[RunResult]) -> list[PartReport]:
    return sorted((p.part for p in parts if p.part is not None), key=lambda r: r.index)


def _joined_workers(reports: Sequence[PartReport]) -> str:
    return "+".join(r.worker for r in reports)[:128]


def merge_parts(parts: Sequence[RunResult]) -> RunResult:
    """The run's one result from its complete group of ok parts; PartsMismatch otherwise."""
    if not complete(parts):
        raise PartsMismatch("the parts are not one complete group of one run")
    if any(p.status != "ok" for p in parts):
        raise PartsMismatch("only ok parts are merged (a failed part fails the run: failed_run)")
    ordered = sorted(parts, key=lambda p: p.part.index if p.part else 0)
    first = ordered[0]
    reports = _reports(ordered)
    totals = Totals(**{k: sum(getattr(p.totals, k) for p in ordered) for k in _TOTALS})
    codes: dict[str, int] = {}
    for p in ordered:
        for code, n in p.errors_by_code.items():
            codes[code] = codes.get(code, 0) + n
    series = Series(**{k: sum_series([getattr(p.series, k) for p in ordered]) for k in _SERIES})
    # On the coordinator's clock: offset_s is the coordinator's clock minus the part's.
    offsets = [p.part.clock_offset_s if p.part is not None else 0.0 for p in ordered]
    started = min(p.started_at + off for p, off in zip(ordered, offsets))
    ended = max(p.ended_at + off for p, off in zip(ordered, offsets))
    client_cpu = sum(p.server.client_cpu_s or 0.0 for p in ordered)
    switches = [p.server.client_ctxt_switches for p in ordered]
    client_switches = None if any(s is None for s in switches) else sum(s for s in switches if s is not None)
    server = first.server.model_copy(update={
        name: next((getattr(p.server, name) for p in ordered if getattr(p.server, name) is not None), None)
        for name in _SERVER_HOST})
    work = server_work(queries=totals.queries, transactions=totals.transactions, status_deltas=server.status_deltas,
                       server_cpu_s=server.server_cpu_s, client_cpu_s=client_cpu,
                       server_ctxt_switches=server.server_ctxt_switches, client_ctxt_switches=client_switches,
                       disk_read_bytes=server.disk_read_bytes, disk_write_bytes=server.disk_write_bytes)
    update: dict[str, Any] = {"client_cpu_s": round(client_cpu, 3), "client_ctxt_switches": client_switches}
    for name, digits in _ROUNDING.items():
        v = getattr(work, name)
        update[name] = None if v is None else round(v, digits)
    plan = reports[0]
    rates = [r.rate for r in reports if r.rate]
    quality = stalls.assess(series.transactions, warmup_s=plan.warmup, duration_s=plan.duration,
                            wall_s=ended - started, rate=sum(rates) if rates else None,
                            completed=totals.transactions, threads=first.cell.threads)
    return first.model_copy(update={
        "worker": _joined_workers(reports), "attempt": max(p.attempt for p in ordered),
        "started_at": started, "ended_at": ended,
        "warmup_s": max(p.warmup_s for p in ordered), "measured_s": max(p.measured_s for p in ordered),
        "totals": totals, "errors_by_code": codes, "series": series,
        "latency": merge_latency([p.latency for p in ordered]),
        "window": merge_windows([p.window for p in ordered]),
        "server": server.model_copy(update=update), "quality": quality, "part": None, "parts": reports,
    })


def failed_run(part: RunResult, known: Sequence[RunResult] = ()) -> RunResult:
    """The run's result when a part of it did not finish ok: that part's status and error, no
    measurement at all (half a run is never stored), and every part known so far recorded."""
    reports = _reports([*known, part])
    by_index = {r.index: r for r in reports}
    index = part.part.index if part.part is not None else 0
    error = part_failure(index, part.worker, part.error or part.status)
    return RunResult(run_id=part.run_id, campaign_id=part.campaign_id, cell=part.cell, repetition=part.repetition,
                     status=part.status, error=error, error_code=part.error_code, worker=part.worker, host=part.host,
                     attempt=part.attempt, started_at=part.started_at, ended_at=part.ended_at,
                     quiesce=part.quiesce, versions=part.versions, parts=sorted(by_index.values(), key=lambda r: r.index))
