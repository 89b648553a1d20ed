"""What workers announce on the results exchange: where they serve /metrics, and their builds."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from services.common.messages.base import BUILDS_SCHEMA, WORKER_SCHEMA, _Message
from services.common.messages.builds import BuildInfo


class WorkerAnnouncement(_Message):
    """Where a worker serves /metrics, sent on the results queue at every (re)connect ("up") and
    at a clean stop ("down"): the collector lists the workers that are up to Prometheus."""

    schema_: Literal["benchfleet.worker/1"] = Field(WORKER_SCHEMA, alias="schema")
    worker: Annotated[str, Field(min_length=1, max_length=128)]
    pool: Annotated[str, Field(min_length=1, max_length=64)]
    state: Literal["up", "down"]
    #: What Prometheus scrapes: ``host:port`` or ``[v6]:port``.
    address: Annotated[str, Field(min_length=3, max_length=255, pattern=r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):[0-9]{1,5}$")]
    at: float

    def encode(self) -> bytes:
        return self.model_dump_json(by_alias=True, exclude_none=True).encode()


class WorkerBuilds(_Message):
    """A worker's announcement of the builds registered on its host, for the scheduler to check
    specs against (stored by the collector, one row per host and pool, the last one wins)."""

    schema_: Literal["benchfleet.worker-builds/1"] = Field(BUILDS_SCHEMA, alias="schema")
    worker: str
    host: str
    pool: str
    builds: list[BuildInfo] = Field(default_factory=list)
    at: float

    def encode(self) -> bytes:
        return self.model_dump_json(by_alias=True, exclude_none=True).encode()

    def names(self) -> list[str]:
        return [b.name for b in self.builds]

