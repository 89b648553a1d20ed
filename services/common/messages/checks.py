"""Bounds every decoded message is checked against before its model sees it (messages.py):
how deeply its JSON nests, and that every number is finite and within 64 bits."""

from __future__ import annotations

import math
import re
from typing import Any

from services.common.errors import DecodeError

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

#: JSON strings (escapes included), removed before brackets are counted.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")


def nested_deeper_than(body: bytes, limit: int) -> bool:
    """Whether brackets outside strings nest deeper than ``limit``: a scan, not a parse, that
    stops at the first level too deep."""
    depth = 0
    for c in _JSON_STRING.sub(b"", body).translate(None, _NOT_BRACKETS):
        if c in b"[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def check_numbers(value: Any, path: str) -> None:
    """Every float finite and every whole number within 64 bits, in typed fields and free-form
    ones (histograms, server variables) alike; the error names where."""
    if isinstance(value, dict):
        for k, v in value.items():
            check_numbers(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            check_numbers(v, f"{path}.{i}" if path else str(i))
    elif isinstance(value, float) and not math.isfinite(value):
        raise DecodeError(path, f"{value} is not a finite number")
    elif isinstance(value, int) and not isinstance(value, bool) and not INT64_MIN <= value <= INT64_MAX:
        raise DecodeError(path, f"{shown(value)} is outside the 64-bit range")


def shown(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
