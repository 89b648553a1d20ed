"""Refusing a dsn target's account that holds more than a run needs (grants.py), before the
run prepares or loads anything: the worker reads CURRENT_USER() and SHOW GRANTS, its roles'
grants included, on a connection of its own."""

from __future__ import annotations

from typing import Any, Iterable

import mysql.connector

from services.common.errors import DbError, TargetError
from services.worker.target import grants
from services.worker.target.account_policy import PRIVILEGED_USERS, AccountPolicy
from services.worker.target.connect_params import ConnectParams
from services.worker.target.dsn import connect

#: Roles followed at most, nested ones included (a role granted to a role ...): an account with
#: more is refused, since the grants of the rest are unread.
MAX_ROLES = 32
#: ER_OPTION_PREVENTS_STATEMENT: SHOW GRANTS on a server started with --skip-grant-tables.
SKIP_GRANT_TABLES = 1290


def _text(v: Any) -> str:
    return v.decode(errors="replace") if isinstance(v, (bytes, bytearray)) else str(v)


def _quote(role: str) -> str:
    return "`" + role.replace("`", "``") + "`"


class TooManyRoles(Exception):
    """The account holds more roles than the worker reads (MAX_ROLES)."""


def read_grants(cur: Any) -> list[str]:
    """The SHOW GRANTS lines of the connection's account, of every role granted to it, and of
    PUBLIC where the server has it and shows it; TooManyRoles past MAX_ROLES roles."""
    cur.execute("SHOW GRANTS FOR CURRENT_USER()")
    lines = [_text(r[0]) for r in cur.fetchall()]
    todo, seen = grants.roles(lines), set()
    while todo:
        role = todo.pop()
        if role in seen:
            continue
        if len(seen) == MAX_ROLES:
            raise TooManyRoles(f"more than {MAX_ROLES} roles, nested ones included ({', '.join(sorted(seen)[:3])}, "
                               f"... and {role} not read)")
        seen.add(role)
        try:
            cur.execute(f"SHOW GRANTS FOR {_quote(role)}")
        except mysql.connector.Error as e:
            # A role whose grants cannot be read cannot be shown to hold no more.
            lines.append(f"GRANT ? ON ? TO role {role} (unreadable: {e.errno})")
            continue
        more = [_text(r[0]) for r in cur.fetchall()]
        lines += more
        todo += grants.roles(more)
    try:
        # What MariaDB 10.11 gives every account; older servers and MySQL have no PUBLIC.
        cur.execute("SHOW GRANTS FOR PUBLIC")
        lines += [_text(r[0]) for r in cur.fetchall()]
    except mysql.connector.Error:
        pass
    return lines


def check(params: ConnectParams, field: str, policy: AccountPolicy, protected: Iterable[str]) -> str:
    """CURRENT_USER() of ``params``' account; TargetError naming ``field``.user when it is root
    or holds more than a run needs and the operator did not list it (BENCHFLEET_TARGET_PRIVILEGED_USERS)."""
    try:
        conn = connect(params, database=False)
        try:
            cur = conn.cursor()
            cur.execute("SELECT CURRENT_USER()")
            current = _text(cur.fetchone()[0])
            if policy.may_hold_more(current):
                return current
            try:
                lines = read_grants(cur)
            except TooManyRoles as e:
                raise TargetError(f"{field}.user", (
                    f"the account {current} holds {e}: the worker reads at most {MAX_ROLES} roles' grants, so "
                    "it cannot tell the account holds no more than a run needs; give the run an account with "
                    f"fewer roles, or the worker's operator lists it in {PRIVILEGED_USERS}")) from None
            except mysql.connector.Error as e:
                if e.errno != SKIP_GRANT_TABLES:
                    raise
                # No grant tables: every connection holds every privilege, whoever it claims to be.
                if policy.may_hold_more(params.user):
                    return current
                raise TargetError(f"{field}.user", (
                    "the server runs with --skip-grant-tables, so every account holds every privilege; "
                    f"only an account the worker's operator lists in {PRIVILEGED_USERS} may be used there")) from None
        finally:
            conn.close()
    except mysql.connector.Error as e:  # the run fails as prepare's errors do: with the server's code
        raise DbError(e.errno or 0, e.msg) from None
    database = params.database or "sbtest"
    excess = grants.excess(current, lines, protected, database)
    if excess:
        raise TargetError(f"{field}.user", (
            f"the account {current} holds more than a run needs ({'; '.join(excess)}), so a spec naming it "
            f"could do more than benchmark; give the run an account with only "
            f"{grants.SUGGESTED.format(database=database, user=params.user)} (docs/security.md), "
            f"or the worker's operator lists it in {PRIVILEGED_USERS}"))
    return current
