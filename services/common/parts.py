"""One run from many load hosts (spec ``load_hosts``): the part contracts and how a run is split.

A run with ``load_hosts: N`` is published as N run specs that differ only in ``part``
(``PartOf(index, count)``); each part's worker drives its share of the run's connections
(``share_of``), the parts meet at a barrier on the parts exchange (``PartSignal``, schema
``benchfleet.part/1``), and each part's result carries a ``PartReport`` the collector merges
(services/common/part_merge.py). Pure: no broker, no clock.

Schema history: benchfleet.part/1: first version.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

PART_SCHEMA = "benchfleet.part/1"
#: The most load hosts one run may be spread over (the spec's bound).
MAX_LOAD_HOSTS = 16
#: Seeds of parts follow from the run seed by steps of this size modulo the seed range (the
#: prime 2^31-1), so the N parts' seeds are distinct and part 0 keeps the run's seed.
_SEED_STEP = 0x9E3779B1
_SEED_RANGE = 2**31 - 1

PartIndex = Annotated[int, Field(ge=0, lt=MAX_LOAD_HOSTS)]
PartCount = Annotated[int, Field(ge=2, le=MAX_LOAD_HOSTS)]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, populate_by_name=True)


class PartOf(_Frozen):
    """Which part of a run a run spec is: part ``index`` of ``count`` (0 coordinates the barrier)."""

    index: PartIndex
    count: PartCount

    @model_validator(mode="after")
    def _index_below_count(self) -> "PartOf":
        if self.index >= self.count:
            raise ValueError(f"index: {self.index} is not a part of {self.count} (0..{self.count - 1})")
        return self


class PartReport(_Frozen):
    """What one part was, recorded in its result and in the merged result's ``parts``."""

    index: PartIndex
    count: PartCount
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


class PartSignal(_Frozen):
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


def check_load_hosts(n: int, fewest_threads: int, driver: str, managed_targets: list[str],
                     fresh_workloads: list[str] = ()) -> None:  # type: ignore[assignment]
    """ValueError naming ``load_hosts`` unless a campaign can split its runs over ``n`` hosts: a
    connection per part, the native driver (it starts at a barrier), one server all parts
    reach (a managed target is started by, and lives on, one worker), and tables prepared once
    (a workload whose table is built afresh before every run would be rebuilt by every part)."""
    if n <= 1:
        return
    if fewest_threads < n:
        raise ValueError(f"load_hosts: {n} parts need at least {n} threads per run; threads has {fewest_threads}")
    if driver != "native":
        raise ValueError(f"load_hosts: {n} needs driver: native (the sysbench driver cannot start at a barrier)")
    if managed_targets:
        raise ValueError(f"load_hosts: {n} needs dsn targets (every load host must reach the same server); "
                         f"managed: {', '.join(managed_targets)}")
    if fresh_workloads:
        raise ValueError(f"load_hosts: {n} cannot split {', '.join(fresh_workloads)}: its table is built afresh "
                         "before every run, which one worker must do alone")


@dataclass(frozen=True)
class Share:
    """One part's share of a run: its connections, its open-loop rate, its seed, and where its
    connections sit among the run's (global thread ids ``first_thread`` onwards of
    ``run_threads``), so a split run reads the table as the unsplit run does (per-thread slices)."""

    threads: int
    rate: float | None
    seed: int
    first_thread: int = 0
    run_threads: int = 0

    @property
    def thread_ids(self) -> range:
        """The run's thread ids this share drives."""
        return range(self.first_thread, self.first_thread + self.threads)


def split_threads(threads: int, count: int) -> list[int]:
    """``threads`` over ``count`` parts as evenly as possible, the larger shares first."""
    if not 1 <= count <= threads:
        raise ValueError(f"load_hosts: {count} parts need at least {count} threads, the run has {threads}")
    base, extra = divmod(threads, count)
    return [base + (i < extra) for i in range(count)]


def part_seed(seed: int, index: int) -> int:
    """The seed of part ``index``: part 0 keeps the run's seed; the others are distinct and
    follow from it, so the union of the parts' query streams is reproducible. Within 1..2^31-1."""
    if index == 0:
        return seed
    return 1 + (max(seed, 1) - 1 + index * _SEED_STEP) % _SEED_RANGE


def share_of(threads: int, rate: float | None, seed: int, part: PartOf | None) -> Share:
    """The share of a run a part drives; the whole run when it is not split. The rate is split
    in proportion to the threads, as the native driver splits it over its load processes."""
    if part is None:
        return Share(threads, rate, seed, 0, threads)
    shares = split_threads(threads, part.count)
    mine = shares[part.index]
    return Share(mine, None if not rate else rate * mine / threads, part_seed(seed, part.index),
                 first_thread=sum(shares[:part.index]), run_threads=threads)
