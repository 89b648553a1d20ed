"""The broker definitions deploy/ensure-services asks RabbitMQ for: the fleet's vhost, one user per
role with its password (as RabbitMQ's salted SHA-256 hash) and its permission patterns, compared
with what the broker exported, so that one ``rabbitmqctl import_definitions`` sets what differs and a
broker already as wanted gets no call at all.

Each rabbitmqctl call starts an Erlang VM (about half a second of CPU); one user at a time took nine
or more of them on every run. This module imports nothing of benchfleet, so ensure-services runs the
file by itself, before any venv exists. What each role may do stays defined in ensure-services."""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

#: The hashing RabbitMQ 3.x uses by default: base64(salt ++ sha256(salt ++ password)), a 4-byte salt.
ALGORITHM = "rabbit_password_hashing_sha256"
SALT_BYTES = 4


@dataclass(frozen=True)
class WantedUser:
    """A broker user as the fleet wants it: its password, the tags it needs (others it holds stay),
    and its permissions on the fleet's vhost."""

    name: str
    password: str
    tags: tuple[str, ...]
    configure: str
    write: str
    read: str

    def __repr__(self) -> str:
        return f"WantedUser(name={self.name!r}, password='***', tags={self.tags!r})"


def password_hash(password: str, salt: bytes) -> str:
    """``password`` hashed as RabbitMQ stores it, with ``salt``."""
    return base64.b64encode(salt + hashlib.sha256(salt + password.encode()).digest()).decode()


def holds_password(user: Mapping, password: str) -> bool:
    """Whether an exported user's hash is the one of ``password`` (an unknown algorithm: no)."""
    if user.get("hashing_algorithm") != ALGORITHM:
        return False
    try:
        raw = base64.b64decode(str(user.get("password_hash", "")), validate=True)
    except ValueError:
        return False
    return len(raw) == SALT_BYTES + 32 and password_hash(password, raw[:SALT_BYTES]) == user["password_hash"]


def _tags(user: Mapping) -> list[str]:
    tags = user.get("tags", [])
    # Older exports write tags as one comma-separated string.
    return [t for t in tags.split(",") if t] if isinstance(tags, str) else list(tags)


def to_import(exported: Mapping, vhost: str, wanted: Sequence[WantedUser],
              salt: Callable[[int], bytes] = os.urandom) -> dict | None:
    """The definitions that make the broker's ``exported`` state hold ``wanted`` on ``vhost``, or None
    when it holds them already. A user whose password and tags are right keeps its hash; other users
    and vhosts are left out, so the import touches nothing else."""
    users = {u["name"]: u for u in exported.get("users", [])}
    granted = {(p["user"], p["vhost"]): p for p in exported.get("permissions", [])}
    out_users, out_permissions = [], []
    for w in wanted:
        have = users.get(w.name)
        tags = sorted(set(_tags(have) if have else []) | set(w.tags))
        right_password = have is not None and holds_password(have, w.password)
        if not right_password or (have is not None and tags != sorted(_tags(have))):
            out_users.append({
                "name": w.name, "hashing_algorithm": ALGORITHM, "tags": tags,
                "password_hash": have["password_hash"] if right_password else password_hash(w.password, salt(SALT_BYTES)),
                **({"limits": have["limits"]} if have and have.get("limits") else {}),
            })
        perm = {"user": w.name, "vhost": vhost, "configure": w.configure, "write": w.write, "read": w.read}
        if {k: granted.get((w.name, vhost), {}).get(k) for k in perm} != perm:
            out_permissions.append(perm)
    new_vhost = vhost not in {v["name"] for v in exported.get("vhosts", [])}
    if not (out_users or out_permissions or new_vhost):
        return None
    return {"users": out_users, "vhosts": [{"name": vhost}] if new_vhost else [], "permissions": out_permissions}


def has_exchange(exported: Mapping, vhost: str, name: str) -> bool:
    return any(e.get("vhost") == vhost and e.get("name") == name for e in exported.get("exchanges", []))


def has_user(exported: Mapping, name: str) -> bool:
    return any(u.get("name") == name for u in exported.get("users", []))


def read_password(path: Path) -> str:
    """The first line of a password file, as rabbitmqctl read it from stdin."""
    return path.read_text().split("\n", 1)[0]


def main(argv: Sequence[str] | None = None) -> int:
    """``import``: print the definitions to import (nothing when none); ``has-exchange`` and
    ``has-user``: exit 0 when there, 1 when not. Each reads the broker's export on stdin."""
    parser = argparse.ArgumentParser(prog="definitions.py", description=main.__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    imp = sub.add_parser("import")
    imp.add_argument("--vhost", required=True)
    imp.add_argument("--user", nargs=6, action="append", default=[],
                     metavar=("NAME", "PASSWORD_FILE", "TAGS", "CONFIGURE", "WRITE", "READ"))
    exch = sub.add_parser("has-exchange")
    exch.add_argument("--vhost", required=True)
    exch.add_argument("name")
    sub.add_parser("has-user").add_argument("name")
    args = parser.parse_args(argv)
    try:
        exported = json.load(sys.stdin)
    except ValueError as e:
        print(f"definitions.py: the broker's export is not JSON: {e}", file=sys.stderr)
        return 2
    if args.command == "has-exchange":
        return 0 if has_exchange(exported, args.vhost, args.name) else 1
    if args.command == "has-user":
        return 0 if has_user(exported, args.name) else 1
    wanted = [WantedUser(name, read_password(Path(pwfile)), tuple(t for t in tags.split(",") if t), conf, write, read)
              for name, pwfile, tags, conf, write, read in args.user]
    todo = to_import(exported, args.vhost, wanted)
    if todo is not None:
        json.dump(todo, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
