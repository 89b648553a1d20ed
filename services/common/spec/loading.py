"""Reading spec.yaml into a CampaignSpec, with errors that name the field path and YAML line."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from pydantic import BaseModel, ValidationError

from services.common.spec import yaml_input
from services.common.errors import FieldError, SpecError
from services.common.spec.campaign import CampaignSpec
from services.common.spec.fields import shown
from services.common.spec.problems import FieldProblems, closest, did_you_mean
from services.common.spec.targets import DsnTarget, ManagedTarget, Quiesce
from services.common.spec.workloads import DataShape, WorkloadSpec
from services.common.spec.yaml_input import NodePath, lookup_line


def format_path(loc: Iterable[Any]) -> str:
    """Render a pydantic location as users write it: ``targets[1].port``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", part):
            out += f"[{shown(part)!r}]"  # a key like "\r", "a: b" or a megabyte long stays one short line
        else:
            out += ("." if out else "") + shown(str(part))
    return out


_MESSAGES = {
    "greater_than": "must be > {gt}",
    "greater_than_equal": "must be >= {ge}",
    "less_than": "must be < {lt}",
    "less_than_equal": "must be <= {le}",
    "missing": "required field is missing",
    "extra_forbidden": "unknown field",
    "int_parsing": "must be a whole number",
    "int_type": "must be a whole number",
    "int_from_float": "must be a whole number",
    "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "list_type": "must be a list",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping",
    "too_short": "must have at least {min_length} item(s)",
    "string_pattern_mismatch": "invalid value (allowed: letters, digits, and _ . - ; pattern {pattern})",
    "string_too_long": "must be at most {max_length} characters",
    "too_long": "must have at most {max_length} item(s)",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
}


_FIELD_PREFIX = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*(?:\[\d+\](?:\.[A-Za-z0-9_-]+)*)*): (.+)$", re.S)


def _message(err: dict[str, Any]) -> str:
    template = _MESSAGES.get(err["type"])
    if template:
        try:
            return template.format(**err.get("ctx", {}))
        except (KeyError, IndexError):
            pass
    if err["type"] == "literal_error":
        return f"must be {err['ctx']['expected']}"
    msg = str(err["msg"])
    return msg.removeprefix("Value error, ")


def _clean_loc(loc: tuple[Any, ...], data: Any) -> tuple[Any, ...]:
    """Drop the union tags pydantic inserts (e.g. ``dsn``) so paths follow the YAML."""
    out: list[Any] = []
    node = data
    for part in loc:
        if isinstance(node, dict) and part in node:
            out.append(part)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            out.append(part)
            node = node[part]
        elif isinstance(node, (dict, list)) or node is None:
            # A tag, or a missing/extra key: keep real names, skip tags of known unions.
            if part in ("dsn", "managed", "function-after", "function-before") or (
                isinstance(part, str) and part.startswith(("function-", "tagged-union"))
            ):
                continue
            out.append(part)
            node = None
        else:
            out.append(part)
            node = None
    return tuple(out)


def _model_at(loc: tuple[Any, ...], data: Any) -> type[BaseModel] | None:
    """The spec model of the mapping at ``loc`` (a path in the YAML), for the field names it knows."""
    if loc == ():
        return CampaignSpec
    if loc == ("data",):
        return DataShape
    if len(loc) == 2 and loc[0] == "workloads" and isinstance(loc[1], int):
        return WorkloadSpec
    if len(loc) in (2, 3) and loc[0] == "targets" and isinstance(loc[1], int):
        targets = data.get("targets") if isinstance(data, dict) else None
        target = targets[loc[1]] if isinstance(targets, list) and 0 <= loc[1] < len(targets) else None
        model = ManagedTarget if isinstance(target, dict) and target.get("kind") == "managed" else DsnTarget
        if len(loc) == 2:
            return model
        return Quiesce if loc[2] == "quiesce" else None
    return None


def _unknown_field_suggestion(loc: tuple[Any, ...], data: Any) -> str | None:
    """The field of the same model nearest to an unknown key (``warmpu``: ``warmup``)."""
    if not loc or not isinstance(loc[-1], str):
        return None
    model = _model_at(loc[:-1], data)
    return closest(loc[-1], model.model_fields) if model is not None else None


def _problems(err: dict[str, Any], data: Any) -> list[tuple[str, str, str | None]]:
    """One (finer field, message, suggestion) per problem pydantic's error holds."""
    cause = err.get("ctx", {}).get("error")
    if isinstance(cause, FieldProblems):
        return [(p.field, p.message, p.suggestion) if p.field else _lifted(p.message, p.suggestion)
                for p in cause.problems]
    message = _message(err)
    if err["type"] == "extra_forbidden":
        near = _unknown_field_suggestion(_clean_loc(tuple(err["loc"]), data), data)
        return [("", message + did_you_mean(near), near)]
    return [_lifted(message, None)]


def _lifted(message: str, suggestion: str | None) -> tuple[str, str, str | None]:
    """Validators that know a finer field say so as "options.x: ..."; lift it into the path."""
    m = _FIELD_PREFIX.match(message)
    return (m.group(1), m.group(2), suggestion) if m else ("", message, suggestion)


def errors_from_validation(exc: ValidationError, data: Any, lines: dict[NodePath, int] | None = None) -> list[FieldError]:
    """Turn a pydantic ValidationError into one FieldError per problem, deduplicated; ``lines``
    (from yaml_input.load) gives each its YAML line."""
    lines = lines or {}
    out: list[FieldError] = []
    seen: set[tuple[str, str]] = set()
    for err in exc.errors():
        base = _clean_loc(tuple(err["loc"]), data)
        for finer, message, suggestion in _problems(err, data):
            path, loc = format_path(base), base
            if finer:
                path = f"{path}.{finer}" if path else finer
                loc = base + tuple(int(i) if i else k for k, i in re.findall(r"([A-Za-z0-9_-]+)|\[(\d+)\]", finer))
            if (path, message) in seen:
                continue
            seen.add((path, message))
            out.append(FieldError(path, message, lookup_line(lines, loc), suggestion))
    return out


def parse_spec(text: str, source: str = "spec") -> CampaignSpec:
    """Validate spec text; raise SpecError naming each wrong field."""
    return _parse(text, source)[0]


def _parse(text: str, source: str) -> tuple[CampaignSpec, dict[NodePath, int]]:
    try:
        data, lines = yaml_input.load(text)
    except yaml_input.YamlProblem as e:
        raise SpecError(source, [FieldError(e.path, e.message, e.line)]) from None
    if not isinstance(data, dict):
        raise SpecError(source, [FieldError("", "a spec is a YAML mapping (name:, targets:, workloads:, ...)")])
    try:
        return CampaignSpec.model_validate(data), lines
    except ValidationError as e:
        raise SpecError(source, errors_from_validation(e, data, lines)) from None


def read_spec_text(path: str | Path) -> str:
    """The text of a spec file; SpecError when it cannot be read, is too big or is not UTF-8."""
    try:
        return yaml_input.read_text(path)
    except OSError as e:
        raise SpecError(str(path), [FieldError("", f"cannot read spec: {e.strerror}")]) from None
    except yaml_input.YamlProblem as e:
        raise SpecError(str(path), [FieldError(e.path, e.message, e.line)]) from None


@dataclass(frozen=True)
class SpecSource:
    """Where a valid spec came from, so checks made after validation (run length, server
    options, the results DB's name) point at the YAML line too."""

    name: str
    lines: Mapping[NodePath, int] = field(default_factory=dict)

    def error(self, loc: NodePath, message: str, suggestion: str | None = None) -> FieldError:
        return FieldError(format_path(loc), message, lookup_line(dict(self.lines), loc), suggestion)


def load_spec_source(path: str | Path, overrides: dict[str, Any] | None = None) -> tuple[CampaignSpec, SpecSource]:
    """Read and validate a spec file, with its source; ``overrides`` replace top-level fields
    (CLI flags)."""
    spec, lines = _parse(read_spec_text(path), str(path))
    if not overrides:
        return spec, SpecSource(str(path), lines)
    data = spec.model_dump(mode="json", exclude_none=True)
    data.update(overrides)
    # A duration or warm-up given here sets every run's: the windows by thread count go, the
    # campaign's and the workloads' own.
    for flag, by_threads in (("duration", "duration_by_threads"), ("warmup", "warmup_by_threads")):
        if flag in overrides:
            if by_threads not in overrides:
                data[by_threads] = {}
            for workload in data["workloads"] if "workloads" not in overrides else []:
                workload.pop(by_threads, None)
    name = f"{path} (with command-line overrides)"
    try:
        return CampaignSpec.model_validate(data), SpecSource(name, {k: v for k, v in lines.items()
                                                                     if not k or k[0] not in overrides})
    except ValidationError as e:
        raise SpecError(name, errors_from_validation(e, data)) from None


def load_spec(path: str | Path, overrides: dict[str, Any] | None = None) -> CampaignSpec:
    """Read and validate a spec file; ``overrides`` replace top-level fields (CLI flags)."""
    return load_spec_source(path, overrides)[0]
