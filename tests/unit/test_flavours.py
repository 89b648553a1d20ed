"""MariaDB and MySQL builds get their own initialisation and start options. No MySQL build can be
had on these machines, so the MySQL command lines are tested as generated."""

from __future__ import annotations

from pathlib import Path

from services.worker.target import flavours as f

D, SQL, ERR = Path("/m/t/data"), Path("/m/t/client.sql"), Path("/m/t/bootstrap.err")


def test_flavour_is_read_from_the_version():
    assert f.flavour_of("10.11.18-MariaDB-0+deb12u1") == f.Flavour("mariadb", (10, 11, 18))
    assert f.flavour_of("8.0.36") == f.Flavour("mysql", (8, 0, 36))
    assert f.flavour_of("5.7.44-log") == f.Flavour("mysql", (5, 7, 44))


def test_mysql_8_initialises_with_initialize_insecure_and_an_init_file():
    """One command: mysqld --initialize-insecure runs the client account's SQL from --init-file;
    the X plugin is off so two managed servers do not fight over port 33060."""
    fl = f.flavour_of("8.0.36")
    cmds = f.init_commands(fl, binary=Path("/b/bin/mysqld"), script=None, datadir=D, basedir="/b",
                           user="benchfleet-mysqld", init_args=["--innodb-page-size=8K"], sql_file=SQL, error_log=ERR)
    assert cmds == [["/b/bin/mysqld", "--no-defaults", "--basedir=/b", "--initialize-insecure", f"--datadir={D}",
                     f"--init-file={SQL}", f"--log-error={ERR}", "--user=benchfleet-mysqld", "--innodb-page-size=8K",
                     "--mysqlx=OFF"]]
    assert f.start_args(fl) == ["--mysqlx=OFF"]
    assert f.start_args(f.flavour_of("8.4.3")) == ["--mysqlx=OFF", "--mysql-native-password=ON"]
    assert f.start_args(f.flavour_of("5.7.44")) == []  # 5.7 has no X plugin option


def test_mysql_accounts_use_native_password_and_mariadb_flushes_first():
    """MySQL's account speaks mysql_native_password (Connector/C without TLS); MariaDB's bootstrap
    loads the grant tables before creating it."""
    my = f.client_user_sql(f.flavour_of("8.0.36"), "benchfleet", "pw", ("localhost",))
    assert my == ("CREATE USER 'benchfleet'@'localhost' IDENTIFIED WITH mysql_native_password BY 'pw';\n"
                  "GRANT ALL PRIVILEGES ON *.* TO 'benchfleet'@'localhost';\n"
                  "REVOKE FILE ON *.* FROM 'benchfleet'@'localhost';\n")
    maria = f.client_user_sql(f.flavour_of("10.11.19-MariaDB"), "benchfleet", "pw", ("localhost",))
    assert maria.startswith("FLUSH PRIVILEGES;\nCREATE USER 'benchfleet'@'localhost' IDENTIFIED BY 'pw';\n")


def test_mariadb_initialises_with_its_install_script_then_bootstrap():
    cmds = f.init_commands(f.flavour_of("10.11.19-MariaDB"), binary=Path("/b/sbin/mariadbd"),
                           script=Path("/b/bin/mariadb-install-db"), datadir=D, basedir=None, user=None, init_args=[],
                           sql_file=SQL, error_log=ERR)
    assert cmds == [["/b/bin/mariadb-install-db", "--no-defaults", f"--datadir={D}", "--skip-test-db"],
                    ["/b/sbin/mariadbd", "--no-defaults", "--bootstrap", f"--datadir={D}", f"--log-error={ERR}"]]
    assert f.start_args(f.flavour_of("10.11.19-MariaDB")) == []
