"""The noise of a cell's figures over several campaigns, split into its parts on the log scale:
run to run (within a block), block to block, campaign to campaign, and a target's own offset in
one campaign (target by campaign). Fitted by the method of moments of a nested analysis of
variance; pure (figures in, standard deviations out).

Why four parts: a paired comparison within one campaign cancels the block and campaign parts
but not a target's own offset that campaign; a comparison of two campaigns cancels nothing, so
the campaign part, which one campaign alone cannot show, is what decides its false alarms.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Sequence

from services.reporting.plan_power import CellHistory
from services.reporting.power import Noise


@dataclass(frozen=True)
class Components:
    """Standard deviations on the log scale (0.02 is about 2% of the figure) of one cell's figures."""

    run_sd: float
    block_sd: float
    campaign_sd: float
    #: A target's own offset in one campaign, beyond the campaign's offset shared by every target.
    target_campaign_sd: float
    #: Campaigns and complete blocks (every target measured) the fit used (0: given by hand).
    campaigns: int = 0
    blocks: int = 0

    def __post_init__(self) -> None:
        for name in ("run_sd", "block_sd", "campaign_sd", "target_campaign_sd"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"{name}: {value} is not a standard deviation")

    def plan_noise(self) -> Noise:
        """The two parts ``scheduler plan``'s power estimate reads (``power.Noise``)."""
        return Noise(self.run_sd, self.block_sd, n_blocks=self.blocks)


@dataclass(frozen=True)
class MeanSquares:
    """The sums of squares of one cell's fit (or of several cells pooled) with their degrees of freedom."""

    targets: int
    #: Mean complete blocks per campaign.
    blocks_per_campaign: float
    campaigns: int
    blocks: int
    run: float
    run_df: float
    block: float
    block_df: float
    target_campaign: float
    target_campaign_df: float
    campaign: float
    campaign_df: float

    def components(self) -> Components:
        """Each part from the expected mean squares, E[run] = r, E[block] = r + k b,
        E[target x campaign] = r + n i, E[campaign] = r + k b + n i + k n c; a part whose estimate
        comes out negative by chance is 0. With unequal blocks per campaign n is their mean, so the
        campaign parts are approximate then."""
        k, n = self.targets, self.blocks_per_campaign
        run = self.run / self.run_df
        block = self.block / self.block_df
        inter = self.target_campaign / self.target_campaign_df
        camp = self.campaign / self.campaign_df
        return Components(
            run_sd=math.sqrt(run), block_sd=math.sqrt(max(0.0, (block - run) / k)),
            campaign_sd=math.sqrt(max(0.0, (camp - block - inter + run) / (k * n))),
            target_campaign_sd=math.sqrt(max(0.0, (inter - run) / n)),
            campaigns=self.campaigns, blocks=self.blocks)


@dataclass(frozen=True)
class CellNoise:
    """One cell's (workload, threads) fitted parts, its mean level and mean squares."""

    workload: str
    threads: int
    #: Mean of the log figures: exp(level) is the cell's typical figure (q/s).
    level: float
    squares: MeanSquares
    components: Components


@dataclass(frozen=True)
class NoiseModel:
    """Every cell's parts and the parts pooled over the cells (by degrees of freedom)."""

    cells: tuple[CellNoise, ...]
    pooled: Components
    targets: tuple[str, ...]

    def cell(self, workload: str, threads: int) -> CellNoise:
        for c in self.cells:
            if (c.workload, c.threads) == (workload, threads):
                return c
        raise KeyError(f"no fitted cell {workload} at {threads} threads")

    def parts(self, workload: str, threads: int) -> Components:
        """The parts to draw a cell from: its own run and block parts, with the campaign parts
        pooled over the cells. A cell alone sees one campaign offset per campaign (4 degrees of
        freedom from 5 campaigns), too few to tell a small part from none; its run and block
        parts rest on every block."""
        own = self.cell(workload, threads).components
        return Components(own.run_sd, own.block_sd, self.pooled.campaign_sd, self.pooled.target_campaign_sd,
                          own.campaigns, own.blocks)


def _logs(h: CellHistory, targets: Sequence[str]) -> tuple[dict[str, dict[int, float]], list[int]]:
    """Each target's log figures of the blocks every target measured (a missing run, None or
    NaN, drops its block; a figure that is not positive is refused, as a ratio refuses it)."""
    logs: dict[str, dict[int, float]] = {}
    for t in targets:
        out = {}
        for block, v in h.by_target.get(t, {}).items():
            if v is None or math.isnan(v):
                continue
            if v <= 0 or math.isinf(v):
                raise ValueError(f"campaign {h.campaign_id} {h.workload} t={h.threads} target {t} "
                                 f"repetition {block}: {v:g} has no log")
            out[block] = math.log(v)
        logs[t] = out
    blocks = sorted(set.intersection(*(set(f) for f in logs.values())))
    return logs, blocks


def fit_cell(campaigns: Sequence[CellHistory]) -> CellNoise:
    """The parts of one cell from its campaigns (each with the same targets and two complete
    blocks or more). At least two campaigns: one cannot tell campaign-level noise from none."""
    if not campaigns:
        raise ValueError("campaigns: none given")
    workload, threads = campaigns[0].workload, campaigns[0].threads
    if any((h.workload, h.threads) != (workload, threads) for h in campaigns):
        raise ValueError("campaigns: not all of one cell (workload, threads)")
    targets = sorted(set.intersection(*(set(h.by_target) for h in campaigns)))
    k = len(targets)
    if k < 2:
        raise ValueError(f"campaigns: {k} target(s) common to every campaign; the parts need at least 2")
    run_ss = run_df = block_ss = block_df = 0.0
    means: list[tuple[dict[str, float], float, int]] = []
    total_blocks = 0
    for h in campaigns:
        logs, blocks = _logs(h, targets)
        n = len(blocks)
        if n < 2:
            continue
        grand = math.fsum(logs[t][b] for t in targets for b in blocks) / (k * n)
        tmean = {t: math.fsum(logs[t][b] for b in blocks) / n for t in targets}
        bmean = {b: math.fsum(logs[t][b] for t in targets) / k for b in blocks}
        run_ss += math.fsum((logs[t][b] - tmean[t] - bmean[b] + grand) ** 2 for t in targets for b in blocks)
        run_df += (k - 1) * (n - 1)
        block_ss += k * math.fsum((bmean[b] - grand) ** 2 for b in blocks)
        block_df += n - 1
        means.append((tmean, grand, n))
        total_blocks += n
    c = len(means)
    if c < 2:
        raise ValueError(f"{workload} t={threads}: {c} campaign(s) with 2 complete blocks; the campaign "
                         "parts need at least 2")
    # A target's own offset per campaign, around its mean offset over the campaigns (a steady
    # difference between targets is an effect, not noise).
    offset = {t: math.fsum(tm[t] - g for tm, g, _ in means) / c for t in targets}
    inter_ss = math.fsum(n * (tm[t] - g - offset[t]) ** 2 for tm, g, n in means for t in targets)
    weight = sum(k * n for _, _, n in means)
    overall = math.fsum(k * n * g for _, g, n in means) / weight
    camp_ss = math.fsum(k * n * (g - overall) ** 2 for _, g, n in means)
    squares = MeanSquares(k, total_blocks / c, c, total_blocks, run_ss, run_df, block_ss, block_df,
                          inter_ss, float((c - 1) * (k - 1)), camp_ss, float(c - 1))
    return CellNoise(workload, threads, overall, squares, squares.components())


def pool(squares: Sequence[MeanSquares]) -> MeanSquares:
    """Several cells' sums of squares added up: one estimate of parts the cells are taken to share."""
    if not squares:
        raise ValueError("squares: none to pool")
    total = sum(s.campaign_df for s in squares)
    return MeanSquares(
        targets=min(s.targets for s in squares),
        blocks_per_campaign=math.fsum(s.blocks_per_campaign * s.campaign_df for s in squares) / total,
        campaigns=max(s.campaigns for s in squares), blocks=sum(s.blocks for s in squares),
        run=math.fsum(s.run for s in squares), run_df=math.fsum(s.run_df for s in squares),
        block=math.fsum(s.block for s in squares), block_df=math.fsum(s.block_df for s in squares),
        target_campaign=math.fsum(s.target_campaign for s in squares),
        target_campaign_df=math.fsum(s.target_campaign_df for s in squares),
        campaign=math.fsum(s.campaign for s in squares), campaign_df=total)


def fit(history: Sequence[CellHistory]) -> NoiseModel:
    """Every cell's parts from earlier campaigns' figures (one ``CellHistory`` per campaign and
    cell), and the parts pooled over the cells."""
    by_cell: dict[tuple[str, int], list[CellHistory]] = defaultdict(list)
    for h in history:
        by_cell[(h.workload, h.threads)].append(h)
    if not by_cell:
        raise ValueError("history: no campaign given")
    cells = tuple(fit_cell(by_cell[key]) for key in sorted(by_cell))
    targets = tuple(sorted(set.intersection(*(set(h.by_target) for h in history))))
    return NoiseModel(cells, pool([c.squares for c in cells]).components(), targets)
