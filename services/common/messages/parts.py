"""One run from many load hosts (spec ``load_hosts``): the part contracts on the wire.

A run with ``load_hosts: N`` is published as N run specs that differ only in ``part``
(``PartOf(index, count)``); each part's worker drives its share of the run's connections
(``services.worker.parts.share``), the parts meet at a barrier on the parts exchange (``PartSignal``, schema
``benchfleet.part/1``), and each part's result carries a ``PartReport`` the collector merges
(services/collector/part_merge.py). Pure: no broker, no clock.

Schema history: benchfleet.part/1: first version.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from services.common.messages.base import Record
from services.common.spec.load_hosts import MAX_LOAD_HOSTS

PART_SCHEMA = "benchfleet.part/1"

PartIndex = Annotated[int, Field(ge=0, lt=MAX_LOAD_HOSTS)]
PartCount = Annotated[int, Field(ge=2, le=MAX_LOAD_HOSTS)]



class PartOf(Record):
    """Which part of a run a run spec is: part ``index`` of ``count`` (0 coordinates the barrier)."""

    index: PartIndex
    count: PartCount

    @model_validator(mode="after")
    def _index_below_count(self) -> "PartOf":
        if self.index >= self.count:
            raise ValueError(f"index: {self.index} is not a part of {self.count} (0..{self.count - 1})")
        return self


def part_failure(index: int, worker: str, error: str) -> str:
    """The error of a run that one of its parts failed: which part, on which worker, and why."""
    return f"load_hosts part {index} ({worker}): {error}"


class PartReport(PartOf):
    """What one part was, recorded in its result and in the merged result's ``parts``."""

    #: The barrier's agreement this part measured in (the coordinator's start message): parts
    #: merge only with parts of the same group, never with a part measured at another start.
    group: Annotated[str, Field(min_length=1, max_length=64)]
    worker: Annotated[str, Field(max_length=128)]
    host: Annotated[str, Field(max_length=255)]
    threads: Annotated[int, Field(gt=0)]
    rate: Annotated[float, Field(ge=0)] | None = None
    seed: Annotated[int, Field(ge=0)]
    #: The run's planned warm-up and measured duration (the merged result is assessed on them).
    warmup: Annotated[float, Field(ge=0)]
    duration: Annotated[float, Field(gt=0)]
    #: The agreed start, on the coordinator's clock (seconds since the epoch).
    start_at: float
    #: Coordinator's clock minus this worker's clock, from the ping with the shortest round trip
    #: (0 for the coordinator itself), and that round trip; None when no pong came back.
    clock_offset_s: float = 0.0
    rtt_s: Annotated[float, Field(ge=0)] | None = None
    #: What this part measured (its result's totals), kept in the merged result's ``parts``.
    transactions: Annotated[int, Field(ge=0)] | None = None
    queries: Annotated[int, Field(ge=0)] | None = None


SignalKind = Literal["ready", "start", "ping", "pong", "alive", "done", "abort"]


class PartSignal(Record):
    """A barrier message between the workers of one run's parts, on the parts exchange with the
    run id as routing key. ``token`` names one worker's take of a part (a retry takes anew)."""

    schema_: Literal["benchfleet.part/1"] = Field(PART_SCHEMA, alias="schema")
    run_id: Annotated[str, Field(max_length=255)]
    kind: SignalKind
    index: PartIndex
    count: PartCount
    token: Annotated[str, Field(min_length=1, max_length=64)]
    worker: Annotated[str, Field(max_length=128)] = ""
    host: Annotated[str, Field(max_length=255)] = ""
    #: The sender's clock when it sent this.
    at: float
    #: start: the agreed instant (coordinator's clock) and the group's token per part index.
    start_at: float | None = None
    group: dict[int, Annotated[str, Field(max_length=64)]] | None = None
    #: ping: t0 (pinger's clock); pong: t0 echoed, t1 received and t2 sent (coordinator's
    #: clock), ``reply_to`` the pinger's token.
    t0: float | None = None
    t1: float | None = None
    t2: float | None = None
    reply_to: str | None = None
    #: abort: why this part gives up, and whether its part went back to the queue (its worker is
    #: stopping before the start: another worker takes it, the others keep waiting). Otherwise
    #: the part is given up for good and every part of the run gives up too (a part never
    #: retries alone: it could never rejoin a group that started without it).
    reason: Annotated[str, Field(max_length=1000)] | None = None
    requeued: bool = False

    @model_validator(mode="after")
    def _fields_of_kind(self) -> "PartSignal":
        need = {"start": ("start_at", "group"), "ping": ("t0",), "pong": ("t0", "t1", "t2", "reply_to"),
                "abort": ("reason",)}.get(self.kind, ())
        for name in need:
            if getattr(self, name) is None:
                raise ValueError(f"{name}: a {self.kind} signal needs it")
        return self

    def encode(self) -> bytes:
        return self.model_dump_json(by_alias=True, exclude_none=True).encode()
