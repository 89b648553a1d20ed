"""The run spec the scheduler publishes for a worker, its cell, and the run id both are filed under.

Schema history:
  benchfleet.run/1     RunSpec: every field of the run, its whole target included.
  benchfleet.run/2     RunOrder: the same fields, with ``target_digest`` instead of ``target``; the
                       target goes out once per campaign as a TargetDefinition (benchfleet.target/1)
                       on the control log, which only the scheduler may write definitions to. A
                       worker reads both run schemas.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Literal

from pydantic import Field, model_validator

from services.common.messages.base import MAX_RUN_SEED, RUN_SCHEMA, RUN_SCHEMA_V2, TARGET_SCHEMA, _Message
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


def target_digest(target: Target) -> str:
    """The SHA-256 of a target's JSON, defaults left out (so a field added later with its default
    does not change the digest of a target that does not set it)."""
    return hashlib.sha256(target.model_dump_json(by_alias=True, exclude_defaults=True).encode()).hexdigest()


Digest = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class TargetDefinition(_Message):
    """A campaign's target, sent once on the control log and named by its digest in the run orders."""

    schema_: Literal["benchfleet.target/1"] = Field(TARGET_SCHEMA, alias="schema")
    digest: Digest
    target: Target

    @model_validator(mode="after")
    def _digest_is_the_target_s(self) -> "TargetDefinition":
        if self.digest != target_digest(self.target):
            raise ValueError(f"digest: {self.digest} is not the digest of target {self.target.name!r}")
        return self

    @classmethod
    def of(cls, target: Target) -> "TargetDefinition":
        return cls(digest=target_digest(target), target=target)

    def encode(self) -> bytes:
        return self.model_dump_json(by_alias=True, exclude_none=True).encode()


class _RunFields(_Message):
    """What every run message holds but its target."""

    run_id: Annotated[str, Field(max_length=255)]
    campaign_id: Annotated[str, Field(max_length=128)]
    campaign_name: str
    seq: Annotated[int, Field(ge=0, le=MAX_RUNS)]
    total_runs: Annotated[int, Field(ge=1, le=MAX_RUNS)]
    cell: Cell
    repetition: Annotated[int, Field(ge=1, le=MAX_RUNS)]
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

    def _check_cell(self, target_name: str) -> None:
        # A worker measures the target with ``workload`` and files the result under ``cell`` and
        # ``run_id``: a message where they disagree would store one target's numbers as another's.
        if self.cell.target != target_name:
            raise ValueError(f"cell.target: {self.cell.target!r} is not the run's target {target_name!r}")
        if self.cell.workload != self.workload.key:
            raise ValueError(f"cell.workload: {self.cell.workload!r} is not the run's workload {self.workload.key!r}")
        expected = run_id_of(self.campaign_id, self.cell, self.repetition, self.pool)
        if self.run_id != expected:
            raise ValueError(f"run_id: {self.run_id!r} is not the id of its campaign, cell and repetition ({expected!r})")

    def _fields(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in _RunFields.model_fields}

    def encode(self) -> bytes:
        return self.model_dump_json(by_alias=True, exclude_none=True).encode()


class RunOrder(_RunFields):
    """A run as the scheduler publishes it: the target named by its definition's digest."""

    schema_: Literal["benchfleet.run/2"] = Field(RUN_SCHEMA_V2, alias="schema")
    target_digest: Digest
    #: The target's name, so that the cell is checked before the definition is at hand.
    target_name: Annotated[str, Field(min_length=1, max_length=64)]

    @model_validator(mode="after")
    def _agrees_with_its_cell(self) -> "RunOrder":
        self._check_cell(self.target_name)
        return self

    def with_target(self, definition: TargetDefinition) -> "RunSpec":
        """The whole run, with the target ``definition`` holds (ValueError unless it is the one named)."""
        if definition.digest != self.target_digest:
            raise ValueError(f"target_digest: the definition given is {definition.digest}, not {self.target_digest}")
        return RunSpec(**self._fields(), target=definition.target)


class RunSpec(_RunFields):
    """One run for a worker: everything it needs, so workers share no state with the scheduler."""

    schema_: Literal["benchfleet.run/1"] = Field(RUN_SCHEMA, alias="schema")
    target: Target

    @model_validator(mode="after")
    def _agrees_with_its_cell(self) -> "RunSpec":
        self._check_cell(self.target.name)
        return self

    def order(self, digest: str | None = None) -> RunOrder:
        """This run as the scheduler publishes it (benchfleet.run/2): its target by digest (``digest``,
        the target's own, when the caller has it already)."""
        return RunOrder(**self._fields(), target_digest=digest or target_digest(self.target),
                        target_name=self.target.name)

    @property
    def report_percentile(self) -> int:
        """The percentile sysbench's reports print for this run (sysbench's default when left out)."""
        return DEFAULT_PERCENTILE if self.percentile is None else self.percentile

    @property
    def ignored_errors(self) -> IgnoreErrors:
        """The errors this run survives, sysbench's default list when the message names none."""
        return IGNORE_DEFAULT if self.ignore_errors is None else self.ignore_errors

