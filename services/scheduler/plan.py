"""Expanding a campaign spec into its runs, in the order they should be measured."""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass

from services.common.spec.ignore_errors import DEFAULT as IGNORE_DEFAULT
from services.common.messages.base import MAX_RUN_SEED
from services.common.messages.runs import Cell, RunSpec, run_id_of
from services.common.spec.campaign import DEFAULT_PERCENTILE, CampaignSpec

#: Seconds a run costs beyond warm-up and measurement (connect, spawn load processes,
#: publish), used only for the wall-time estimate.
RUN_OVERHEAD_S = 2.0


@dataclass(frozen=True)
class PlannedRun:
    run_id: str
    seq: int
    cell: Cell
    repetition: int
    seed: int
    #: Where this target ran within its block (the cell's targets in one repetition), 0-based:
    #: recorded so an analysis can tell a position effect from a target effect.
    position: int = 0
    #: The pool that runs it, in a campaign on several pools; None: the campaign's one pool.
    pool: str | None = None

    @property
    def block(self) -> tuple[str, int, int]:
        """The block this run shares with the other targets: (workload, threads, repetition)."""
        return (self.cell.workload, self.cell.threads, self.repetition)


def new_campaign_id(spec: CampaignSpec, now: float | None = None) -> str:
    """A readable, unique campaign id: name, UTC time, and a short random suffix."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now if now is not None else time.time()))
    return f"{spec.name}-{stamp}-{secrets.token_hex(2)}"


def run_id(campaign_id: str, cell: Cell, repetition: int, pool: str | None = None) -> str:
    """Deterministic, so a redelivered run replaces its result instead of adding one (the
    formula is the message contract's, which checks it on every run spec)."""
    return run_id_of(campaign_id, cell, repetition, pool)


def run_seed(spec_seed: int, workload: str, threads: int, repetition: int) -> int:
    """The random seed of a run: the same for every target of a cell and repetition, so all
    targets answer the same query stream; different across repetitions. Always within
    1..2^31-1, a --rand-seed sysbench accepts and never its 0 ("seed from the clock")."""
    digest = hashlib.sha256(f"{spec_seed}/{workload}/{threads}/{repetition}".encode()).digest()
    # 64 bits folded onto 2^31-1 values: the bias is below 2^-32, far under any test's reach.
    return 1 + int.from_bytes(digest[:8], "big") % MAX_RUN_SEED


def block_order(n_targets: int, spec_seed: int, workload: str, threads: int, repetition: int) -> list[int]:
    """Target indexes in the order one block measures them: a seeded start rotated by the
    repetition, so over any ``n_targets`` repetitions each target runs in each position once
    (A B, B A for two) and no target is always first, the one a warming cache or a drifting
    server would favour."""
    digest = hashlib.sha256(f"order/{spec_seed}/{workload}/{threads}".encode()).digest()
    start = int.from_bytes(digest[:8], "big") % n_targets
    return [(start + repetition - 1 + i) % n_targets for i in range(n_targets)]


def expand(spec: CampaignSpec, campaign_id: str) -> list[PlannedRun]:
    """All runs of a campaign, ordered repetition by repetition (every cell of repetition 1
    before repetition 2), a cell's targets one after another in a block whose order
    :func:`block_order` rotates, so drift and position hit all targets alike. With several pools
    each pool runs every block in the same order, block by block, so the pools' blocks pair."""
    runs: list[PlannedRun] = []
    pools: tuple[str | None, ...] = tuple(spec.pools) if spec.pools else (None,)
    for rep in range(1, spec.repeat + 1):
        for workload in spec.workloads:
            for threads in spec.threads:
                order = block_order(len(spec.targets), spec.seed, workload.key, threads, rep)
                for pool in pools:
                    for position, index in enumerate(order):
                        cell = Cell(target=spec.targets[index].name, workload=workload.key, threads=threads)
                        runs.append(
                            PlannedRun(
                                run_id=run_id(campaign_id, cell, rep, pool),
                                seq=len(runs),
                                cell=cell,
                                repetition=rep,
                                seed=run_seed(spec.seed, workload.key, threads, rep),
                                position=position,
                                pool=pool,
                            )
                        )
    return runs


def run_specs(spec: CampaignSpec, campaign_id: str, now: float | None = None) -> list[RunSpec]:
    """The messages to publish for a campaign, one per planned run."""
    planned = expand(spec, campaign_id)
    at = now if now is not None else time.time()
    return [
        RunSpec(
            run_id=p.run_id,
            campaign_id=campaign_id,
            campaign_name=spec.name,
            seq=p.seq,
            total_runs=len(planned),
            cell=p.cell,
            repetition=p.repetition,
            target=spec.target(p.cell.target),
            workload=spec.workload(p.cell.workload),
            data=spec.workload(p.cell.workload).data_for(spec.data),
            driver=spec.driver,
            duration=spec.duration_for(p.cell.threads, p.cell.workload),
            warmup=spec.warmup_for(p.cell.threads, p.cell.workload),
            seed=p.seed,
            published_at=at,
            rate=spec.rate or None,
            latency_by_kind=spec.latency_by_kind or None,
            ignore_errors=None if spec.ignore_errors == IGNORE_DEFAULT else spec.ignore_errors,
            events=spec.events or None,
            percentile=None if spec.percentile == DEFAULT_PERCENTILE else spec.percentile,
            pool=p.pool,
        )
        for p in planned
    ]


def _run_seconds(spec: CampaignSpec) -> list[float]:
    """Each cell's run of one target: warm-up, window and overhead."""
    return [spec.warmup_for(t, w.key) + spec.duration_for(t, w.key) + RUN_OVERHEAD_S
            for w in spec.workloads for t in spec.threads]


def mean_run_seconds(spec: CampaignSpec) -> float:
    """How long one run of the spec takes on average: warm-up, window and overhead."""
    runs = _run_seconds(spec)
    return sum(runs) / len(runs)


def estimated_seconds(spec: CampaignSpec, workers: int = 1) -> float:
    """Wall time of the whole campaign with ``workers`` workers, preparation excluded."""
    per_repetition = sum(_run_seconds(spec))
    # A run split over load hosts occupies that many workers at once.
    # Pools run side by side, each on its own ``workers``.
    return spec.repeat * len(spec.targets) * per_repetition / max(1, workers // spec.load_hosts)
