"""Durations as users write them in specs and flags: ``90s``, ``15m``, ``1h30m``, or plain seconds."""

from __future__ import annotations

import math
import re

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: object) -> float:
    """Return seconds for ``value``; raise ValueError saying what is accepted."""
    if isinstance(value, bool):
        raise ValueError("expected a duration like 90s, 15m or 1h, not a boolean")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        if re.fullmatch(r"\d+(\.\d+)?", text):
            seconds = float(text)
        else:
            pos, seconds = 0, 0.0
            for m in _PART.finditer(text):
                if m.start() != pos:
                    break
                seconds += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
                pos = m.end()
            if pos != len(text) or not text:
                raise ValueError(f"{value!r} is not a duration: use 90s, 15m, 1h30m or seconds")
    else:
        raise ValueError(f"expected a duration like 90s, 15m or 1h, got {type(value).__name__}")
    if not math.isfinite(seconds):
        raise ValueError("must be a finite duration")
    if seconds < 0:
        raise ValueError("must be >= 0")
    return seconds


def format_duration(seconds: float) -> str:
    """Render seconds the way a spec would write them (``15m``, ``1h30m``, ``3s``)."""
    if seconds != int(seconds):
        return f"{seconds:g}s"
    s = int(seconds)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    out = (f"{h}h" if h else "") + (f"{m}m" if m else "") + (f"{sec}s" if sec else "")
    return out or "0s"
