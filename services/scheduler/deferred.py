"""Ctrl-C deferred across a transaction: inside the block SIGINT only sets a flag that the
transaction looks at between its steps, so a submit is never cut half-way (a campaign recorded
and half its runs published) but rolled back as a whole."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from typing import Callable, Iterator


@contextlib.contextmanager
def deferred_sigint(note: str) -> Iterator[Callable[[], bool]]:
    """Yield "was Ctrl-C pressed?"; ``note`` is printed on the first press. The previous
    handler is back after the block (outside the main thread signals cannot be caught: the
    flag then stays unset)."""
    pressed = threading.Event()

    def on_sigint(_signum: int, _frame: object) -> None:
        if not pressed.is_set():
            print(note, file=sys.stderr, flush=True)
        pressed.set()

    try:
        previous = signal.signal(signal.SIGINT, on_sigint)
    except ValueError:
        yield pressed.is_set
        return
    try:
        yield pressed.is_set
    finally:
        signal.signal(signal.SIGINT, previous)
