"""Text from outside (server errors, a spec's strings, names read from messages or files) made safe
to show on a terminal: control characters are shown escaped, never obeyed."""

from __future__ import annotations

import unicodedata

#: Unicode categories a terminal or a text viewer may obey rather than show: C0/C1 controls and
#: DEL (Cc: cursor moves, colours, titles), format controls (Cf: bidi overrides such as U+202E,
#: isolates, zero-width characters), line and paragraph separators (Zl, Zp) and lone surrogates (Cs).
CONTROL_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
#: What stays as written by default: a line break and a tab lay out text, they do not hide it.
LAYOUT = "\n\t"


def is_control(ch: str) -> bool:
    """Whether the one character ``ch`` is one a terminal might act on instead of showing it."""
    return unicodedata.category(ch) in CONTROL_CATEGORIES


def first_control(text: str, keep: str = LAYOUT) -> str | None:
    """The first control character of ``text`` outside ``keep``, or None."""
    for ch in text:
        if ch not in keep and is_control(ch):
            return ch
    return None


def escaped(ch: str) -> str:
    """One character as Python writes it in a string literal: ``\\x1b``, ``\\u202e``, ``\\U000e0001``."""
    n = ord(ch)
    if n <= 0xFF:
        return f"\\x{n:02x}"
    return f"\\u{n:04x}" if n <= 0xFFFF else f"\\U{n:08x}"


def escape_controls(text: str, keep: str = LAYOUT) -> str:
    """``text`` with every control character outside ``keep`` shown escaped (``\\x1b[31m`` prints
    as those eight characters, U+202E as ``\\u202e``); everything else is left as it is."""
    if text.isprintable():  # the common case, in C: no control and no separator at all
        return text
    return "".join(escaped(ch) if ch not in keep and is_control(ch) else ch for ch in text)
