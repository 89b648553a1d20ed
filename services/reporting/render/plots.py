"""The report's plots, as inline SVG (the HTML report opens without a network and draws them
sharp at any zoom).

Three kinds, as database engineers read a campaign: throughput against threads per target
(log2 x, with the 95% interval over repetitions), throughput over time per run (the per-second
series after warm-up), and latency percentiles against threads.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Sequence

from services.common.results.rows import ResultRow
from services.reporting.analysis import CampaignData
from services.reporting.render.svg import PALETTE, Axis, Line, Panel, figure
from services.reporting.stats import describe

#: Runs of one (target, workload, threads) drawn in a time-series panel; a 10,000-run campaign
#: would otherwise draw thousands of overlapping lines nobody can read (the note says so).
MAX_SERIES_PER_CELL = 3


@dataclass(frozen=True)
class Plot:
    """One rendered figure: a stable id (for tests and anchors), a caption and its SVG."""

    key: str
    title: str
    svg: str
    note: str = ""


def _colors(targets: Sequence[str]) -> dict[str, str]:
    return {t: PALETTE[i % len(PALETTE)] for i, t in enumerate(targets)}


def _ok(runs: Sequence[ResultRow]) -> list[ResultRow]:
    return [r for r in runs if r.status == "ok"]


def _legend(colors: dict[str, str]) -> tuple[tuple[str, str, None], ...]:
    return tuple((t, c, None) for t, c in colors.items())


def throughput_vs_threads(data: CampaignData) -> Plot:
    """q/s against threads, one line per target and one panel per workload, with 95% CI bars."""
    colors = _colors(data.targets)
    by_cell: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for r in _ok(data.runs):
        by_cell[(r.target, r.workload, r.threads)].append(r.qps)
    panels = []
    for workload in data.workloads:
        lines = []
        for target in data.targets:
            pts, err = [], []
            for t in data.threads:
                vals = by_cell.get((target, workload, t))
                if vals:
                    s = describe(vals)
                    pts.append((float(t), s.mean))
                    err.append(0.0 if math.isnan(s.ci_high) else s.ci_high - s.mean)
            if pts:
                lines.append(Line(pts, colors[target], target, yerr=err))
        panels.append(Panel(workload, lines, Axis("log2", data.threads, "threads"), Axis("linear", (), "q/s", zero=True),
                            _legend(colors)))
    return Plot("throughput-vs-threads", "Throughput (q/s) vs threads, mean with 95% interval",
                figure(panels, title="throughput vs threads"))


def latency_vs_threads(data: CampaignData) -> Plot:
    """p50/p95/p99 transaction latency against threads per target (log y), one panel per workload."""
    colors = _colors(data.targets)
    styles = {"p50_ms": "2,2", "p95_ms": "6,3", "p99_ms": None}
    by_cell: dict[tuple[str, str, int, str], list[float]] = defaultdict(list)
    for r in _ok(data.runs):
        for key in styles:
            # p95/p99 are result columns; p50 comes with the figures (missing when read without them).
            v = (r.figures.p50_ms if r.figures is not None else None) if key == "p50_ms" else getattr(r, key)
            if v is not None and v > 0:
                by_cell[(r.target, r.workload, r.threads, key)].append(float(v))
    panels = []
    for workload in data.workloads:
        lines = []
        for target in data.targets:
            for key, dash in styles.items():
                pts = [(float(t), sum(v) / len(v)) for t in data.threads
                       if (v := by_cell.get((target, workload, t, key)))]
                if pts:
                    lines.append(Line(pts, colors[target], f"{target} {key[:3]}", dash=dash, width=1.2))
        legend = _legend(colors) + tuple((k[:3], "#555", d) for k, d in styles.items())
        panels.append(Panel(workload, lines, Axis("log2", data.threads, "threads"), Axis("log10", (), "latency (ms)"),
                            legend))
    return Plot("latency-vs-threads", "Transaction latency percentiles vs threads (p50 dotted, p95 dashed, "
                "p99 solid)", figure(panels, title="latency vs threads"))


def series_runs(data: CampaignData, workload: str) -> tuple[list[ResultRow], int]:
    """The runs of ``workload`` whose per-second series its time plot draws (at most
    MAX_SERIES_PER_CELL per target and thread count, lowest repetitions first), and how many more
    runs with a series it leaves out. Decided from the figures alone, so the loader decodes the
    whole results of these runs only."""
    order = {t: i for i, t in enumerate(data.targets)}
    panels = set(data.threads)
    runs = sorted((r for r in _ok(data.runs) if r.workload == workload and r.threads in panels
                   and r.figures is not None and r.figures.series_seconds > 0),
                  key=lambda r: (r.threads, order.get(r.target, 0), r.repetition))
    shown: dict[tuple[int, str], int] = defaultdict(int)
    drawn, skipped = [], 0
    for r in runs:
        if shown[(r.threads, r.target)] >= MAX_SERIES_PER_CELL:
            skipped += 1
            continue
        shown[(r.threads, r.target)] += 1
        drawn.append(r)
    return drawn, skipped


def throughput_over_time(data: CampaignData, workload: str) -> Plot:
    """Per-second q/s of each run after warm-up, one panel per thread count, coloured by target."""
    colors = _colors(data.targets)
    drawn, skipped = series_runs(data, workload)
    by_threads: dict[int, list[ResultRow]] = defaultdict(list)
    for r in drawn:
        by_threads[r.threads].append(r)
    panels = []
    for threads in data.threads:
        lines = []
        for r in by_threads.get(threads, ()):
            if r.result is None:
                raise ValueError(f"run {r.run_id}: its series is drawn but its whole result was not read")
            lines.append(Line([(float(i), float(q)) for i, q in enumerate(r.result.series.queries, 1)],
                              colors.get(r.target, "#000"), markers=False, width=1.0))
        panels.append(Panel(f"{threads} threads", lines, Axis("linear", (), "second after warm-up"),
                            Axis("linear", (), "q/s", zero=True), _legend(colors) if not panels else ()))
    note = (f"{skipped} more runs not drawn (at most {MAX_SERIES_PER_CELL} per target and thread count)"
            if skipped else "")
    return Plot(f"over-time-{workload}", f"Throughput over time per run: {workload}",
                figure(panels, cols=3, panel_w=360, panel_h=210, title=f"throughput over time: {workload}"), note)


#: The status monitor's per-second figures a pool plot draws, with their colours and dashes.
POOL_LINES = (("queue_length", "queue length", PALETTE[0], None), ("threads", "pool threads", PALETTE[1], None),
              ("idle_threads", "idle threads", PALETTE[2], "6,3"), ("threads_running", "Threads_running", PALETTE[3], "2,2"),
              ("stalled_groups", "stalled groups", PALETTE[4], None))


def pool_over_time(data: CampaignData, workload: str) -> Plot | None:
    """The status monitor's per-second thread-pool figures of each drawn run of ``workload`` whose
    server reported its pool's tables (warm-up at negative seconds), one panel per thread count;
    None when no such run."""
    drawn, _ = series_runs(data, workload)
    panels = []
    for threads in data.threads:
        lines = []
        for r in drawn:
            pool = r.result.server.pool if r.threads == threads and r.result is not None else None
            if pool is None or not any(s.groups is not None for s in pool.seconds):
                continue
            for key, label, color, dash in POOL_LINES:
                pts = [(float(s.second), float(v)) for s in pool.seconds if (v := getattr(s, key)) is not None]
                if pts:
                    lines.append(Line(pts, color, f"{r.target} r{r.repetition} {label}", dash=dash, markers=False,
                                      width=1.0))
        if lines:
            legend = tuple((label, color, dash) for _, label, color, dash in POOL_LINES) if not panels else ()
            panels.append(Panel(f"{threads} threads", lines, Axis("linear", (), "second from window start"),
                                Axis("linear", (), "connections / threads", zero=True), legend))
    if not panels:
        return None
    return Plot(f"pool-{workload}", f"Thread pool per second (status monitor): {workload}",
                figure(panels, cols=3, panel_w=360, panel_h=210, title=f"thread pool: {workload}"),
                "queue length, stalled groups: information_schema.THREAD_POOL_GROUPS; threads, idle: "
                "Threadpool_threads, Threadpool_idle_threads; negative seconds are the warm-up")


def all_plots(data: CampaignData) -> list[Plot]:
    """Every plot of the report, in the order it shows them."""
    pools = [p for w in data.workloads if (p := pool_over_time(data, w)) is not None]
    return ([throughput_vs_threads(data), latency_vs_threads(data)]
            + [throughput_over_time(data, w) for w in data.workloads] + pools)
