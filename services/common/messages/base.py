"""What every message on the bus shares: its schema names, bounds and base model (codec.py decodes them).

Schema history (the ``schema`` field of each message):
  benchfleet.run/1         a run spec the scheduler publishes for a worker, its whole target in it
                           (workers still run it; schedulers publish /2)
  benchfleet.run/2         a run order: run/1's fields with ``target_digest`` and ``target_name``
                           instead of ``target`` (messages/runs.py)
  benchfleet.target/1      a campaign's target and its SHA-256 digest, on the control log once per
                           campaign (bus/control.py)
  benchfleet.run-event/1   a worker's "started"/"progress" note about a run (messages/events.py: /2 too)
  benchfleet.result/1      what a run measured (or why it failed)
  benchfleet.worker-builds/1  a worker's builds (host, pool), sent on the results exchange at
                           connect and when its registry changes; the collector keeps the last
  benchfleet.worker/1      a worker's /metrics address ("up"), or its withdrawal ("down"), for
                           the collector's Prometheus service discovery
  benchfleet.part/1        a barrier signal between the workers of one run's parts (parts.py)
Additive, optional fields (no version change): the workloads' ``duration_by_threads`` and
``warmup_by_threads`` in runs; run ``rate``, ``latency_by_kind``,
``ignore_errors`` and ``part``; result ``part``, ``parts`` (spec ``load_hosts``), ``series.queue``,
``series.ignored_errors``, ``series.reconnects``, ``latency.by_kind``, ``quiesce``, and ``server.build``, ``server.build_version``,
``server.server_sha256``, ``server.malloc``; result ``server``: context switches
(``server_ctxt_switches``, ``client_ctxt_switches`` and per query), disk bytes (``disk_read_bytes``,
``disk_write_bytes`` and KB per transaction) and hit ratios (``key_cache_hit_ratio``,
``buffer_pool_hit_ratio``); result ``window`` (``Window``: completed transactions per connection,
minimum and median, starved connections, transactions in flight at the window's end and the
oldest one's age; the native driver only); the server's count of the measured window's
transactions (``server.count``: ``counter``, ``per_transaction``, ``server_transactions``,
``reason`` when n/a) and ``quality.server_agreement`` (the client's count against it).
Result ``quality`` (stalls and overrun, ``RunQuality``) carries its own ``version`` (history in
its docstring); results without it were stored before runs were assessed.

Bounds (no version change: no message a valid spec and an honest worker make is refused): a body
of at most MAX_BODY_BYTES, JSON nested at most MAX_JSON_DEPTH levels, every number finite and every
whole number within 64 bits, counts non-negative, and a run spec whose run id, cell, target and
workload agree with each other.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field

from services.common.spec.fields import Frozen

RUN_SCHEMA = "benchfleet.run/1"
#: A run that names its target by the digest of a definition sent once per campaign.
RUN_SCHEMA_V2 = "benchfleet.run/2"
TARGET_SCHEMA = "benchfleet.target/1"
RESULT_SCHEMA = "benchfleet.result/1"
BUILDS_SCHEMA = "benchfleet.worker-builds/1"
WORKER_SCHEMA = "benchfleet.worker/1"
#: The largest run seed: sysbench's --rand-seed is a C int, and its 0 means "seed from the clock".
MAX_RUN_SEED = 2**31 - 1
#: The largest body a consumer decodes. A 2-hour run's result, five per-second series of 7,200
#: counts and a histogram, is about 130 kB; a worker refuses to send a bigger one than this
#: (services/worker/verdict.py).
MAX_BODY_BYTES = 32 * 2**20
#: How deeply a message's JSON may nest: a result nests 5 levels, and json.loads would raise
#: RecursionError (not ValueError) on a body nested a few thousand levels deep.
MAX_JSON_DEPTH = 32
#: Whole numbers anywhere in a message fit a signed 64-bit integer (the results DB's BIGINT), so
#: storing never overflows and q/s never meets an int too big for a float.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

#: A count: non-negative, below 2^63.
Count = Annotated[int, Field(ge=0, le=INT64_MAX)]
Int64 = Annotated[int, Field(ge=INT64_MIN, le=INT64_MAX)]
#: Seconds and milliseconds measured: non-negative (finite, as every float of a message).
NonNegative = Annotated[float, Field(ge=0)]


class Record(Frozen):
    """What another process or a file reads back (messages, build records, campaign exports): a
    spec model's strictness, finite floats, and a ``schema`` alias accepted by its field name too."""

    # No NaN or infinity in any float field: JSON has no such numbers, and SQL refuses them.
    model_config = ConfigDict(allow_inf_nan=False, populate_by_name=True)


class _Message(Record):
    """A message on the bus, encoded as JSON without its unset (None) fields."""

    def encode(self) -> bytes:
        return self.model_dump_json(exclude_none=True).encode()

