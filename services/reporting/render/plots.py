"""The report's plots, drawn by matplotlib and returned as PNG bytes (the HTML report inlines
them, so it opens without a network).

Three kinds, as database engineers read a campaign: throughput against threads per target
(log2 x, with the 95% interval over repetitions), throughput over time per run (the per-second
series after warm-up), and latency percentiles against threads.
"""

from __future__ import annotations

import io
import math
import multiprocessing as mp
import os
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Sequence

import matplotlib

matplotlib.use("Agg")  # no display: reports are rendered on servers and in CI
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter  # noqa: E402

from services.common.results import ResultRow  # noqa: E402
from services.reporting.analysis import CampaignData  # noqa: E402
from services.reporting.stats import describe  # noqa: E402

#: Runs of one (target, workload, threads) drawn in a time-series panel; a 10,000-run campaign
#: would otherwise draw thousands of overlapping lines nobody can read (the note says so).
MAX_SERIES_PER_CELL = 3
DPI = 80


@dataclass(frozen=True)
class Plot:
    """One rendered figure: a stable id (for tests and anchors), a caption and PNG bytes."""

    key: str
    title: str
    png: bytes
    note: str = ""


def _colors(targets: Sequence[str]) -> dict[str, str]:
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    return {t: cycle[i % len(cycle)] for i, t in enumerate(targets)}


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    plt.close(fig)
    return buf.getvalue()


def _threads_axis(ax, threads: Sequence[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(list(threads)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.set_xlabel("threads")
    ax.grid(True, alpha=0.3)


def _grid(n: int, cols: int = 2, w: float = 5.0, h: float = 3.2, share: bool = False):
    cols = max(1, min(cols, n))
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(w * cols, h * rows), squeeze=False, sharex=share, sharey=share)
    # Fixed margins instead of constrained layout: that layout draws every figure twice, and a
    # report of a 10,000-run campaign has dozens of panels.
    fig.subplots_adjust(left=0.8 / (w * cols), right=1 - 0.2 / (w * cols), bottom=0.55 / (h * rows),
                        top=1 - 0.35 / (h * rows), wspace=0.3, hspace=0.55)
    flat = [a for row in axes for a in row]
    for a in flat[n:]:
        a.set_visible(False)
    return fig, flat[:n]


def _ok(runs: Sequence[ResultRow]) -> list[ResultRow]:
    return [r for r in runs if r.status == "ok"]


def throughput_vs_threads(data: CampaignData) -> Plot:
    """q/s against threads, one line per target and one panel per workload, with 95% CI bars."""
    colors = _colors(data.targets)
    by_cell: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for r in _ok(data.runs):
        by_cell[(r.target, r.workload, r.threads)].append(r.qps)
    fig, axes = _grid(len(data.workloads))
    for ax, workload in zip(axes, data.workloads):
        for target in data.targets:
            xs, ys, err = [], [], []
            for t in data.threads:
                vals = by_cell.get((target, workload, t))
                if vals:
                    s = describe(vals)
                    xs.append(t)
                    ys.append(s.mean)
                    err.append(0.0 if math.isnan(s.ci_high) else s.ci_high - s.mean)
            if xs:
                ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=target, color=colors[target])
        _threads_axis(ax, data.threads)
        ax.set_ylim(bottom=0)
        ax.set_ylabel("q/s")
        ax.set_title(workload)
        ax.legend(fontsize="small")
    return Plot("throughput-vs-threads", "Throughput (q/s) vs threads, mean with 95% interval", _png(fig))


def latency_vs_threads(data: CampaignData) -> Plot:
    """p50/p95/p99 transaction latency against threads per target (log y), one panel per workload."""
    colors = _colors(data.targets)
    styles = {"p50_ms": ":", "p95_ms": "--", "p99_ms": "-"}
    by_cell: dict[tuple[str, str, int, str], list[float]] = defaultdict(list)
    for r in _ok(data.runs):
        for key in styles:
            # Without the whole result only p95/p99 are known (result columns); p50 is then missing.
            v = getattr(r.result.latency, key) if r.result is not None else getattr(r, key, None)
            if v is not None and v > 0:
                by_cell[(r.target, r.workload, r.threads, key)].append(float(v))
    fig, axes = _grid(len(data.workloads))
    for ax, workload in zip(axes, data.workloads):
        drawn = False
        for target in data.targets:
            for key, style in styles.items():
                pts = [(t, sum(v) / len(v)) for t in data.threads
                       if (v := by_cell.get((target, workload, t, key)))]
                if pts:
                    drawn = True
                    ax.plot(*zip(*pts), style, marker="o", markersize=3, color=colors[target],
                            label=f"{target} {key[:3]}")
        _threads_axis(ax, data.threads)
        if drawn:
            ax.set_yscale("log")
            ax.legend(fontsize="x-small", ncol=2)
        ax.set_ylabel("latency (ms)")
        ax.set_title(workload)
    return Plot("latency-vs-threads", "Transaction latency percentiles vs threads (p50 dotted, p95 dashed, "
                "p99 solid)", _png(fig))


def throughput_over_time(data: CampaignData, workload: str) -> Plot:
    """Per-second q/s of each run after warm-up, one panel per thread count, coloured by target."""
    colors = _colors(data.targets)
    runs = sorted((r for r in _ok(data.runs) if r.workload == workload and r.result is not None),
                  key=lambda r: (r.threads, data.targets.index(r.target) if r.target in data.targets else 0,
                                 r.repetition))
    # Shared axes: one set of tick labels per row/column (text is most of the drawing time),
    # and panels that compare at a glance.
    fig, axes = _grid(len(data.threads), cols=3, w=4.2, h=2.8, share=True)
    skipped = 0
    for ax, threads in zip(axes, data.threads):
        shown: dict[str, int] = defaultdict(int)
        for r in runs:
            if r.threads != threads:
                continue
            series = r.result.series.queries if r.result is not None else []
            if not series:
                continue
            if shown[r.target] >= MAX_SERIES_PER_CELL:
                skipped += 1
                continue
            label = r.target if shown[r.target] == 0 else None
            shown[r.target] += 1
            ax.plot(range(1, len(series) + 1), series, linewidth=0.9, color=colors.get(r.target), label=label)
        ax.set_title(f"{threads} threads", fontsize="small")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("q/s", fontsize="small")
    axes[-1].set_xlabel("second after warm-up", fontsize="small")
    handles = [plt.Line2D([], [], color=colors[t], label=t) for t in data.targets]
    axes[0].legend(handles=handles, fontsize="x-small")
    note = (f"{skipped} more runs not drawn (at most {MAX_SERIES_PER_CELL} per target and thread count)"
            if skipped else "")
    return Plot(f"over-time-{workload}", f"Throughput over time per run: {workload}", _png(fig), note)


#: Campaigns with at least this many runs draw their figures in parallel processes.
PARALLEL_FROM_RUNS = 1000
_SHARED: CampaignData | None = None  # handed to forked workers without pickling 10,000 results


def _draw(job: tuple[str, str]) -> Plot:
    kind, workload = job
    data = _SHARED
    assert data is not None
    if kind == "throughput":
        return throughput_vs_threads(data)
    if kind == "latency":
        return latency_vs_threads(data)
    return throughput_over_time(data, workload)


def all_plots(data: CampaignData, workers: int | None = None) -> list[Plot]:
    """Every plot of the report, in the order it shows them.

    Drawing is CPU-bound and each figure independent, so a large campaign's figures are drawn
    by forked processes (one per core), which see the data without copying it through pickle.
    """
    global _SHARED
    jobs = [("throughput", ""), ("latency", "")] + [("over-time", w) for w in data.workloads]
    n = workers if workers is not None else min(len(jobs), os.cpu_count() or 1)
    _SHARED = data
    try:
        if n <= 1 or len(data.runs) < PARALLEL_FROM_RUNS or "fork" not in mp.get_all_start_methods():
            return [_draw(j) for j in jobs]
        with ProcessPoolExecutor(n, mp_context=mp.get_context("fork")) as pool:
            return list(pool.map(_draw, jobs))
    finally:
        _SHARED = None
