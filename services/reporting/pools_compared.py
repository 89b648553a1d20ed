"""The "Pools compared" table of a campaign on several pools: each compared cell's ratio on each
pool and whether it differs between them (platforms.compare_pools), as text, Markdown and data.

Pure: each pool's runs come in as their own ``CampaignData`` (``load.load`` with ``pool``);
every format renders a ``PoolsReport`` (render/pools.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from services.reporting import metrics_catalog as mc
from services.reporting.analysis import CampaignData, cell_runs
from services.reporting.options import ReportOptions
from services.reporting.platforms import PoolCell, PoolsComparison, compare_pools
from services.reporting.render.formats import md_text
from services.reporting.report import Report, analyse

#: Columns holding names from the spec: escaped in Markdown.
_NAMES = (0, 2, 3, 5)
HEADER = ("workload", "threads", "target", "pool A", "ratio A", "pool B", "ratio B", "B/A", "q", "verdict")


def pool_cells(per_pool: Mapping[str, CampaignData], m: mc.Metric) -> list[PoolCell]:
    """Every compared cell of every pool with its and its baseline's kept figures by block."""
    out = []
    for pool, data in per_pool.items():
        cells = cell_runs(data, m)
        for (target, workload, threads), runs in sorted(cells.items()):
            base = cells.get((data.baseline, workload, threads))
            if target == data.baseline or base is None:
                continue
            out.append(PoolCell(pool=pool, target=target, workload=workload, threads=threads,
                                target_figures=runs.by_block(), baseline_figures=base.by_block()))
    return out


def compared(per_pool: Mapping[str, CampaignData], m: mc.Metric, alpha: float) -> tuple[PoolsComparison, ...]:
    """The table's rows: metric ``m`` of every cell on every pair of pools, one BH family at ``alpha``."""
    return compare_pools(pool_cells(per_pool, m), alpha)


def _num(x: float, fmt: str) -> str:
    return "n/a" if math.isnan(x) else format(x, fmt)


def table_rows(rows: tuple[PoolsComparison, ...]) -> list[tuple[str, ...]]:
    return [(c.workload, str(c.threads), c.target, c.pool_a, _num(c.on_a.ratio, ".3f"), c.pool_b,
             _num(c.on_b.ratio, ".3f"), _num(c.ratio_of_ratios, ".3f"), _num(c.q, ".3g"), c.verdict) for c in rows]


def summary(rows: tuple[PoolsComparison, ...], metric: str) -> str:
    """The verdict a user acts on: which cells' ratios are platform specific, or none."""
    found = [c for c in rows if c.verdict == "platform specific"]
    if not found:
        return f"Pools compared ({metric}): no cell's ratio differs between pools"
    return (f"Pools compared ({metric}): {len(found)} of {len(rows)} cell(s) platform specific: "
            + "; ".join(f"{c.target} {c.workload} {c.threads} thr {c.pool_a} {c.on_a.ratio:.3f} vs "
                        f"{c.pool_b} {c.on_b.ratio:.3f}" for c in found))


def render_lines(rows: tuple[PoolsComparison, ...], metric: str, *, markdown: bool) -> list[str]:
    """The table under its heading and the summary verdict, as text columns or a Markdown table."""
    body = table_rows(rows)
    if markdown:
        lines = ["## Pools compared", "", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
        # Names are user text; numbers and verdicts are the report's own (md_text would escape their dots).
        lines += ["| " + " | ".join(md_text(v) if i in _NAMES else v for i, v in enumerate(r)) + " |" for r in body]
        return lines + ["", md_text(summary(rows, metric))]
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(HEADER)]
    lines = ["Pools compared", ""] + ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip()
                                      for r in [HEADER, *body]]
    return lines + ["", summary(rows, metric)]


def as_data(rows: tuple[PoolsComparison, ...]) -> list[dict[str, Any]]:
    """The rows as JSON members (NaN as null)."""
    def f(x: float) -> float | None:
        return None if math.isnan(x) or math.isinf(x) else x
    return [{"workload": c.workload, "threads": c.threads, "target": c.target, "pool_a": c.pool_a,
             "ratio_a": f(c.on_a.ratio), "pool_b": c.pool_b, "ratio_b": f(c.on_b.ratio),
             "ratio_b_over_a": f(c.ratio_of_ratios), "p": f(c.interaction.p), "q": f(c.q),
             "verdict": c.verdict, "reason": c.reason} for c in rows]


@dataclass(frozen=True)
class PoolsReport:
    """A campaign on several pools: each pool's report, in the spec's pool order, and the "Pools
    compared" rows of the chosen metric."""

    campaign_id: str
    name: str
    reports: tuple[tuple[str, Report], ...]
    rows: tuple[PoolsComparison, ...]
    metric: str

    @property
    def collapsed(self) -> int:
        return sum(len(r.collapsed) for _, r in self.reports)


def pools_report(per_pool: Mapping[str, CampaignData], opts: ReportOptions) -> PoolsReport:
    """Each pool's report analysed with ``opts`` and the pools compared on ``opts``' table metric."""
    first = next(iter(per_pool.values()))
    return PoolsReport(campaign_id=first.campaign_id, name=first.name,
                       reports=tuple((p, analyse(d, opts)) for p, d in per_pool.items()),
                       rows=compared(per_pool, opts.table_metric, opts.alpha), metric=opts.table_metric.key)
