"""No spec makes a worker root on a server: the grants a dsn target's account may hold (read
from SHOW GRANTS as MariaDB 10.11 and MySQL 8 print them), the operator's exceptions, the
sockets a target may name, and clear-text authentication refused unless allowed."""

from __future__ import annotations

import os

import pytest

import mysql.connector

from services.common.errors import SettingsError, TargetError
from services.worker.target import account_check, grants
from services.worker.target.connect_params import ConnectParams
from services.worker.target.account_policy import AccountPolicy

PROTECTED = ("information_schema", "mysql", "performance_schema", "sys", "benchfleet")
MINIMAL = [
    "GRANT USAGE ON *.* TO `bench`@`%` IDENTIFIED BY PASSWORD '*0000000000000000000000000000000000000000'",
    "GRANT PROCESS, CONNECTION ADMIN ON *.* TO `bench`@`%`",
    "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, LOCK TABLES ON `sbtest%`.* TO `bench`@`%`",
    "GRANT SELECT (`c`), UPDATE (`c`, `k`) ON `sbtest`.`sbtest1` TO `bench`@`%`",
]
#: MariaDB 10.11's root, as SHOW GRANTS prints it.
ROOT = [
    "GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` IDENTIFIED VIA mysql_native_password USING 'invalid' "
    "OR unix_socket WITH GRANT OPTION",
    "GRANT PROXY ON ''@'%' TO 'root'@'localhost' WITH GRANT OPTION",
]


def test_an_account_with_what_a_run_needs_holds_nothing_more():
    """The workloads', prepare's and quiesce's privileges, by pattern or by table, are not excess."""
    assert grants.excess("bench@%", MINIMAL, PROTECTED, "sbtest") == []
    # MySQL 8 spells dynamic privileges with underscores, on lines of their own.
    assert grants.excess("bench@%", ["GRANT USAGE ON *.* TO `bench`@`%`",
                                     "GRANT CONNECTION_ADMIN ON *.* TO `bench`@`%`"], PROTECTED, "sbtest") == []


def test_root_is_refused_by_name_and_by_what_it_holds():
    found = grants.excess("root@localhost", ROOT, PROTECTED, "sbtest")
    assert found[0] == "it is root"
    assert {"ALL PRIVILEGES ON *.*", "GRANT OPTION", "PROXY"} <= set(found), found
    # Root without a grant to show is still root (unix_socket logs an OS root in as it).
    assert grants.excess("root@127.0.0.1", [], PROTECTED, "sbtest") == ["it is root"]
    assert grants.excess("rootless@%", [], PROTECTED, "sbtest") == []


@pytest.mark.parametrize("line, phrase", [
    ("GRANT ALL PRIVILEGES ON `sbtest`.* TO `b`@`%`", "ALL PRIVILEGES ON `sbtest`"),
    ("GRANT SELECT ON *.* TO `b`@`%`", "SELECT ON *.*"),
    ("GRANT FILE ON *.* TO `b`@`%`", "FILE ON *.*"),
    ("GRANT SUPER ON *.* TO `b`@`%`", "SUPER ON *.*"),
    # MariaDB 10.5+ split these from SUPER: each is refused by name.
    ("GRANT BINLOG ADMIN, READ_ONLY ADMIN, REPLICATION MASTER ADMIN, SET USER ON *.* TO `b`@`%`",
     "BINLOG ADMIN, READ ONLY ADMIN, REPLICATION MASTER ADMIN, SET USER ON *.*"),
    ("GRANT SHUTDOWN, CREATE USER ON *.* TO `b`@`%`", "CREATE USER, SHUTDOWN ON *.*"),
    ("GRANT SYSTEM_VARIABLES_ADMIN ON *.* TO `b`@`%`", "SYSTEM VARIABLES ADMIN ON *.*"),
    ("GRANT SELECT ON `sbtest`.* TO `b`@`%` WITH GRANT OPTION", "GRANT OPTION"),
    ("GRANT USAGE ON *.* TO `b`@`%` WITH GRANT OPTION", "GRANT OPTION"),
    ("GRANT SELECT, ALTER, CREATE ROUTINE ON `sbtest`.* TO `b`@`%`", "ALTER, CREATE ROUTINE ON `sbtest`"),
    ("GRANT SELECT ON `mysql`.* TO `b`@`%`", "which covers mysql"),
    ("GRANT SELECT ON `%`.* TO `b`@`%`", "which covers"),
    ("GRANT SELECT ON `m_sql`.* TO `b`@`%`", "which covers mysql"),
    ("GRANT SELECT, INSERT ON `benchfleet`.* TO `b`@`%`", "which covers benchfleet"),
    ("GRANT EXECUTE ON PROCEDURE `sbtest`.`p` TO `b`@`%`", "EXECUTE on routine sbtest"),
    ("GRANT PROXY ON 'other'@'%' TO 'b'@'%'", "PROXY"),
])
def test_anything_beyond_a_runs_needs_is_named(line, phrase):
    """Each excess is named in words a DBA can turn into a REVOKE."""
    found = grants.excess("b@%", [*MINIMAL, line], PROTECTED, "sbtest")
    assert any(phrase in f for f in found), found


def test_an_escaped_pattern_covers_only_what_it_says():
    """`benchfleet\\_%` covers benchfleet_x but not benchfleet itself; `sbtest%` covers no system schema."""
    line = "GRANT SELECT ON `benchfleet\\_%`.* TO `b`@`%`"
    assert grants.excess("b@%", [line], PROTECTED, "benchfleet_run") == []
    assert grants.excess("b@%", [line], (*PROTECTED, "benchfleet_test_1"), "benchfleet_run") != []


def test_roles_are_followed_and_default_role_lines_grant_nothing():
    lines = ["GRANT USAGE ON *.* TO `b`@`%`", "GRANT `bench_role` TO `b`@`%`", "SET DEFAULT ROLE `bench_role` FOR `b`@`%`",
             "GRANT `r2`@`%` TO `b`@`%`"]
    assert grants.roles(lines) == ["bench_role", "r2"]
    assert grants.excess("b@%", lines, PROTECTED, "sbtest") == []
    assert grants.parse("SET DEFAULT ROLE `bench_role` FOR `b`@`%`") is None


def test_privileges_on_a_database_other_than_the_runs_are_more_than_it_needs():
    """docs/security.md: a run's privileges are on its database (a pattern covering it, or its tables).
    DROP on another database would let a spec drop someone else's data; the demo's `sbtest%` pattern
    covers every sbtest database a run names."""
    shop = "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, LOCK TABLES ON `shop`.* TO `b`@`%`"
    assert grants.excess("b@%", [*MINIMAL[:3], shop], PROTECTED, "sbtest") == [
        "privileges on `shop`, which is not the run's database sbtest"]
    assert grants.excess("b@%", [shop], PROTECTED, "shop") == []
    assert grants.excess("b@%", MINIMAL[:3], PROTECTED, "sbtest_large") == []
    # A table grant names its database as it is: `sbtest`.`sbtest1` is not the run's sbtest_large.
    assert grants.excess("b@%", MINIMAL, PROTECTED, "sbtest_large") == [
        "privileges on `sbtest`, which is not the run's database sbtest_large"]


def test_a_line_granting_several_roles_follows_each_of_them():
    """MySQL 8 prints the roles of an account on one line: every one is read, not only the first."""
    line = "GRANT `r1`@`%`,`r2`@`%` TO `b`@`%`"
    assert grants.roles([line]) == ["r1", "r2"]
    assert grants.roles(["GRANT `r1`, `r 2` TO `b`@`%` WITH ADMIN OPTION"]) == ["r1", "r 2"]
    cur = RoleCursor({"r1": [], "r2": ["GRANT FILE ON *.* TO `r2`@`%`"]}, [line])
    assert "FILE ON *.*" in grants.excess("b@%", account_check.read_grants(cur), PROTECTED, "sbtest")


def test_an_account_with_more_roles_than_the_worker_reads_is_refused_naming_why(monkeypatch):
    """Past MAX_ROLES roles (nested included) the rest would go unread: the account is refused,
    naming targets.a.user and the limit, rather than passed on the roles read."""
    n = account_check.MAX_ROLES + 1
    chain = {f"r{i}": [f"GRANT `r{i + 1}` TO `r{i}`"] for i in range(n)}
    monkeypatch.setattr(account_check, "connect",
                        lambda *a, **k: FakeConnection(RoleCursor(chain, ["GRANT `r0` TO `b`@`%`"])))
    params = ConnectParams(host="127.0.0.1", port=3306, user="b", database="sbtest")
    with pytest.raises(TargetError) as e:
        account_check.check(params, "targets.a", AccountPolicy.from_environ(ENV), PROTECTED)
    assert e.value.field == "targets.a.user", e.value
    assert f"holds more than {account_check.MAX_ROLES} roles" in e.value.message, e.value
    assert "BENCHFLEET_TARGET_PRIVILEGED_USERS" in e.value.message
    monkeypatch.setattr(account_check, "connect", lambda *a, **k: FakeConnection(
        RoleCursor({f"r{i}": [] for i in range(account_check.MAX_ROLES)},
                   [f"GRANT `r{i}` TO `b`@`%`" for i in range(account_check.MAX_ROLES)])))
    assert account_check.check(params, "targets.a", AccountPolicy.from_environ(ENV), PROTECTED) == "b@%"


class RoleCursor:
    """SHOW GRANTS as a server answers it for account b@% (``account``) and for each role of ``roles``."""

    def __init__(self, roles: dict[str, list[str]], account: list[str]):
        self.roles, self.account, self.rows = roles, account, []

    def execute(self, sql: str, params=None) -> None:
        if sql == "SELECT CURRENT_USER()":
            self.rows = [("b@%",)]
        elif sql == "SHOW GRANTS FOR CURRENT_USER()":
            self.rows = [(line,) for line in self.account]
        elif sql == "SHOW GRANTS FOR PUBLIC":
            raise mysql.connector.Error(msg="no PUBLIC", errno=1064)
        else:
            self.rows = [(line,) for line in self.roles[sql.removeprefix("SHOW GRANTS FOR ").strip("`")]]

    def fetchone(self):
        return self.rows[0]

    def fetchall(self):
        return self.rows


class FakeConnection:
    def __init__(self, cursor: RoleCursor):
        self._cursor = cursor

    def cursor(self):
        return self._cursor

    def close(self):
        pass


ENV = {"BENCHFLEET_SECRETS": "/nonexistent/secrets", "BENCHFLEET_MANAGED_DIR": "/nonexistent/managed"}


def test_only_named_accounts_may_hold_more():
    p = AccountPolicy.from_environ({**ENV, "BENCHFLEET_TARGET_PRIVILEGED_USERS": "root, lab@10.0.0.%"})
    assert p.may_hold_more("root@localhost") and p.may_hold_more("lab@10.0.0.%")
    assert not p.may_hold_more("lab@%") and not p.may_hold_more("bench@%")
    assert not AccountPolicy.from_environ(ENV).may_hold_more("root@localhost")
    with pytest.raises(SettingsError, match="BENCHFLEET_TARGET_PRIVILEGED_USERS: 'ro ot'"):
        AccountPolicy.from_environ({**ENV, "BENCHFLEET_TARGET_PRIVILEGED_USERS": "ro ot"})


def test_a_socket_must_be_in_a_directory_the_operator_allows(tmp_path):
    """None by default; the managed servers' and secrets' directories never, whatever is set."""
    managed, run = tmp_path / "managed", tmp_path / "run"
    env = {**ENV, "BENCHFLEET_MANAGED_DIR": str(managed)}
    assert "none configured" in AccountPolicy.from_environ(env).socket_problem(str(run / "mysqld.sock"))
    p = AccountPolicy.from_environ({**env, "BENCHFLEET_TARGET_SOCKET_DIRS": str(run)})
    assert p.socket_problem(str(run / "mysqld.sock")) is None
    assert "BENCHFLEET_TARGET_SOCKET_DIRS" in p.socket_problem("/var/run/other/mysqld.sock")
    assert "managed server" in p.socket_problem(str(managed / "servers" / "x" / "mysqld.sock"))
    # A link from an allowed directory into a managed server's is resolved.
    (managed / "s").mkdir(parents=True)
    run.mkdir()
    (run / "sneaky.sock").symlink_to(managed / "s" / "mysqld.sock")
    assert "managed server" in p.socket_problem(str(run / "sneaky.sock"))
    with pytest.raises(SettingsError, match="BENCHFLEET_TARGET_SOCKET_DIRS: .* overlaps"):
        AccountPolicy.from_environ({**env, "BENCHFLEET_TARGET_SOCKET_DIRS": str(tmp_path)})


def test_clear_text_is_refused_unless_the_operator_allows_it():
    """Off by default; LIBMYSQL_ENABLE_CLEARTEXT_PLUGIN in the worker's environment (which makes
    mysql.connector's library send it) stops the worker unless allowed."""
    assert AccountPolicy.from_environ(ENV).allow_cleartext is False
    assert AccountPolicy.from_environ({**ENV, "BENCHFLEET_TARGET_ALLOW_CLEARTEXT": "1"}).allow_cleartext
    with pytest.raises(SettingsError, match="LIBMYSQL_ENABLE_CLEARTEXT_PLUGIN is set"):
        AccountPolicy.from_environ({**ENV, "LIBMYSQL_ENABLE_CLEARTEXT_PLUGIN": "1"})
    with pytest.raises(SettingsError, match="BENCHFLEET_TARGET_ALLOW_CLEARTEXT: 'maybe'"):
        AccountPolicy.from_environ({**ENV, "BENCHFLEET_TARGET_ALLOW_CLEARTEXT": "maybe"})


def test_sysbench_gets_a_plugin_directory_without_the_clear_text_plugins(tmp_path):
    """sysbench 1.0.20 restricts no plugin itself: its libmariadb is pointed at links to every
    client plugin but mysql_clear_password and dialog, unless the run's parameters allow them."""
    from services.worker.driver.contract import ConnectParams
    from services.worker.driver.sysbench import driver as sysbench

    system = tmp_path / "system"
    system.mkdir()
    for name in ("caching_sha2_password.so", "client_ed25519.so", "dialog.so", "mysql_clear_password.so"):
        (system / name).write_text("")
    (tmp_path / "run").mkdir()
    out = sysbench.safe_plugin_dir(str(tmp_path / "run"), (str(tmp_path / "absent"), str(system)))
    assert sorted(os.listdir(out)) == ["caching_sha2_password.so", "client_ed25519.so"]
    assert sysbench.sysbench_env(ConnectParams(), out)["MARIADB_PLUGIN_DIR"] == out
    allowed = sysbench.sysbench_env(ConnectParams(allow_cleartext=True), out)
    assert allowed.get("MARIADB_PLUGIN_DIR") == os.environ.get("MARIADB_PLUGIN_DIR")
