"""The regression gate on simulated campaigns: pages drawn from a fitted noise model with the shape
of a real campaign, judged by the report's own analysis and gate, counted. Pure and seeded.

Two gates are simulated, as the fleet runs them: ``within`` is a campaign's targets against its
baseline (``scheduler submit --wait --fail-on-slower``, paired over shared blocks), ``across`` is
one campaign against another (``collector compare A B --fail-on-slower``, unpaired).
"""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass
from typing import Literal, Mapping

from services.common.results.rows import ResultRow
from services.reporting.analysis import CampaignData
from services.reporting.campaign_noise import BetweenCampaigns
from services.reporting.compare import compare_campaigns, regressions as compare_regressions
from services.reporting.gate import CellKey, regressions
from services.reporting.noise_model import Components, NoiseModel
from services.reporting.options import ReportOptions
from services.reporting.report import analyse

Kind = Literal["within", "across"]


@dataclass(frozen=True)
class Shape:
    """What one simulated campaign holds: its targets (the baseline first), cells and repetitions."""

    targets: tuple[str, ...]
    workloads: tuple[str, ...]
    threads: tuple[int, ...]
    repeat: int

    def __post_init__(self) -> None:
        if len(self.targets) < 2:
            raise ValueError(f"targets: {len(self.targets)} given; a gate compares at least 2")
        if self.repeat < 2:
            raise ValueError(f"repeat must be >= 2, got {self.repeat}")

    @property
    def cells(self) -> tuple[tuple[str, int], ...]:
        return tuple((w, t) for w in self.workloads for t in self.threads)

    @property
    def family_size(self) -> int:
        """The cells a within-campaign gate's page compares (every target but the baseline)."""
        return (len(self.targets) - 1) * len(self.cells)


@dataclass(frozen=True)
class Rate:
    """``hits`` of ``trials``, with a Wilson 95% interval."""

    hits: int
    trials: int

    @property
    def value(self) -> float:
        return self.hits / self.trials if self.trials else math.nan

    def interval(self, z: float = 1.96) -> tuple[float, float]:
        if not self.trials:
            return math.nan, math.nan
        n, p = self.trials, self.value
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return max(0.0, centre - half), min(1.0, centre + half)

    def describe(self) -> str:
        low, high = self.interval()
        return f"{self.value * 100:.1f}% ({self.hits}/{self.trials}; 95% {low * 100:.1f}-{high * 100:.1f}%)"


@dataclass(frozen=True)
class GateOutcome:
    """What the gate did over ``pages`` simulated pages."""

    kind: Kind
    repeat: int
    #: The true slowdown (a fraction) of the regressed cells; 0 for A/A pages.
    change: float
    #: Pages where the gate named at least one cell that did not change.
    false_alarm: Rate
    #: Regressed cells the gate named, of those drawn (None for A/A pages).
    power: Rate | None


def _cell_parts(model: NoiseModel, workload: str, threads: int, pooled: bool) -> tuple[Components, float]:
    return (model.pooled if pooled else model.parts(workload, threads)), model.cell(workload, threads).level


def draw_campaign(model: NoiseModel, shape: Shape, rng: random.Random, campaign_id: str, *,
                  slower: Mapping[CellKey, float] | None = None, pooled: bool = False) -> CampaignData:
    """One finished campaign of ``shape`` drawn from ``model`` (each cell's ``NoiseModel.parts``,
    or the pooled ones): log q/s = level + campaign + target's own + block + run, a cell of ``slower``
    (target, workload, threads) divided by 1 + its fraction (``with_slowdown``)."""
    slower = slower or {}
    rows = []
    for workload, threads in shape.cells:
        parts, level = _cell_parts(model, workload, threads, pooled)
        campaign = rng.gauss(0, parts.campaign_sd)
        own = {t: rng.gauss(0, parts.target_campaign_sd) for t in shape.targets}
        for rep in range(1, shape.repeat + 1):
            block = rng.gauss(0, parts.block_sd)
            for target in shape.targets:
                qps = math.exp(level + campaign + own[target] + block + rng.gauss(0, parts.run_sd))
                qps /= 1 + slower.get((target, workload, threads), 0.0)
                rows.append(ResultRow(
                    run_id=f"{campaign_id}-{target}-{workload}-{threads}-{rep}", campaign_id=campaign_id,
                    target=target, workload=workload, threads=threads, repetition=rep, status="ok", qps=qps,
                    tps=qps, p95_ms=1000 * threads / qps, p99_ms=1000 * threads / qps, measured_s=3.0, error=None))
    return CampaignData(campaign_id=campaign_id, name=campaign_id, state="finished", targets=shape.targets,
                        baseline=shape.targets[0], workloads=shape.workloads, threads=shape.threads,
                        runs=tuple(rows))


def gated_cells(data: CampaignData, beyond: float, opts: ReportOptions = ReportOptions()) -> set[CellKey]:
    """The cells a within-campaign gate of ``beyond`` (a fraction) fails, as ``scheduler gate`` reads them."""
    return {r.key for r in regressions(analyse(data, opts).tables, beyond)}


def gated_across(a: CampaignData, b: CampaignData, beyond: float, opts: ReportOptions = ReportOptions(),
                 between: BetweenCampaigns | None = None) -> set[CellKey]:
    """The cells ``collector compare A B --fail-on-slower`` fails (target, workload, threads), with
    the between-campaign noise ``between`` as earlier campaigns would give it."""
    return {r.key for r in compare_regressions(compare_campaigns(a, b, opts, between), beyond)}


def with_slowdown(data: CampaignData, cells: Mapping[CellKey, float]) -> CampaignData:
    """``data`` with the q/s of the runs of each (target, workload, threads) divided by 1 + its
    fraction: a known regression put into real figures. "d slower" is a log ratio of -log(1 + d),
    the size ``power.detectable_change`` speaks of (5% slower: q/s times 0.952)."""
    runs = tuple(dataclasses.replace(r, qps=r.qps / (1 + cells[k]), tps=r.tps / (1 + cells[k]))
                 if (k := (r.target, r.workload, r.threads)) in cells else r for r in data.runs)
    return dataclasses.replace(data, runs=runs)


def simulate(model: NoiseModel, shape: Shape, *, kind: Kind, pages: int, seed: int, change: float = 0.0,
             beyond: float = 0.0, pooled: bool = False, opts: ReportOptions = ReportOptions(),
             between: BetweenCampaigns | None = None) -> GateOutcome:
    """``pages`` gated pages of ``shape``. With ``change`` > 0 one cell per page (in turn) is that
    much slower: in the last target of a within page, in every target of the second campaign
    of an across page. Counts false alarms (a page naming an unchanged cell) and found cells.
    ``between``: what an across page's comparison knows of whole campaigns' shifts."""
    if pages < 1:
        raise ValueError(f"pages must be >= 1, got {pages}")
    if not (change >= 0 and math.isfinite(change)):
        raise ValueError(f"change must be >= 0, got {change}")
    rng = random.Random(seed)
    alarms = found = drawn = 0
    for i in range(pages):
        slower: dict[CellKey, float] = {}
        if change > 0:
            workload, threads = shape.cells[i % len(shape.cells)]
            hit = shape.targets[-1:] if kind == "within" else shape.targets
            slower = {(t, workload, threads): change for t in hit}
        if kind == "within":
            named = gated_cells(draw_campaign(model, shape, rng, f"sim{i}", slower=slower, pooled=pooled), beyond, opts)
        else:
            a = draw_campaign(model, shape, rng, f"sim{i}a", pooled=pooled)
            b = draw_campaign(model, shape, rng, f"sim{i}b", slower=slower, pooled=pooled)
            named = gated_across(a, b, beyond, opts, between)
        alarms += bool(named - slower.keys())
        found += len(named & slower.keys())
        drawn += len(slower)
    return GateOutcome(kind, shape.repeat, change, Rate(alarms, pages), Rate(found, drawn) if change > 0 else None)
