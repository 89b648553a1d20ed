"""Adding a message type to the bus contract takes one module, codec.py: register its schema, and every
consumer's ``decode`` reads it, with the same bounds and field-naming errors as the fleet's own."""

from __future__ import annotations

from typing import Annotated, Literal

import pytest
from pydantic import Field

from services.common.errors import DecodeError
from services.common.messages import codec
from services.common.messages.base import RUN_SCHEMA, _Message
from services.common.messages.runs import RunSpec

PING_SCHEMA = "benchfleet.ping/1"


class Ping(_Message):
    """A message the fleet does not have: a worker saying it is alive, with a count."""

    schema_: Literal["benchfleet.ping/1"] = Field(PING_SCHEMA, alias="schema")
    worker: Annotated[str, Field(min_length=1, max_length=128)]
    beats: Annotated[int, Field(ge=0)]

    def encode(self) -> bytes:
        return self.model_dump_json(by_alias=True).encode()


@pytest.fixture
def ping_registered():
    codec.register(PING_SCHEMA, Ping)
    yield
    codec.unregister(PING_SCHEMA)


def test_an_unknown_schema_is_refused_before_it_is_registered():
    """Without its registration the new message is an unknown schema, as any stranger's is."""
    with pytest.raises(DecodeError, match="unknown or missing schema"):
        codec.decode(Ping(worker="w1", beats=3).encode())


def test_a_registered_message_type_decodes_and_keeps_the_contracts_checks(ping_registered):
    """Once registered in codec.py the message decodes to its class, a wrong field is named, the queue's
    expected types still apply, and the other messages decode as before."""
    ping = Ping(worker="w1", beats=3)
    assert codec.decode(ping.encode()) == ping
    assert codec.decode(ping.encode(), expect=(Ping,)) == ping
    with pytest.raises(DecodeError, match="beats"):
        codec.decode(b'{"schema": "benchfleet.ping/1", "worker": "w1", "beats": -1}')
    with pytest.raises(DecodeError, match="not expected on this queue"):
        codec.decode(ping.encode(), expect=(RunSpec,))
    with pytest.raises(DecodeError, match="unknown or missing schema"):
        codec.decode(b'{"schema": "benchfleet.pong/1"}')


def test_unregistering_forgets_the_type_and_a_taken_schema_is_refused():
    """After its test the new type is gone again; a schema the fleet already reads cannot be taken over."""
    codec.register(PING_SCHEMA, Ping)
    codec.register(PING_SCHEMA, Ping)  # the same registration again changes nothing
    codec.unregister(PING_SCHEMA)
    with pytest.raises(DecodeError, match="unknown or missing schema"):
        codec.decode(Ping(worker="w1", beats=3).encode())
    with pytest.raises(ValueError, match="already RunSpec's"):
        codec.register(RUN_SCHEMA, Ping)
