"""The environment a managed server and its install script start with: not the worker's, which
holds the fleet's settings and secrets (BENCHFLEET_*, password variables, TMPDIR, MYSQL_HOME)."""

from __future__ import annotations

import os
from typing import Mapping

#: The only variables a managed server gets from the worker's environment (the worker's holds
#: its secrets and settings): none names a file the server would read or a program it would run.
SERVER_ENV_KEPT = ("TZ", "LANG", "LC_ALL")
#: PATH for a managed server and its install script: the system's directories only.
SERVER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def server_environment(preload: str = "", env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a managed server (or its install script) starts with: a fixed PATH, the
    few harmless variables of SERVER_ENV_KEPT, and LD_PRELOAD for its allocator (``preload``)."""
    env = os.environ if env is None else env
    out = {"PATH": SERVER_PATH, **{k: env[k] for k in SERVER_ENV_KEPT if k in env}}
    if preload:
        out["LD_PRELOAD"] = preload
    return out
