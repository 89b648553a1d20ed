"""The open-files limit (RLIMIT_NOFILE) a run needs: one descriptor per client connection.

The thread-pool study opens up to 4096 connections from one worker, while many systems start
processes with a soft limit of 1024. Before a run opens any connection, the worker raises its
soft limit to what the run needs (never above the hard limit, which only root may raise). The
load processes and sysbench are started afterwards and inherit it. When the hard limit is too
low, the run fails at once with a message naming the limit, instead of with "Too many open
files" half way through opening its connections.
"""

from __future__ import annotations

import resource
from typing import Callable

from services.common.errors import FdLimitError

#: Descriptors besides the connections: the worker's AMQP and metrics sockets, the pipes to
#: its load processes, logs, shared libraries, /dev/urandom; sysbench's own files.
SPARE = 128



def files_needed(threads: int) -> int:
    """Open files one process needs to hold ``threads`` client connections."""
    return max(0, threads) + SPARE


def new_soft_limit(need: int, soft: int, hard: int) -> int | None:
    """The soft limit to set for ``need`` descriptors, or None when ``soft`` already suffices.
    Raises FdLimitError when even the hard limit is too low."""
    if soft == resource.RLIM_INFINITY or soft >= need:
        return None
    if hard != resource.RLIM_INFINITY and hard < need:
        raise FdLimitError(limit_message(need, hard))
    return need


def limit_message(need: int, hard: int) -> str:
    threads = need - SPARE
    return (f"{threads} threads need RLIMIT_NOFILE (open files) >= {need} in the worker, but its hard limit "
            f"is {hard}: raise the worker's hard limit (ulimit -Hn {need}, LimitNOFILE={need} in a systemd "
            "unit, or nofile in /etc/security/limits.conf) and restart it, or run fewer threads")


_getrlimit = resource.getrlimit
_setrlimit = resource.setrlimit


def ensure(threads: int, *, getrlimit: Callable[[int], tuple[int, int]] | None = None,
           setrlimit: Callable[[int, tuple[int, int]], None] | None = None) -> int:
    """Raise this process's soft RLIMIT_NOFILE to what ``threads`` connections need (children
    started afterwards inherit it); return the soft limit in force. Raises FdLimitError when
    the hard limit is too low."""
    getrlimit, setrlimit = getrlimit or _getrlimit, setrlimit or _setrlimit
    soft, hard = getrlimit(resource.RLIMIT_NOFILE)
    target = new_soft_limit(files_needed(threads), soft, hard)
    if target is None:
        return soft
    setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target
