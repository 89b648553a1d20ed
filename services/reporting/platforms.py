"""Whether a target's ratio to its baseline differs between worker pools (platforms).

Each pool pairs its target and baseline runs block by block, so each pool gives a sample of
per-block log ratios. Drift that moves both targets of a block alike cancels within a pool;
what is left is the pool's run-to-run noise. The interaction test is Welch's t on the two
pools' samples (their blocks ran on different hosts, so nothing pairs across pools), and the
family of all (cell, pool pair) tests is controlled with Benjamini-Hochberg, as the report's
ratio tables are. A selected test is the printed verdict "platform specific".
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Literal, Sequence

from services.reporting.fdr import select
from services.reporting.log_ratio import Figures, LogRatio, log_ratio, welch

Verdict = Literal["platform specific", "same on both", "untested"]


@dataclass(frozen=True)
class PoolCell:
    """One compared cell as measured on one pool: the target's and the baseline's figures by block."""

    pool: str
    target: str
    workload: str
    threads: int
    target_figures: Figures
    baseline_figures: Figures

    @property
    def cell(self) -> tuple[str, str, int]:
        return (self.target, self.workload, self.threads)


@dataclass(frozen=True)
class PoolsComparison:
    """One cell on two pools: each pool's ratio, the interaction test and its BH verdict."""

    target: str
    workload: str
    threads: int
    pool_a: str
    pool_b: str
    #: Each pool's own target/baseline estimate (paired over its blocks).
    on_a: LogRatio
    on_b: LogRatio
    #: log(ratio on b) - log(ratio on a), Welch over the two pools' per-block log ratios.
    interaction: LogRatio
    q: float
    verdict: Verdict
    reason: str

    @property
    def ratio_of_ratios(self) -> float:
        """How many times the ratio on pool b is the ratio on pool a."""
        return self.interaction.ratio


def block_log_ratios(target: Figures, baseline: Figures) -> list[float]:
    """log(target / baseline) of every block both sides measured with a positive figure, in block order."""
    out = []
    for block in sorted(target.keys() & baseline.keys()):
        t, b = target[block], baseline[block]
        if t is None or b is None or math.isnan(t) or math.isnan(b) or t <= 0 or b <= 0:
            continue
        out.append(math.log(t / b))
    return out


def _check(cells: Sequence[PoolCell]) -> dict[tuple[str, str, int], dict[str, PoolCell]]:
    """The cells grouped by (target, workload, threads) then pool; a cell given twice for a pool is an error."""
    grouped: dict[tuple[str, str, int], dict[str, PoolCell]] = {}
    for i, c in enumerate(cells):
        mine = grouped.setdefault(c.cell, {})
        if c.pool in mine:
            raise ValueError(f"cells[{i}].pool: {c.pool!r} already has cell {c.target}/{c.workload}/{c.threads}")
        mine[c.pool] = c
    return grouped


def compare_pools(cells: Sequence[PoolCell], alpha: float = 0.05) -> tuple[PoolsComparison, ...]:
    """Every cell on every pair of pools that measured it, judged as one BH family at ``alpha``."""
    tests: list[tuple[PoolCell, PoolCell, LogRatio]] = []
    for key, by_pool in sorted(_check(cells).items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
        for pa, pb in itertools.combinations(sorted(by_pool), 2):
            a, b = by_pool[pa], by_pool[pb]
            la = block_log_ratios(a.target_figures, a.baseline_figures)
            lb = block_log_ratios(b.target_figures, b.baseline_figures)
            tests.append((a, b, welch(lb, la)))
    sel = select([t.p if t.method == "welch" else math.nan for _, _, t in tests], alpha)
    out = []
    for (a, b, t), q, chosen in zip(tests, sel.qvalues, sel.selected):
        if t.method != "welch":
            verdict: Verdict = "untested"
            reason = t.reason if t.method == "none" else "no spread within either pool: nothing to judge against"
        elif chosen:
            verdict, reason = "platform specific", f"q = {q:.3g} <= {alpha:g}"
        else:
            verdict, reason = "same on both", f"q = {q:.3g} > {alpha:g}"
        out.append(PoolsComparison(
            target=a.target, workload=a.workload, threads=a.threads, pool_a=a.pool, pool_b=b.pool,
            on_a=log_ratio(a.target_figures, a.baseline_figures), on_b=log_ratio(b.target_figures, b.baseline_figures),
            interaction=t, q=q, verdict=verdict, reason=reason))
    return tuple(out)


def verdict_line(c: PoolsComparison) -> str:
    """One printable line: the cell, each pool's ratio, and the verdict with its q-value."""
    return (f"{c.target} {c.workload} {c.threads} thr: {c.on_a.ratio:.3f} on {c.pool_a}, "
            f"{c.on_b.ratio:.3f} on {c.pool_b} -> {c.verdict} ({c.reason})")
