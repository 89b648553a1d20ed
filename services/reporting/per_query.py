"""What the server did, per query: for each cell, its runs' CPU and context switches per query,
disk KB per transaction and hit ratios (mean, min and max over the repetitions), as the HTML
report's section of one small table per cell.

Pure: reads the runs' figures a CampaignData carries (figure columns or whole results). A figure no run of the cell
recorded says why (a dsn target has no server process on the worker; a cache nobody asked
anything of has no hit ratio) instead of showing 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import fmean

from services.common.results.figures import RunFigures
from services.reporting.analysis import CampaignData

#: (ServerWork field, label, measured from the server's process on the worker): the rows of a cell's table.
FIGURES: tuple[tuple[str, str, bool], ...] = (
    ("server_cpu_us_per_query", "server CPU µs per query", True),
    ("client_cpu_us_per_query", "client CPU µs per query", False),
    ("server_ctxt_switches_per_query", "server context switches per query", True),
    ("client_ctxt_switches_per_query", "client context switches per query", False),
    ("disk_read_kb_per_transaction", "disk KB read per transaction", True),
    ("disk_write_kb_per_transaction", "disk KB written per transaction", True),
    ("key_cache_hit_ratio", "key cache hit ratio", False),
    ("buffer_pool_hit_ratio", "InnoDB buffer pool hit ratio", False),
)
RATIOS = ("key_cache_hit_ratio", "buffer_pool_hit_ratio")
ABSENT_DSN = "not recorded: dsn target (no server process on the worker)"
ABSENT_NO_REQUESTS = "no requests during the measured interval"
ABSENT = "not recorded"


@dataclass(frozen=True)
class Figure:
    """One figure of one cell over its successful runs; ``runs`` is how many recorded it."""

    key: str
    label: str
    mean: float | None
    low: float | None
    high: float | None
    runs: int
    #: Why there is no value (None when there is one).
    absent: str | None = None


@dataclass(frozen=True)
class CellWork:
    """A cell's figures; ``runs`` counts its successful runs."""

    target: str
    workload: str
    threads: int
    kind: str | None
    runs: int
    figures: tuple[Figure, ...]


def _absent(key: str, process: bool, results: list[RunFigures]) -> str:
    if process and results and all(r.kind == "dsn" for r in results):
        return ABSENT_DSN
    if key in RATIOS and any(r.status_deltas for r in results):
        return ABSENT_NO_REQUESTS
    return ABSENT


def _figure(key: str, label: str, process: bool, results: list[RunFigures]) -> Figure:
    values = [v for v in (getattr(r.work, key) for r in results) if v is not None]
    if not values:
        return Figure(key, label, None, None, None, 0, _absent(key, process, results))
    return Figure(key, label, fmean(values), min(values), max(values), len(values))


def cell_work(data: CampaignData) -> list[CellWork]:
    """One CellWork per cell with a successful run, in the tables' order (workload, threads, target)."""
    by_cell: dict[tuple[str, str, int], list[RunFigures]] = {}
    for r in data.runs:
        if r.status == "ok" and r.figures is not None:
            by_cell.setdefault((r.target, r.workload, r.threads), []).append(r.figures)
    out = []
    for workload in data.workloads:
        for threads in data.threads:
            for target in data.targets:
                results = by_cell.get((target, workload, threads))
                if not results:
                    continue
                kinds = {r.kind for r in results}
                out.append(CellWork(target, workload, threads, kinds.pop() if len(kinds) == 1 else None,
                                    len(results), tuple(_figure(k, label, p, results) for k, label, p in FIGURES)))
    return out


def format_figure(key: str, v: float | None) -> str:
    """A figure as the report prints it: hit ratios to four decimals, others to three significant digits."""
    if v is None:
        return "n/a"
    if key in RATIOS:
        return f"{v:.4f}"
    if abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.2f}" if abs(v) >= 1 else f"{v:.3f}"
