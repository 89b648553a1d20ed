"""Finding a managed target's server binary and asking it which options it accepts.

Used by the scheduler (check a spec before publishing it, against the system server binary
only: a spec names no path, and the scheduler runs no registered build) and by the worker (check
again before starting, against the binary of the build it will run). Neither loads plugins to list their options: a spec may not load plugins
(server_options.RESERVED_CODE), and `--help --verbose` with plugin_load would dlopen them.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

from services.common.spec import server_options
from services.common.errors import BinaryNotFound
from services.common.spec.targets import ManagedTarget

#: Where the system server lives (a managed target that names no build runs it).
SYSTEM_BINARIES = ("/usr/sbin/mariadbd", "/usr/sbin/mysqld", "/usr/libexec/mariadbd", "/usr/libexec/mysqld")
#: Seconds `--help --verbose` may take (it prints and exits in well under one).
HELP_TIMEOUT_S = 30.0


def server_argv(binary: str | Path, basedir: str | Path | None) -> list[str]:
    """How every server binary starts its command line: no option file read (a spec's options are
    all it gets), and the build's ``basedir`` when it has one (None: the system server)."""
    return [str(binary), "--no-defaults", *([f"--basedir={basedir}"] if basedir else [])]


def system_binary() -> Path:
    """The server installed on this host (a trusted path, never one from a spec)."""
    for c in SYSTEM_BINARIES:
        p = Path(c)
        if p.is_file() and os.access(p, os.X_OK):
            return p
    raise BinaryNotFound(f"no system server binary here (tried {', '.join(SYSTEM_BINARIES)})")


def install_script(binary: Path, basedir: str | None) -> Path:
    """mariadb-install-db (or mysql_install_db) of the build ``binary`` belongs to (``basedir``:
    a registered build's directory; None: the system server)."""
    names = ("mariadb-install-db", "mysql_install_db")
    if basedir:
        base = Path(basedir)
        candidates = [base / d / n for d in ("scripts", "bin") for n in names]
    else:
        candidates = [binary.parent / n for n in names]
        candidates += [Path(p) for p in (shutil.which(n) for n in names) if p]
        candidates += [Path("/usr/bin") / n for n in names]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    raise BinaryNotFound(f"no install script for {binary} (tried {', '.join(str(c) for c in candidates)})")


@functools.lru_cache(maxsize=32)
def _help(binary: str, mtime: float, basedir: str | None) -> str:
    argv = [*server_argv(binary, basedir), "--help", "--verbose"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=HELP_TIMEOUT_S, stdin=subprocess.DEVNULL)
    if "--help" not in p.stdout and "Variables (--variable-name=value)" not in p.stdout:
        raise BinaryNotFound(f"{binary} --help --verbose printed no option list (exit {p.returncode}): "
                             f"{(p.stderr or p.stdout).strip()[-300:]}")
    return p.stdout


def accepted_options(binary: Path, basedir: str | None = None) -> frozenset[str]:
    """Option names (underscored) ``binary`` accepts, built-in plugins included."""
    text = _help(str(binary), binary.stat().st_mtime, basedir)
    return server_options.parse_help(text)


def option_errors(target: ManagedTarget, binary: Path, basedir: str | None = None) -> list[tuple[str, str]]:
    """(option name, message) for every option of ``target`` that is reserved or that
    ``binary`` does not accept (``basedir``: the build it belongs to, when not the system's)."""
    out = []
    for name, value in target.options.items():
        problem = server_options.option_problem(name, value)
        if problem:
            out.append((name, problem))
    if out:
        return out  # never ask a binary about options a spec may not set
    accepted = accepted_options(binary, basedir)
    for name in server_options.unknown_options(target.options, accepted):
        hint = server_options.suggestion(name, accepted)
        out.append((name, f"not an option of {binary}" + (f" (did you mean {hint}?)" if hint else "")))
    return out
