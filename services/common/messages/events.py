"""The worker's notes about a run it took (part of the bus contract; services/common/messages/
decodes them with the other messages and keeps the schema history).

  benchfleet.run-event/1   state "running": the worker took the run, before its server start,
                           quiesce and prepare
  benchfleet.run-event/2   adds state "measuring": the run's warm-up (its measured part) began at
                           ``at``, so the collector's reaper counts warm-up + duration + grace from
                           then. "running" is still sent as /1, which every collector reads.
  benchfleet.run-event/3   adds ``part``: the part of a run split over load hosts the event is
                           about (each part is bound to its own taker, services/common/store/
                           takers.py). Sent only for parts, so a collector must read /3 before
                           its workers take split runs (docs/operations.md, upgrades).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from services.common.messages.base import Record
from services.common.messages.parts import PartIndex

EVENT_SCHEMA = "benchfleet.run-event/1"
EVENT_SCHEMA_V2 = "benchfleet.run-event/2"
EVENT_SCHEMA_V3 = "benchfleet.run-event/3"


class RunEvent(Record):
    """A worker's note that a run started, or that its measured part began, for progress, status
    and the reaper."""

    schema_: Literal["benchfleet.run-event/1", "benchfleet.run-event/2", "benchfleet.run-event/3"] = Field(
        EVENT_SCHEMA, alias="schema")
    run_id: str
    campaign_id: str
    state: Literal["running", "measuring"]
    worker: str
    attempt: int = 1
    at: float
    #: The part of a run split over load hosts (its run spec's ``part.index``); None: the whole run.
    part: PartIndex | None = None

    @model_validator(mode="before")
    @classmethod
    def _schema_of_state(cls, data: Any) -> Any:
        # Made in code without a schema: the oldest one that has the state (and the part), so an
        # older collector still reads every "running" event of a whole run.
        if isinstance(data, dict) and "schema" not in data and "schema_" not in data:
            schema = (EVENT_SCHEMA_V3 if data.get("part") is not None
                      else EVENT_SCHEMA_V2 if data.get("state") == "measuring" else EVENT_SCHEMA)
            data = {**data, "schema": schema}
        return data

    @model_validator(mode="after")
    def _part_in_schema(self) -> "RunEvent":
        if self.part is not None and self.schema_ != EVENT_SCHEMA_V3:
            raise ValueError(f"part: needs schema {EVENT_SCHEMA_V3}")
        return self

    @field_validator("state")
    @classmethod
    def _state_in_schema(cls, v: str, info: ValidationInfo) -> str:
        if v == "measuring" and info.data.get("schema_") == EVENT_SCHEMA:
            raise ValueError(f"state 'measuring' needs schema {EVENT_SCHEMA_V2}")
        return v

    def encode(self) -> bytes:
        return self.model_dump_json(by_alias=True, exclude_none=True).encode()
