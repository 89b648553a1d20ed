"""What a dsn target's account may hold: the privileges a run needs and no more. Pure: reads the
lines of SHOW GRANTS (MariaDB's and MySQL's forms); account_check.py fetches them.

A run needs, on its database (or a pattern or table grant covering it): SELECT, INSERT, UPDATE,
DELETE (the workloads), CREATE, DROP, INDEX (prepare) and LOCK TABLES (the 2010 workloads'
``lock_tables``); on ``*.*`` at most PROCESS and CONNECTION ADMIN (quiesce reads other
sessions and InnoDB's status, and ends what an aborted run left). Anything else is more: ALL
PRIVILEGES, data privileges on ``*.*`` (they read ``mysql.global_priv``'s password hashes),
FILE, SUPER and the privileges MariaDB 10.5+ split from it (SHUTDOWN, BINLOG ADMIN, READ_ONLY
ADMIN, REPLICATION MASTER ADMIN, REPLICATION SLAVE ADMIN, SET USER, FEDERATED ADMIN, SYSTEM
VARIABLES ADMIN...), CREATE USER, GRANT OPTION, PROXY, routine privileges, any privilege on a
database the run's is not (DROP there would drop another's data), and any privilege on a system
schema or on the results DB, even by a pattern that also covers the run's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

#: Privileges a run may hold on its database (or tables of it).
DATABASE_PRIVILEGES = frozenset({"SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "DROP", "INDEX", "LOCK TABLES"})
#: Privileges a run may hold on ``*.*`` (USAGE is none at all).
GLOBAL_PRIVILEGES = frozenset({"USAGE", "PROCESS", "CONNECTION ADMIN"})
#: The statement docs/security.md and the refusal suggest, for an account ``user`` on ``database``.
SUGGESTED = ("GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, LOCK TABLES ON `{database}`.* TO {user}; "
             "GRANT PROCESS ON *.* TO {user}")

_IDENT = r"(?:`(?:[^`]|``)*`|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|[A-Za-z0-9_$%*\\-]+)"
_OBJECT = re.compile(rf"(?:(?P<kind>PROCEDURE|FUNCTION|PACKAGE BODY|PACKAGE)\s+)?(?P<db>{_IDENT})(?:\.(?P<table>{_IDENT}))?")
_GRANT = re.compile(r"^GRANT\s+(?P<body>.+?)\s+TO\s+", re.IGNORECASE | re.DOTALL)
_COLUMNS = re.compile(r"\([^)]*\)")
#: A role of a role grant, with MySQL's host part, and the comma-separated list of them.
_ROLE = re.compile(rf"({_IDENT})(?:@{_IDENT})?")
_ROLE_LIST = re.compile(rf"{_ROLE.pattern}(?:\s*,\s*{_ROLE.pattern})*")


@dataclass(frozen=True)
class Grant:
    """One GRANT line: the privileges, on what (``level``: global, database, table, routine,
    proxy or role: ``roles``, one line may grant several), and whether it carries GRANT OPTION."""

    level: str
    privileges: frozenset[str] = frozenset()
    database: str | None = None
    roles: tuple[str, ...] = ()
    grant_option: bool = False
    text: str = ""


def _unquote(ident: str) -> str:
    if ident[:1] in "`'\"" and ident[-1:] == ident[:1]:
        q = ident[0]
        return ident[1:-1].replace(q + q, q)
    return ident


def _privileges(text: str) -> frozenset[str]:
    names = (p.strip().upper().replace("_", " ") for p in _COLUMNS.sub("", text).split(","))
    return frozenset("ALL PRIVILEGES" if n in ("ALL", "ALL PRIVILEGES") else n for n in names if n)


def parse(line: str) -> Grant | None:
    """The grant a SHOW GRANTS line states; None for lines that grant nothing (SET DEFAULT ROLE)."""
    m = _GRANT.match(line.strip())
    if m is None:
        return None
    option = bool(re.search(r"\bWITH\b.*\bGRANT\s+OPTION\b", line, re.IGNORECASE | re.DOTALL))
    body = m.group("body")
    if body[:1] in "`'\"":  # GRANT `r1`@`%`,`r2`@`%` TO ...: roles, whose own grants count too
        listed = _ROLE_LIST.fullmatch(body)
        names = tuple(_unquote(m.group(1)) for m in _ROLE.finditer(body)) if listed else ()
        return Grant("role", roles=names, grant_option=option, text=line) if names else \
            Grant("unknown", text=line, grant_option=option)
    privs, sep, target = body.rpartition(" ON ")
    if not sep:
        return Grant("unknown", text=line, grant_option=option)
    if privs.strip().upper() == "PROXY":
        return Grant("proxy", frozenset({"PROXY"}), grant_option=option, text=line)
    obj = _OBJECT.fullmatch(target.strip())
    if obj is None:
        return Grant("unknown", _privileges(privs), text=line, grant_option=option)
    if obj.group("kind"):
        return Grant("routine", _privileges(privs), _unquote(obj.group("db")), grant_option=option, text=line)
    db, table = _unquote(obj.group("db")), obj.group("table")
    if db == "*" and table in (None, "*"):
        return Grant("global", _privileges(privs), grant_option=option, text=line)
    level = "database" if table in (None, "*") else "table"
    return Grant(level, _privileges(privs), db, grant_option=option, text=line)


def roles(lines: Iterable[str]) -> list[str]:
    """The roles granted in ``lines`` (their grants are the account's too when enabled)."""
    return [r for g in map(parse, lines) if g is not None and g.level == "role" for r in g.roles]


def _like(pattern: str) -> re.Pattern[str]:
    """A grant's database name as a regex: ``%`` and ``_`` are wildcards, ``\\_`` and ``\\%`` are not."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        i += 1
    return re.compile("".join(out), re.IGNORECASE)


def is_root(current_user: str) -> bool:
    """Whether CURRENT_USER() (``user@host``) is a root account."""
    return current_user.rpartition("@")[0].lower() == "root" if "@" in current_user else current_user.lower() == "root"


def excess(current_user: str, lines: Sequence[str], protected: Iterable[str], database: str) -> list[str]:
    """What the account holds beyond a run's needs, one short phrase each (empty: nothing).
    ``lines`` are SHOW GRANTS of the account and of its roles; ``protected`` the schemas no
    run may touch (the server's own, the results DB); ``database`` the run's."""
    out: list[str] = []
    if is_root(current_user):
        out.append("it is root")
    guarded = [p.lower() for p in protected]
    for line in lines:
        g = parse(line)
        if g is None or g.level == "role":
            continue
        if g.grant_option:
            out.append("GRANT OPTION")
        if g.level == "proxy":
            out.append("PROXY")
        elif g.level == "unknown":
            out.append(f"a grant the worker cannot read ({line.strip()[:120]})")
        elif g.level == "routine":
            out.append(f"{', '.join(sorted(g.privileges))} on routine {g.database}")
        elif g.level == "global":
            extra = sorted(g.privileges - GLOBAL_PRIVILEGES)
            if extra:
                out.append(f"{', '.join(extra)} ON *.*")
        else:
            extra = sorted(g.privileges - DATABASE_PRIVILEGES)
            name = g.database or ""
            if extra:
                out.append(f"{', '.join(extra)} ON `{name}`")
            # A table grant names its database as it is; a database grant's name is a pattern.
            covers = _like(name).fullmatch if g.level == "database" else (lambda p: p == name.lower())
            hit = next((p for p in guarded if covers(p)), None)
            if hit is not None and g.privileges - {"USAGE"}:
                out.append(f"privileges on `{name}`, which covers {hit}")
            elif g.privileges - {"USAGE"} and not covers(database.lower()):
                out.append(f"privileges on `{name}`, which is not the run's database {database}")
    return list(dict.fromkeys(out))
