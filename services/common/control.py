"""Control messages: a fanout exchange every worker listens to (cancel a campaign now).

Schema history:
  benchfleet.control/1   {"schema", "action": "cancel", "campaign_id", "at"}

Each worker binds an exclusive, auto-deleted queue to the control exchange, so a control
message reaches every worker connected at that moment. A worker that connects later learns
nothing from the exchange; the results DB keeps the campaign's state for that case (pending
runs are marked cancelled there, and the collector keeps them so).
"""

from __future__ import annotations

import json
import time
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .messages import DecodeError

CONTROL_SCHEMA = "benchfleet.control/1"


class ControlMessage(BaseModel):
    """An order to every worker; today only "cancel this campaign"."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

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


def declare_control(ch: object, exchange: str) -> str:
    """Declare the control exchange and a private queue bound to it; returns the queue name."""
    ch.exchange_declare(exchange, exchange_type="fanout", durable=True)  # type: ignore[attr-defined]
    q = ch.queue_declare("", exclusive=True, auto_delete=True)  # type: ignore[attr-defined]
    name = q.method.queue
    ch.queue_bind(name, exchange)  # type: ignore[attr-defined]
    return name
