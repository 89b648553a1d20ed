"""The run spec the scheduler publishes for a worker, its cell, and the run id both are filed under."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from services.common.messages.base import MAX_RUN_SEED, RUN_SCHEMA, _Message
from services.common.messages.parts import PartOf
from services.common.spec.campaign import DEFAULT_PERCENTILE, PoolName, MAX_EVENTS, MAX_RATE, MAX_RUNS
from services.common.spec.windows import MAX_DURATION_S, MAX_THREADS
from services.common.spec.ignore_errors import DEFAULT as IGNORE_DEFAULT
from services.common.spec.ignore_errors import IgnoreErrors
from services.common.spec.targets import Target
from services.common.spec.workloads import DataShape, WorkloadSpec


def run_id_of(campaign_id: str, cell: "Cell", repetition: int, pool: str | None = None) -> str:
    """The run id of a campaign's cell and repetition (on ``pool`` when the campaign names several):
    deterministic, so a redelivered run replaces its result instead of adding one."""
    # No name holds "@" (spec/fields.py NAME_PATTERN, the pool pattern), so the suffix parses back.
    on = f"@{pool}" if pool is not None else ""
    return f"{campaign_id}.{cell.target}.{cell.workload}.t{cell.threads}.r{repetition}{on}"


def pool_of_run_id(run_id: str) -> str | None:
    """The pool a run id names (its ``@POOL`` suffix), None for a run of a one-pool campaign."""
    return run_id.rsplit("@", 1)[1] if "@" in run_id else None



class Cell(_Message):
    """(target, workload, threads): the unit a comparison table compares."""

    #: The results DB's columns hold 64 characters (spec names are shorter still).
    target: Annotated[str, Field(min_length=1, max_length=64)]
    workload: Annotated[str, Field(min_length=1, max_length=64)]
    threads: Annotated[int, Field(gt=0, le=MAX_THREADS)]


class RunSpec(_Message):
    """One run for a worker: everything it needs, so workers share no state with the scheduler."""

    schema_: Literal["benchfleet.run/1"] = Field(RUN_SCHEMA, alias="schema")
    run_id: Annotated[str, Field(max_length=255)]
    campaign_id: Annotated[str, Field(max_length=128)]
    campaign_name: str
    seq: Annotated[int, Field(ge=0, le=MAX_RUNS)]
    total_runs: Annotated[int, Field(ge=1, le=MAX_RUNS)]
    cell: Cell
    repetition: Annotated[int, Field(ge=1, le=MAX_RUNS)]
    target: Target
    workload: WorkloadSpec
    data: DataShape
    driver: str = "native"
    #: Bounded as in the spec, so a worker refuses a message no valid spec could have made.
    duration: Annotated[float, Field(gt=0, le=MAX_DURATION_S, allow_inf_nan=False)]
    warmup: Annotated[float, Field(ge=0, le=MAX_DURATION_S, allow_inf_nan=False)]
    seed: Annotated[int, Field(ge=0, le=MAX_RUN_SEED)]
    published_at: float
    #: Open loop: transactions/s for the whole run (Poisson arrivals). None (left out of the
    #: JSON, so workers that predate it still accept the message): closed loop.
    rate: Annotated[float, Field(ge=0, le=MAX_RATE, allow_inf_nan=False)] | None = None
    #: Also time each statement, per kind; None (left out of the message) when not asked.
    latency_by_kind: bool | None = None
    #: The MySQL errors the run survives; None (left out): sysbench's default list.
    ignore_errors: IgnoreErrors | None = None
    #: One part of a run spread over several load hosts (spec ``load_hosts``); None: the whole run.
    part: PartOf | None = None
    #: Measure this many transactions, or ``duration`` if that ends first (sysbench's --events);
    #: None (left out): the duration alone.
    events: Annotated[int, Field(ge=1, le=MAX_EVENTS)] | None = None
    #: The latency percentile sysbench's reports print (--percentile); None (left out): 95.
    percentile: Annotated[int, Field(ge=1, le=100)] | None = None
    #: The pool whose queue carries the run, in a campaign on several pools (spec ``pools``);
    #: None (left out): the campaign's one pool. Part of the run id, so pools' runs never collide.
    pool: PoolName | None = None

    @model_validator(mode="after")
    def _agrees_with_its_cell(self) -> "RunSpec":
        # A worker measures ``target`` with ``workload`` and files the result under ``cell`` and
        # ``run_id``: a spec where they disagree would store one target's numbers as another's.
        if self.cell.target != self.target.name:
            raise ValueError(f"cell.target: {self.cell.target!r} is not the run's target {self.target.name!r}")
        if self.cell.workload != self.workload.key:
            raise ValueError(f"cell.workload: {self.cell.workload!r} is not the run's workload {self.workload.key!r}")
        expected = run_id_of(self.campaign_id, self.cell, self.repetition, self.pool)
        if self.run_id != expected:
            raise ValueError(f"run_id: {self.run_id!r} is not the id of its campaign, cell and repetition ({expected!r})")
        return self

    def encode(self) -> bytes:
        return self.model_dump_json(by_alias=True, exclude_none=True).encode()

    @property
    def report_percentile(self) -> int:
        """The percentile sysbench's reports print for this run (sysbench's default when left out)."""
        return DEFAULT_PERCENTILE if self.percentile is None else self.percentile

    @property
    def ignored_errors(self) -> IgnoreErrors:
        """The errors this run survives, sysbench's default list when the message names none."""
        return IGNORE_DEFAULT if self.ignore_errors is None else self.ignore_errors

