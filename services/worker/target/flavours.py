"""MariaDB and MySQL builds differ in how a datadir is initialised and in a few start options;
this module writes their command lines. Pure: managed_template.py and managed_server.py run them.

- MariaDB: `mariadb-install-db` makes the system tables, then the server in `--bootstrap` mode
  reads the SQL that creates the client account on stdin.
- MySQL 5.7 and 8.x: `mysqld --initialize-insecure` makes the system tables and runs the same SQL
  from `--init-file` in one step (MySQL has no bootstrap mode since 5.7). The account uses
  mysql_native_password, which MariaDB Connector/C (the native driver's client library) speaks
  without TLS; 8.4 and later load that plugin only with `--mysql-native-password=ON`. From 8.0 the X
  plugin would listen on port 33060 in every managed server at once, so it is switched off.

No MySQL build can be had on these machines (Debian ships none), so the MySQL command lines are
tested as generated, not run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from services.common.spec.server_binary import server_argv


@dataclass(frozen=True)
class Flavour:
    """Which server a build is, from its `--version`: MariaDB or MySQL, and its version."""

    name: Literal["mariadb", "mysql"]
    version: tuple[int, int, int]

    @property
    def initialize_in_server(self) -> bool:
        """MySQL 5.7 and later initialise with `mysqld --initialize-insecure`."""
        return self.name == "mysql" and self.version >= (5, 7, 0)


def flavour_of(version: str) -> Flavour:
    """The flavour of a build from the version its server prints ("10.11.18-MariaDB-0+deb12u1",
    "8.0.36"); a version without "MariaDB" is MySQL."""
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    numbers = tuple(int(x) for x in m.groups()) if m else (0, 0, 0)
    return Flavour("mariadb" if "mariadb" in version.lower() else "mysql", numbers)  # type: ignore[arg-type]


def client_user_sql(flavour: Flavour, user: str, password: str, hosts: tuple[str, ...]) -> str:
    """The SQL that creates the load processes' account, one statement a line: every privilege
    but FILE, which would let a workload read and write the server user's files."""
    ident = "IDENTIFIED WITH mysql_native_password BY" if flavour.name == "mysql" else "IDENTIFIED BY"
    # MariaDB's bootstrap mode starts without the grant tables loaded; MySQL's init file runs
    # in a server that has them.
    head = "FLUSH PRIVILEGES;\n" if flavour.name == "mariadb" else ""
    return head + "".join(f"CREATE USER '{user}'@'{h}' {ident} '{password}';\n"
                          f"GRANT ALL PRIVILEGES ON *.* TO '{user}'@'{h}';\n"
                          f"REVOKE FILE ON *.* FROM '{user}'@'{h}';\n" for h in hosts)


def init_commands(flavour: Flavour, *, binary: Path, script: Path | None, datadir: Path, basedir: str | None,
                  user: str | None, init_args: list[str], sql_file: Path, error_log: Path) -> list[list[str]]:
    """The commands that initialise ``datadir`` and create the client account from ``sql_file``
    (MariaDB's second command reads it on stdin; MySQL's one command names it)."""
    base = [f"--basedir={basedir}"] if basedir else []
    as_user = [f"--user={user}"] if user else []
    if flavour.initialize_in_server:
        return [[*server_argv(binary, basedir), "--initialize-insecure", f"--datadir={datadir}",
                 f"--init-file={sql_file}", f"--log-error={error_log}", *as_user, *init_args,
                 *start_args(flavour)]]
    if script is None:
        raise ValueError("a MariaDB build needs its install script")
    return [
        [str(script), "--no-defaults", f"--datadir={datadir}", "--skip-test-db", *base, *as_user, *init_args],
        [*server_argv(binary, basedir), "--bootstrap", f"--datadir={datadir}", f"--log-error={error_log}",
         *as_user, *init_args],
    ]


def start_args(flavour: Flavour) -> list[str]:
    """Options a managed server of this flavour needs beyond the common ones."""
    if flavour.name != "mysql":
        return []
    out = []
    if flavour.version >= (8, 0, 0):
        out.append("--mysqlx=OFF")
    if flavour.version >= (8, 4, 0):
        out.append("--mysql-native-password=ON")
    return out
