"""Child processes tied to their worker's life: the kernel kills them when the worker dies, so a
killed worker leaves no server running and no load still hitting a target whose run is taken over."""

from __future__ import annotations

import ctypes
import os
import signal

_PR_SET_PDEATHSIG = 1
# Looked up here, not in the child: a lookup (dlsym) after fork in a process with threads may deadlock.
_prctl = ctypes.CDLL(None, use_errno=True).prctl
_prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)
_prctl.restype = ctypes.c_int


def die_with(parent: int) -> None:
    """In a child between fork and exec: SIGKILL when ``parent`` dies. Set it after any uid change
    (which clears it); the thread that forked must outlive the child, since its exit counts as the
    parent's."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died between fork and prctl
        os._exit(1)
