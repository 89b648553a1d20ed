"""Reading spec.yaml into a CampaignSpec, with errors that name the field path and YAML line."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable

import yaml
from pydantic import ValidationError

from services.common.errors import FieldError, SpecError
from services.common.spec import CampaignSpec


def format_path(loc: Iterable[Any]) -> str:
    """Render a pydantic location as users write it: ``targets[1].port``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and not re.fullmatch(r"[A-Za-z0-9_.-]+", part):
            out += f"[{part!r}]"  # a key like "\r" or "a: b" must not break the one-line message
        else:
            out += ("." if out else "") + str(part)
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
}


_FIELD_PREFIX = re.compile(r"^([A-Za-z_][A-Za-z0-9_.]*(?:\[\d+\])*): (.+)$", re.S)


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


class _Loader(yaml.SafeLoader):
    """YAML 1.2 booleans: only true/false. The seeds name targets `off`, `on`, `8`; YAML 1.1
    would silently turn `off` into False."""


_Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:bool"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def _line_index(text: str) -> dict[tuple[Any, ...], int]:
    """Map every YAML node path to its 1-based line."""
    lines: dict[tuple[Any, ...], int] = {}
    try:
        root = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError:
        return lines

    def walk(node: Any, path: tuple[Any, ...]) -> None:
        lines[path] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                key = k.value
                lines[path + (key,)] = k.start_mark.line + 1
                walk(v, path + (key,))
                lines[path + (key,)] = k.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, path + (i,))

    if root is not None:
        walk(root, ())
    return lines


def _lookup_line(lines: dict[tuple[Any, ...], int], loc: tuple[Any, ...]) -> int | None:
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            return lines[loc[:n]]
    return None


def errors_from_validation(exc: ValidationError, data: Any, text: str = "") -> list[FieldError]:
    """Turn a pydantic ValidationError into one FieldError per problem, deduplicated."""
    lines = _line_index(text) if text else {}
    out: list[FieldError] = []
    seen: set[tuple[str, str]] = set()
    for err in exc.errors():
        loc = _clean_loc(tuple(err["loc"]), data)
        message = _message(err)
        path = format_path(loc)
        # Validators that know a finer field say so as "options.x: ..."; lift it into the path.
        m = _FIELD_PREFIX.match(message)
        if m:
            path = f"{path}.{m.group(1)}" if path else m.group(1)
            message = m.group(2)
        if (path, message) in seen:
            continue
        seen.add((path, message))
        out.append(FieldError(path, message, _lookup_line(lines, loc)))
    return out


def parse_spec(text: str, source: str = "spec") -> CampaignSpec:
    """Validate spec text; raise SpecError naming each wrong field."""
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(e, "problem", None) or str(e)
        raise SpecError(source, [FieldError("", f"not valid YAML: {problem}", line)]) from None
    if not isinstance(data, dict):
        raise SpecError(source, [FieldError("", "a spec is a YAML mapping (name:, targets:, workloads:, ...)")])
    try:
        return CampaignSpec.model_validate(data)
    except ValidationError as e:
        raise SpecError(source, errors_from_validation(e, data, text)) from None


def load_spec(path: str | Path, overrides: dict[str, Any] | None = None) -> CampaignSpec:
    """Read and validate a spec file; ``overrides`` replace top-level fields (CLI flags)."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise SpecError(str(path), [FieldError("", f"cannot read spec: {e.strerror}")]) from None
    if not overrides:
        return parse_spec(text, str(path))
    spec = parse_spec(text, str(path))
    data = spec.model_dump(mode="json", exclude_none=True)
    data.update(overrides)
    try:
        return CampaignSpec.model_validate(data)
    except ValidationError as e:
        raise SpecError(f"{path} (with command-line overrides)", errors_from_validation(e, data)) from None
