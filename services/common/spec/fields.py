"""The field types every spec model shares: names, strict whole and finite numbers, durations,
the frozen base model, and how a user's text is cut short in an error message."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, Strict, ValidationInfo, WithJsonSchema

from services.common.spec.durations import format_duration, parse_duration

#: Names that end up in SQL identifiers, queue names and metric labels: strict on purpose,
#: so no SQL or routing key is ever built from arbitrary text.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
IDENT_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"


#: Validation context of a spec read back (results DB, export file, a recorded spec's public
#: copy): what bounds only what a new campaign may ask of the fleet (the server options' allow-list,
#: the costs of spec/costs.py) is not checked again, so campaigns recorded before stay readable.
STORED = {"stored": True}


def is_stored(info: ValidationInfo) -> bool:
    """Whether the spec being validated is one read back (validated with the STORED context)."""
    return bool(info.context and info.context.get("stored"))


def number_as_name(v: Any) -> Any:
    # The seeds name targets "8" and "32", and `server_cpus: 0` is a CPU list; unquoted in YAML
    # those are numbers. Booleans stay booleans (and are refused).
    return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


#: What an editor's JSON Schema says of a name: the pattern, or a whole number (``name: 8``).
NAME_JSON_SCHEMA = {"anyOf": [{"type": "string", "pattern": NAME_PATTERN}, {"type": "integer", "minimum": 0}]}
Name = Annotated[str, BeforeValidator(number_as_name), Field(pattern=NAME_PATTERN), WithJsonSchema(NAME_JSON_SCHEMA)]
Identifier = Annotated[str, Field(pattern=IDENT_PATTERN)]
#: Whole numbers are whole numbers: `true`, `5.0` and `"5"` are refused, not converted.
Int = Annotated[int, Strict()]
#: A finite number (an int is accepted); `.inf`, `.nan` and booleans are refused.
Number = Annotated[float, Strict(), Field(allow_inf_nan=False)]
#: A duration as parse_duration reads it (``90s``, ``1h30m``, ``500ms``, ``2.5``; any case, spaces
#: allowed). The bounds of each field are checked by the loader, not the schema.
DURATION_PATTERN = r"^ *(?:[0-9][0-9 ]*(?:\.[0-9 ]+)? *(?:[mM][sS]|[sSmMhH]) *)+$|^ *[0-9][0-9 ]*(?:\.[0-9 ]+)? *$"
DURATION_JSON_SCHEMA = {"anyOf": [{"type": "number", "minimum": 0}, {"type": "string", "pattern": DURATION_PATTERN}],
                        "description": "seconds, or a duration like 90s, 15m, 1h30m, 500ms"}
Seconds = Annotated[
    float,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str),
    WithJsonSchema(DURATION_JSON_SCHEMA),
]


class Frozen(BaseModel):
    """A spec model: immutable once validated, and a key it does not know is an error, not ignored."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def shown(text: str, limit: int = 40) -> str:
    """``text`` cut to ``limit`` characters for an error message (a key may be a megabyte long)."""
    return text if len(text) <= limit else text[:limit] + "..."
