"""Custom sysbench Lua scripts: the files the worker's operator installed, found by the name a
spec gives (``workloads[i].script``). A spec never ships code to a worker: it names NAME, and
the worker runs NAME.lua from one of the directories its operator listed in BENCHFLEET_LUA_DIRS
(separated by ':'), or refuses the run before anything runs."""

from __future__ import annotations

import os
import re
from typing import Mapping

from services.common.errors import LoadError
from services.common.spec.workloads import SCRIPT_PATTERN

#: The worker setting naming the script directories.
ENV = "BENCHFLEET_LUA_DIRS"


def lua_dirs(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The directories the operator listed, in order (empty entries dropped)."""
    return [d for d in environ.get(ENV, "").split(os.pathsep) if d]


def installed(dirs: list[str]) -> list[str]:
    """The script names the directories hold (NAME of each NAME.lua a spec may name), sorted."""
    names = set()
    for d in dirs:
        try:
            entries = os.listdir(d)
        except OSError:
            continue
        names |= {e[:-4] for e in entries if e.endswith(".lua") and re.fullmatch(SCRIPT_PATTERN, e[:-4])}
    return sorted(names)


def find_script(name: str, where: str, environ: Mapping[str, str] = os.environ) -> str:
    """The path of script ``name`` in the first listed directory holding NAME.lua; LoadError
    naming ``where`` (the spec field) for a name that is not a plain name or not installed."""
    # Checked again here: a run message is not trusted to come from a validated spec.
    if not re.fullmatch(SCRIPT_PATTERN, name):
        raise LoadError(f"{where}: {name[:40]!r} is not a script name (no path, '.' or '..')")
    dirs = lua_dirs(environ)
    if not dirs:
        raise LoadError(f"{where}: {name}: this worker runs no custom scripts ({ENV} is not set)")
    for d in dirs:
        path = os.path.join(d, f"{name}.lua")
        if os.path.isfile(path):
            return path
    have = installed(dirs)
    raise LoadError(f"{where}: script {name!r} is not installed on this worker ({name}.lua in none of {ENV}: "
                             f"{', '.join(dirs)}; installed: {', '.join(have) or 'none'})")
