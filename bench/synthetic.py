"""Synthetic campaigns with realistic results (per-second series, latency histograms, server
status deltas), for the report benchmark and for report tests that need no real runs.

Deterministic for a given seed. Throughput scales with threads up to the core count, one
target can be told to collapse at high concurrency like the seeds' thread-per-connection.
"""

from __future__ import annotations

import random
from typing import Sequence

from services.common.results.histogram import Histogram
from services.common.messages.runs import Cell
from services.common.messages.results import Latency, RunResult, Series, ServerReport, Totals
from services.common.spec.campaign import CampaignSpec

#: Base q/s at one thread and queries per transaction, per workload (roughly this machine's).
_WORKLOAD_QPS = {"oltp_point_select": 9000.0, "oltp_read_only": 6000.0, "oltp_read_write": 3500.0,
                 "oltp_update_index": 2500.0, "select_random_points": 5000.0, "oltp_insert": 2000.0}
_QUERIES_PER_TRX = {"oltp_point_select": 1, "oltp_read_only": 16, "oltp_read_write": 20,
                    "oltp_update_index": 1, "select_random_points": 1, "oltp_insert": 1}


def synthetic_spec(name: str, targets: Sequence[str], workloads: Sequence[str], threads: Sequence[int],
                   repeat: int, duration: float = 60.0, warmup: float = 10.0) -> CampaignSpec:
    """A spec of managed targets with key cache settings, so the settings block has something to show."""
    return CampaignSpec.model_validate({
        "name": name,
        "description": "synthetic campaign (generated, not measured)",
        "targets": [{"kind": "managed", "name": t, "options": {"key_buffer_size": "400M",
                                                               "key_cache_segments": i * 8}}
                    for i, t in enumerate(targets)],
        "baseline": targets[0],
        "workloads": list(workloads),
        "data": {"tables": 1, "table_size": 400000, "engine": "MyISAM"},  # select_random_* need one table
        "threads": list(threads),
        "duration": duration,
        "warmup": warmup,
        "repeat": repeat,
    })


def _qps_model(workload: str, target_index: int, threads: int, collapse: bool) -> float:
    base = _WORKLOAD_QPS.get(workload, 4000.0) * (1.0 + 0.03 * target_index)
    scale = min(threads, 2) ** 0.9 * (1.0 if threads <= 64 else 0.9)
    if collapse and threads > 64:
        scale *= 64.0 / threads / 4
    return base * scale


def synthetic_results(spec: CampaignSpec, campaign_id: str, *, seconds: int = 30, seed: int = 1,
                      collapse_target: str | None = None, noise: float = 0.01,
                      with_status: bool = True) -> list[RunResult]:
    """One ok result per planned run of ``spec``, with series, histogram and status deltas."""
    rnd = random.Random(seed)
    out = []
    t0 = 1_700_000_000.0
    for rep in range(1, spec.repeat + 1):
        for w in spec.workloads:
            for threads in spec.threads:
                for ti, target in enumerate(spec.targets):
                    cell = Cell(target=target.name, workload=w.key, threads=threads)
                    qpt = _QUERIES_PER_TRX.get(w.name, 1)
                    mean_qps = _qps_model(w.name, ti, threads, target.name == collapse_target)
                    run_qps = mean_qps * (1 + rnd.gauss(0, noise))
                    per_second = [max(0, int(run_qps * (1 + rnd.gauss(0, 0.03)))) for _ in range(seconds)]
                    queries = sum(per_second)
                    transactions = queries // qpt
                    lat_ms = 1000.0 * threads / max(1.0, transactions / seconds)
                    hist = Histogram()
                    for _ in range(200):
                        hist.record(1000.0 * lat_ms * rnd.lognormvariate(0, 0.35))
                    started = t0 + len(out) * (seconds + 5)
                    status = {"Questions": queries, "Key_reads": int(transactions * (0.5 / (ti + 1))),
                              "Key_read_requests": transactions * 4} if with_status else {}
                    out.append(RunResult(
                        run_id=f"{campaign_id}.{target.name}.{w.key}.t{threads}.r{rep}",
                        campaign_id=campaign_id, cell=cell, repetition=rep, status="ok",
                        worker="synthetic", host="synthetic", started_at=started, ended_at=started + seconds,
                        warmup_s=float(spec.warmup), measured_s=float(seconds),
                        totals=Totals(transactions=transactions, reads=queries),
                        series=Series(transactions=[q // qpt for q in per_second], queries=per_second,
                                      errors=[0] * seconds),
                        latency=Latency(p50_ms=hist.percentile(50) / 1000, p95_ms=hist.percentile(95) / 1000,
                                        p99_ms=hist.percentile(99) / 1000, max_ms=hist.max_us / 1000,
                                        histogram=hist.to_wire()),
                        server=ServerReport(status_deltas=status, server_cpu_s=0.9 * seconds, client_cpu_s=0.6 * seconds)
                        if with_status else {},
                    ))
    return out
