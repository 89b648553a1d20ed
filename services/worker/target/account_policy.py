"""Which accounts, sockets and authentication a spec may make this worker use: the worker
operator's choice, read once from the environment.

  BENCHFLEET_TARGET_SOCKET_DIRS         comma-separated directories whose sockets dsn targets may
                                        name (/run/mysqld for Debian's server). Unset: none, so a
                                        target naming a socket fails. The fleet's secrets and
                                        managed servers' directories are never allowed.
  BENCHFLEET_TARGET_PRIVILEGED_USERS    comma-separated accounts the worker connects as even when
                                        they hold more than a run needs (grants.py), ``root``
                                        included: ``user`` or ``user@host`` as CURRENT_USER() shows
                                        it. Unset: none. For a test server, never a shared one.
  BENCHFLEET_TARGET_ALLOW_CLEARTEXT     ``1``: clients may answer a server that asks for the
                                        password in clear text (mysql_clear_password, PAM's
                                        dialog). Unset or ``0``: they refuse, and a worker whose
                                        environment has LIBMYSQL_ENABLE_CLEARTEXT_PLUGIN refuses to start.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Mapping

from services.common.errors import SettingsError
from services.worker.target.secret_policy import fleet_secrets_dir, managed_dir

SOCKET_DIRS = "BENCHFLEET_TARGET_SOCKET_DIRS"
PRIVILEGED_USERS = "BENCHFLEET_TARGET_PRIVILEGED_USERS"
ALLOW_CLEARTEXT = "BENCHFLEET_TARGET_ALLOW_CLEARTEXT"
#: MySQL's client library (mysql.connector's C extension) sends a clear-text password when this is set.
LIBMYSQL_CLEARTEXT = "LIBMYSQL_ENABLE_CLEARTEXT_PLUGIN"
_ACCOUNT = re.compile(r"[A-Za-z0-9_.-]{1,80}(@[A-Za-z0-9_.:%-]{1,255})?")


def _real(path: str) -> str:
    return os.path.realpath(os.path.expanduser(path))


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


@dataclass(frozen=True)
class AccountPolicy:
    """What the operator allows beyond least privilege (see the module docstring)."""

    socket_dirs: tuple[str, ...] = ()
    forbidden_dirs: tuple[str, ...] = ()
    privileged: frozenset[str] = frozenset()
    allow_cleartext: bool = False

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> "AccountPolicy":
        """The operator's policy; SettingsError naming the variable for a value it cannot use."""
        forbidden = (_real(str(fleet_secrets_dir(environ))), _real(str(managed_dir(environ))))
        dirs = []
        for entry in filter(None, (e.strip() for e in environ.get(SOCKET_DIRS, "").split(","))):
            if not entry.startswith("/"):
                raise SettingsError(f"{SOCKET_DIRS}: {entry!r} is not an absolute directory")
            real = _real(entry)
            clash = next((f for f in forbidden if _inside(real, f) or _inside(f, real)), None)
            if clash is not None:
                raise SettingsError(f"{SOCKET_DIRS}: {entry} overlaps {clash}, where managed servers and the "
                                    "fleet's secrets live; their sockets belong to their own runs")
            dirs.append(real)
        users = [u.strip() for u in environ.get(PRIVILEGED_USERS, "").split(",") if u.strip()]
        bad = next((u for u in users if not _ACCOUNT.fullmatch(u)), None)
        if bad is not None:
            raise SettingsError(f"{PRIVILEGED_USERS}: {bad!r} is not an account (user or user@host)")
        flag = environ.get(ALLOW_CLEARTEXT, "").strip().lower()
        if flag not in ("", "0", "1", "false", "true", "no", "yes"):
            raise SettingsError(f"{ALLOW_CLEARTEXT}: {flag!r} is not 1 or 0")
        allow = flag in ("1", "true", "yes")
        if environ.get(LIBMYSQL_CLEARTEXT) and not allow:
            raise SettingsError(f"{LIBMYSQL_CLEARTEXT} is set, which makes the worker's own connections send "
                                f"a password in clear text to a server asking for it; unset it, or set "
                                f"{ALLOW_CLEARTEXT}=1 to allow that")
        return cls(tuple(dirs), forbidden, frozenset(users), allow)

    def socket_problem(self, socket: str) -> str | None:
        """Why a dsn target may not connect through ``socket`` (symlinks resolved), or None."""
        real = _real(socket)
        if any(_inside(real, d) for d in self.forbidden_dirs):
            return (f"{socket} is a managed server's or the fleet's own; only the runs of that server "
                    "reach it (a managed target)")
        parent = os.path.dirname(real)
        if any(_inside(parent, d) for d in self.socket_dirs):
            return None
        allowed = ", ".join(self.socket_dirs) or "none configured"
        return f"{socket} is not in a directory this worker lets specs name (the worker's {SOCKET_DIRS}: {allowed})"

    def may_hold_more(self, current_user: str) -> bool:
        """Whether the operator lets the worker connect as ``current_user`` (``user@host``, as
        CURRENT_USER() returns it) whatever it holds."""
        user = current_user.rpartition("@")[0] if "@" in current_user else current_user
        return user in self.privileged or current_user in self.privileged

    def describe(self) -> dict[str, object]:
        """The policy for the worker's start-up log line."""
        return {"socket_dirs": list(self.socket_dirs), "privileged_users": sorted(self.privileged),
                "allow_cleartext": self.allow_cleartext}
