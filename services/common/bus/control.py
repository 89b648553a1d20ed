"""Control messages: a fanout exchange every worker listens to (cancel a campaign now), and a
durable log of them that a worker replays when it (re)connects.

Schema history:
  benchfleet.control/1   {"schema", "action": "cancel", "campaign_id", "at"}
                         (unchanged when the control log was added; the log also holds sync
                         markers, which are not control messages: see below)

Each worker binds an exclusive, auto-deleted queue to the control exchange, so a control
message reaches every worker connected at that moment. The control log, a RabbitMQ stream
queue (``Names.control_log``, kept ``control.CONTROL_LOG_MAX_AGE``), is bound to the same exchange, so the
one publish that tells the connected workers also appends the message to the log. A worker that
connects later (or reconnects after a broker restart) replays the log from its first message
before it takes a run, so it drops the queued runs of a campaign cancelled while it was away.

Replay has to know where the log ends, and a stream has no end-of-log signal over AMQP 0.9.1
(its message count reads 0). So the worker first binds its private queue (anything published
from then on reaches it there), then appends a sync marker to the log through the
``Names.control_sync`` exchange (bound to the log only, so other workers' private queues never
see it): an empty body with the header SYNC_HEADER set to a token of its own. Everything
published to the control exchange before the marker's confirm sits before the marker in the
log, so the replay is complete when the worker reads its own marker. Markers of other workers
are skipped.

Who wrote an entry is told by the exchange it came through, which the log keeps with each
message: only the collector may publish to the control exchange (the cancels the results DB
took), while every worker may append markers through the sync exchange. So a control message
counts only when it came through the control exchange, and a marker only through the sync
exchange: a worker's broker user cannot forge a cancel for the other workers by sending one
through the sync exchange.

The log also carries the campaigns' target definitions (benchfleet.target/1), published once per
campaign through the definitions exchange, which only the scheduler may write and the log and
the workers' private queues are bound to. A run order (benchfleet.run/2) names its target by the
definition's digest, so a target crosses the broker once, not once per run; a worker learns the
definitions live on its private queue (ahead of the runs that name them: they are published and
confirmed first, and reach the worker on the same connection) and from the replay after it
connects. Only entries through the definitions exchange are definitions.

This module holds the contract and the pure pieces; declaring and replaying live with the
broker implementations (services/common/bus/rabbitmq.py, services/common/bus/stub.py).
"""

from __future__ import annotations

import json
import time
from typing import Literal, Mapping

from pydantic import Field, ValidationError

from services.common import logs
from services.common.errors import DecodeError
from services.common.messages.base import Record

CONTROL_SCHEMA = "benchfleet.control/1"

log = logs.get(__name__)

#: Header of a sync marker in the control log; its value is the token of the reader that wrote it.
SYNC_HEADER = "x-benchfleet-sync"

#: How long the control log keeps a message. A campaign's queued runs outlive their cancel by
#: far less than this; a worker that connects later than that replays nothing about it.
CONTROL_LOG_MAX_AGE = "30D"
#: Stream segments of 1 MB, so the age limit frees old messages (retention drops whole segments
#: only, and the default 500 MB segment would never fill with control messages and markers).
CONTROL_LOG_ARGS: dict[str, object] = {
    "x-queue-type": "stream", "x-max-age": CONTROL_LOG_MAX_AGE, "x-stream-max-segment-size-bytes": 1_000_000,
}
#: Seconds a submit waits for a starting collector to bind the control log to the definitions exchange.
DEFINITIONS_BIND_WAIT_S = 15.0
#: Unacked control-log messages in flight during a replay (a stream consumer needs a prefetch).
CONTROL_REPLAY_PREFETCH = 500


class ControlMessage(Record):
    """An order to every worker; today only "cancel this campaign"."""

    schema_: Literal["benchfleet.control/1"] = Field(CONTROL_SCHEMA, alias="schema")
    action: Literal["cancel"]
    campaign_id: str
    at: float = Field(default_factory=time.time)

    def encode(self) -> bytes:
        return self.model_dump_json(by_alias=True).encode()


def decode_control(body: bytes) -> ControlMessage:
    """Decode a control message; DecodeError names the wrong field."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise DecodeError("", f"not JSON: {e}") from e
    if not isinstance(data, dict) or data.get("schema") != CONTROL_SCHEMA:
        raise DecodeError("schema", f"expected {CONTROL_SCHEMA}")
    try:
        return ControlMessage.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        raise DecodeError(".".join(str(p) for p in err["loc"]), err["msg"]) from e


def read_log_entry(exchange: str, headers: Mapping[str, object], body: bytes, token: str, *,
                   control_exchange: str, sync_exchange: str,
                   definitions_exchange: str | None = None) -> tuple[str, ControlMessage | None]:
    """Classify one message read from the control log, published through ``exchange``, by the
    reader whose marker is ``token``: ("end", None) for that reader's own marker (the replay is
    complete), ("marker", None) for another reader's marker, ("control", message) for a control
    message, ("definition", None) for a target definition (its body is the caller's to decode).
    DecodeError for anything else, including a control message that did not come through
    ``control_exchange`` or a marker that did not come through ``sync_exchange``."""
    marker = headers.get(SYNC_HEADER)
    if definitions_exchange is not None and exchange == definitions_exchange:
        if marker is not None:
            raise DecodeError("exchange", f"a sync marker through {definitions_exchange}, not {sync_exchange}")
        return "definition", None
    if exchange == sync_exchange:
        if marker is None:
            raise DecodeError("exchange", f"a message through {sync_exchange} that is not a sync marker "
                                          "(only the control exchange carries control messages)")
    elif exchange != control_exchange:
        raise DecodeError("exchange", f"{exchange!r} is not the control exchange {control_exchange}")
    elif marker is not None:
        raise DecodeError("exchange", f"a sync marker through {control_exchange}, not {sync_exchange}")
    if marker is not None:
        if isinstance(marker, bytes):
            marker = marker.decode(errors="replace")
        return ("end" if marker == token else "marker"), None
    return "control", decode_control(body)


def read_control(body: bytes, source: str) -> ControlMessage | None:
    """The control message in ``body``, or None (logged) when it cannot be decoded: control
    messages are not redelivered, so there is nothing to dead-letter."""
    try:
        return decode_control(body)
    except DecodeError as e:
        log.error("control_message_undecodable", reason=str(e), source=source)
        return None
