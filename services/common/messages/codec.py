"""Decoding any message by its ``schema``, with errors that name the wrong field.

Adding a message type means adding it here: its class in ``Message`` and one ``register(SCHEMA, Class)``
line below (a class built on ``messages.base._Message``, so it is frozen, bounded and has ``encode``).
"""

from __future__ import annotations

import json
from typing import Any, Union

from pydantic import BaseModel, TypeAdapter, ValidationError

from services.common.errors import DecodeError
from services.common.messages.announcements import WorkerAnnouncement, WorkerBuilds
from services.common.messages.base import (BUILDS_SCHEMA, MAX_BODY_BYTES, MAX_JSON_DEPTH, RESULT_SCHEMA, RUN_SCHEMA,
                                           RUN_SCHEMA_V2, TARGET_SCHEMA, WORKER_SCHEMA)
from services.common.messages.checks import check_numbers as _check_numbers
from services.common.messages.checks import nested_deeper_than as _nested_deeper_than
from services.common.messages.checks import shown as _shown
from services.common.messages.events import EVENT_SCHEMA, EVENT_SCHEMA_V2, EVENT_SCHEMA_V3, RunEvent
from services.common.messages.parts import PART_SCHEMA, PartSignal
from services.common.messages.results import RunResult
from services.common.messages.runs import RunOrder, RunSpec, TargetDefinition


Message = Union[RunSpec, RunOrder, TargetDefinition, RunEvent, RunResult, WorkerBuilds, WorkerAnnouncement, PartSignal]
_BY_SCHEMA: dict[str, type[BaseModel]] = {}
_ADAPTERS: dict[str, TypeAdapter[Any]] = {}


def register(schema: str, cls: type[BaseModel]) -> None:
    """Make ``decode`` read bodies whose ``schema`` is ``schema`` as ``cls``; a schema already taken by
    another class is refused, since two readings of one schema would split the fleet."""
    if _BY_SCHEMA.get(schema, cls) is not cls:
        raise ValueError(f"schema {schema!r} is already {_BY_SCHEMA[schema].__name__}'s")
    _BY_SCHEMA[schema] = cls
    _ADAPTERS[schema] = TypeAdapter(cls)


def unregister(schema: str) -> None:
    """Forget ``schema`` (a type registered for a test, or by a plug-in that goes away)."""
    _BY_SCHEMA.pop(schema, None)
    _ADAPTERS.pop(schema, None)


register(RUN_SCHEMA, RunSpec)
register(RUN_SCHEMA_V2, RunOrder)
register(TARGET_SCHEMA, TargetDefinition)
register(EVENT_SCHEMA, RunEvent)
register(EVENT_SCHEMA_V2, RunEvent)  # "measuring" (messages/events.py)
register(EVENT_SCHEMA_V3, RunEvent)  # a part's event (messages/events.py)
register(RESULT_SCHEMA, RunResult)
register(BUILDS_SCHEMA, WorkerBuilds)
register(WORKER_SCHEMA, WorkerAnnouncement)
register(PART_SCHEMA, PartSignal)


def decode(body: bytes | str, expect: tuple[type[BaseModel], ...] | None = None) -> Any:
    """Decode a message by its ``schema``; raise DecodeError naming the wrong field, whatever
    the body holds (never RecursionError, OverflowError or a bare ValueError)."""
    raw = body.encode() if isinstance(body, str) else body
    if len(raw) > MAX_BODY_BYTES:
        raise DecodeError("", f"body of {len(raw):,} bytes is above the {MAX_BODY_BYTES:,}-byte limit")
    if _nested_deeper_than(raw, MAX_JSON_DEPTH):
        raise DecodeError("", f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise DecodeError("", f"not JSON: {e}") from e
    if not isinstance(data, dict):
        raise DecodeError("", "not a JSON object")
    _check_numbers(data, "")
    schema = data.get("schema")
    if schema not in _BY_SCHEMA:
        known = ", ".join(sorted(_BY_SCHEMA))
        raise DecodeError("schema", f"unknown or missing schema {_shown(schema)} (known: {known})")
    cls = _BY_SCHEMA[schema]
    if expect is not None and cls not in expect:
        raise DecodeError("schema", f"{schema} is not expected on this queue")
    try:
        return _ADAPTERS[schema].validate_python(data)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise DecodeError(field, err["msg"].removeprefix("Value error, ")) from e
    except (TypeError, ArithmeticError, RecursionError) as e:  # a validator tripped by a hostile value
        raise DecodeError("", f"cannot decode: {type(e).__name__}: {e}") from e
