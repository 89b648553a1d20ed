"""Latency percentiles a user asks for (``--percentiles 50,90,99.9``), read from the stored
latency histograms: per run, and per cell from the merged histogram of its successful runs
(histograms merge exactly, so a cell's p99.9 is never an average of its runs'). Pure."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from services.common.messages.results import RunResult
from services.common.results.histogram import Histogram

#: Written where a histogram holds no sample (no transaction completed): never 0.
NA = "n/a"


def parse_percentiles(text: str) -> tuple[float, ...]:
    """``"50,90,99.9"`` as percentiles; ValueError naming the wrong item (each must be in (0, 100])."""
    out: list[float] = []
    for item in text.split(","):
        item = item.strip()
        try:
            p = float(item)
        except ValueError:
            raise ValueError(f"--percentiles: {item!r} is not a number (e.g. 50,90,99.9)") from None
        if not math.isfinite(p) or not 0 < p <= 100:
            raise ValueError(f"--percentiles: {item} is not a percentile (more than 0, at most 100)")
        if p not in out:
            out.append(p)
    return tuple(out)


def label(p: float) -> str:
    """A percentile's column name: p50, p99.9 (100 is the maximum, p100)."""
    return f"p{p:g}"


def histogram_of(result: RunResult) -> Histogram:
    """The run's merged transaction latency histogram (empty when it stored none)."""
    wire = result.latency.histogram
    return Histogram.from_wire(wire) if wire else Histogram()


def values_ms(hist: Histogram, percentiles: Sequence[float]) -> tuple[float | None, ...]:
    """Each percentile of ``hist`` in milliseconds (the same reading as the stored p95/p99); None
    for every one when the histogram holds no sample."""
    if hist.total == 0:
        return tuple(None for _ in percentiles)
    return tuple(hist.percentile(p) / 1000 for p in percentiles)


@dataclass(frozen=True)
class CellPercentiles:
    """One cell's percentiles over the merged histogram of its successful runs."""

    target: str
    workload: str
    threads: int
    runs: int
    transactions: int
    values_ms: tuple[float | None, ...]


def cell_percentiles(results: Sequence[RunResult], percentiles: Sequence[float]) -> list[CellPercentiles]:
    """Per cell (workload, threads, target order), the percentiles of the merged histogram of its
    successful runs; a cell whose runs all failed has n/a."""
    cells: dict[tuple[str, int, str], list[RunResult]] = {}
    for r in results:
        cells.setdefault((r.cell.workload, r.cell.threads, r.cell.target), []).append(r)
    out = []
    for (workload, threads, target), rs in sorted(cells.items()):
        ok = [r for r in rs if r.status == "ok"]
        hist = Histogram.merged(histogram_of(r) for r in ok)
        out.append(CellPercentiles(target, workload, threads, len(ok), hist.total, values_ms(hist, percentiles)))
    return out


def _fmt(v: float | None) -> str:
    return NA if v is None else f"{v:.3f}"


def render_text(cells: Sequence[CellPercentiles], percentiles: Sequence[float]) -> list[str]:
    """An aligned table of the cells' percentiles in ms, with the line saying how they were read."""
    head = ["workload", "threads", "target", "runs", "transactions"] + [f"{label(p)} ms" for p in percentiles]
    body = [[c.workload, str(c.threads), c.target, str(c.runs), str(c.transactions)] + [_fmt(v) for v in c.values_ms]
            for c in cells]
    widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
    lines = ["Latency percentiles (ms) of each cell's merged histogram over its successful runs "
             f"(within 0.5%; {NA}: no transaction completed)", ""]
    for row in [head, *body]:
        lines.append("  ".join(v.ljust(w) if i < 3 else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths))).rstrip())
    return lines


def render_csv(cells: Sequence[CellPercentiles], percentiles: Sequence[float]) -> list[str]:
    """The cells' percentiles as CSV lines (empty field for n/a)."""
    lines = [",".join(["workload", "threads", "target", "runs", "transactions"] + [f"{label(p)}_ms" for p in percentiles])]
    for c in cells:
        lines.append(",".join([c.workload, str(c.threads), c.target, str(c.runs), str(c.transactions)]
                              + ["" if v is None else repr(v) for v in c.values_ms]))
    return lines


def as_data(cells: Sequence[CellPercentiles], percentiles: Sequence[float]) -> list[dict[str, object]]:
    """The cells' percentiles as JSON data (null for n/a)."""
    return [{"target": c.target, "workload": c.workload, "threads": c.threads, "runs": c.runs,
             "transactions": c.transactions,
             "percentiles_ms": {label(p): v for p, v in zip(percentiles, c.values_ms)}} for c in cells]
