"""The spec as a standard JSON Schema (Draft 2020-12) for editors: what `scheduler schema` prints.

The schema accepts what the loader reads (durations like ``4s``, bare workload names, numbers as
names and CPU lists) and offers workload names and each workload's options as enums. Rules that
span fields (the baseline is a target, names are distinct, run-length limits) stay in the loader.
"""

from __future__ import annotations

import copy
from typing import Any

from services.common.spec.campaign import SPEC_VERSION, CampaignSpec
from services.common.spec.workloads import SCRIPT_OPTION_PATTERN, SCRIPT_PATTERN
from services.workload.registry import (
    COMMON_OPTIONS,
    FLOAT_LIMITS,
    OLTP_OPTIONS,
    OPTION_LIMITS,
    OPTION_MINIMUM,
    PS_MODES,
    RAND_TYPES,
    TABLE_OPTIONS,
    WORKLOADS,
)

DRAFT = "https://json-schema.org/draft/2020-12/schema"
#: The schema's own name; a new spec_version gets a new one.
SCHEMA_ID = f"urn:benchfleet:spec:v{SPEC_VERSION}"

#: Every keyword of Draft 2020-12 (core, applicator, validation, meta-data, format, content);
#: anything else in a schema is ignored by a validator and is a mistake here.
STANDARD_KEYWORDS = frozenset("""
$schema $id $ref $defs $comment $anchor $dynamicRef $dynamicAnchor $vocabulary
allOf anyOf oneOf not if then else dependentSchemas prefixItems items contains properties
patternProperties additionalProperties propertyNames unevaluatedItems unevaluatedProperties
type enum const multipleOf maximum exclusiveMaximum minimum exclusiveMinimum maxLength minLength
pattern maxItems minItems uniqueItems maxContains minContains maxProperties minProperties required
dependentRequired title description default deprecated readOnly writeOnly examples format
contentEncoding contentMediaType contentSchema""".split())
#: Keywords whose value is data or a map of names, not a schema to look into for keywords.
_DATA_KEYWORDS = frozenset({"default", "const", "enum", "examples", "required", "dependentRequired"})
_NAME_MAPS = frozenset({"properties", "$defs", "patternProperties", "dependentSchemas"})


def _option_schema(key: str, default: object) -> dict[str, Any]:
    """What the loader accepts for one sysbench option (services/common/spec/workloads.py)."""
    if isinstance(default, bool):
        return {"type": "boolean", "default": default}
    if isinstance(default, int):
        return {"type": "integer", "minimum": OPTION_MINIMUM.get(key, 0), "maximum": OPTION_LIMITS[key],
                "default": default}
    if isinstance(default, float):
        low, high, low_in, high_in = FLOAT_LIMITS[key]
        return {"type": "number", "minimum" if low_in else "exclusiveMinimum": low,
                "maximum" if high_in else "exclusiveMaximum": high, "default": default}
    if key == "rand_type":
        return {"enum": list(RAND_TYPES), "default": default}
    if key == "db_ps_mode":
        return {"enum": list(PS_MODES), "default": default}
    return {"type": "string", "default": default}


def _script_rule() -> dict[str, Any]:
    """A script workload: sysbench's common options as for any workload, the script's own by pattern."""
    known = {**COMMON_OPTIONS, **{k: OLTP_OPTIONS[k] for k in (*TABLE_OPTIONS, "auto_inc")}}
    return {"if": {"required": ["script"]},
            "then": {"properties": {"options": {
                "type": "object",
                "properties": {k: _option_schema(k, v) for k, v in sorted(known.items())},
                "propertyNames": {"pattern": SCRIPT_OPTION_PATTERN},
                "additionalProperties": {"type": ["integer", "number", "boolean", "string"]}}}}}


def _workload_rules() -> list[dict[str, Any]]:
    """One rule per workload: its options, and no other."""
    return [{"if": {"properties": {"name": {"const": name}}, "required": ["name"], "not": {"required": ["script"]}},
             "then": {"properties": {"options": {
                 "type": "object",
                 "properties": {k: _option_schema(k, v) for k, v in sorted(w.options.items())},
                 "additionalProperties": False}}}}
            for name, w in sorted(WORKLOADS.items())]


def spec_json_schema() -> dict[str, Any]:
    """The campaign spec's JSON Schema, Draft 2020-12."""
    base = copy.deepcopy(CampaignSpec.model_json_schema(mode="validation"))
    defs = base["$defs"]
    names = sorted(WORKLOADS)
    workload = defs["WorkloadSpec"]
    workload["properties"]["name"] = {"anyOf": [
        {"enum": names, "description": "a workload (docs/workloads.md)"},
        {"type": "string", "pattern": SCRIPT_PATTERN, "description": "with script: the script's name"}]}
    workload["properties"]["script"] = {"type": "string", "pattern": SCRIPT_PATTERN,
                                        "description": "NAME of NAME.lua in the worker's BENCHFLEET_LUA_DIRS"}
    # A registered workload's name is one of the enum; a script's names the script.
    workload["anyOf"] = [{"required": ["script"]}, {"required": ["name"], "properties": {"name": {"enum": names}}}]
    workload.pop("required", None)
    workload["allOf"] = [*_workload_rules(), _script_rule()]
    # A bare name is the short form of {name: ...}.
    base["properties"]["workloads"]["items"] = {"anyOf": [{"enum": names}, {"$ref": "#/$defs/WorkloadSpec"}]}
    # kind decides the target's model, dsn when it is left out (the loader's discriminator).
    base["properties"]["targets"]["items"] = {
        "if": {"properties": {"kind": {"const": "managed"}}, "required": ["kind"]},
        "then": {"$ref": "#/$defs/ManagedTarget"},
        "else": {"$ref": "#/$defs/DsnTarget"},
    }
    return {"$schema": DRAFT, "$id": SCHEMA_ID, **base}


def nonstandard_keywords(schema: Any, path: str = "") -> list[str]:
    """The path of every keyword Draft 2020-12 does not define (empty: a standard schema)."""
    out: list[str] = []
    if isinstance(schema, list):
        for i, item in enumerate(schema):
            out += nonstandard_keywords(item, f"{path}[{i}]")
        return out
    if not isinstance(schema, dict):
        return out
    for key, value in schema.items():
        here = f"{path}/{key}"
        if key not in STANDARD_KEYWORDS:
            out.append(here)
        elif key in _NAME_MAPS:
            for name, sub in value.items():
                out += nonstandard_keywords(sub, f"{here}/{name}")
        elif key not in _DATA_KEYWORDS:
            out += nonstandard_keywords(value, here)
    return out
