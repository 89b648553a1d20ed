"""What a worker refuses even when a run message asks for it: a password the operator did not
allow (the fleet's own above all), a reserved server option. The run fails with a reason that
names the field, and nothing is connected, started or sent."""

from __future__ import annotations

import json
import os
import time

import pytest

from services.common.errors import DecodeError
from services.common.messages.runs import Cell, RunSpec
from services.common.messages.codec import decode
from services.common.spec.targets import DsnTarget, ManagedTarget
from services.common.spec.workloads import DataShape, WorkloadSpec
from services.worker import cli as worker_cli
from services.worker import prepare, runner
from services.worker.target import dsn, managed

SECRET = "fleet-broker-password-0xC0FFEE"


@pytest.fixture
def nothing_happens(monkeypatch):
    """Any connection, process start or server start fails the test."""

    def refuse(*a, **k):
        raise AssertionError(f"the worker connected or started something: {a[:1]}")

    monkeypatch.setattr(dsn.mysql.connector, "connect", refuse)
    monkeypatch.setattr(prepare, "connect", refuse)
    monkeypatch.setattr(managed.subprocess, "Popen", refuse)
    monkeypatch.setattr(managed.subprocess, "run", refuse)
    from services.common.spec import server_binary

    monkeypatch.setattr(server_binary.subprocess, "run", refuse)


@pytest.fixture
def fleet_env(monkeypatch, tmp_path):
    """A worker's environment: the fleet's secrets and settings, and what the operator allows."""
    secrets = tmp_path / "secrets"
    allowed = tmp_path / "target-passwords"
    for d in (secrets, allowed):
        d.mkdir()
    (secrets / "amqp_password").write_text(SECRET)
    (allowed / "bench").write_text("bench-password\n")
    for k in [k for k in os.environ if k.startswith("BENCHFLEET_TARGET_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("BENCHFLEET_SECRETS", str(secrets))
    monkeypatch.setenv("BENCHFLEET_MANAGED_DIR", str(tmp_path / "managed"))
    monkeypatch.setenv("BENCHFLEET_AMQP_PASSWORD", SECRET)
    monkeypatch.setenv("BENCHFLEET_AMQP_PASSWORD_FILE", str(secrets / "amqp_password"))
    monkeypatch.setenv("BENCH_PW", "bench-password")
    monkeypatch.setenv("BENCHFLEET_TARGET_PASSWORD_ENV", "BENCH_*@db.example.com:3306,BENCH_*@127.0.0.1")
    monkeypatch.setenv("BENCHFLEET_TARGET_PASSWORD_DIRS", f"{allowed}@db.example.com:3306")
    return tmp_path


def run_of(target) -> RunSpec:
    """A run message for ``target``, as a worker decodes it (built without re-checking the target)."""
    return RunSpec.model_construct(run_id="c.a.w.t1.r1", campaign_id="c", campaign_name="c", seq=0, total_runs=1,
                   cell=Cell(target=target.name, workload="oltp_point_select", threads=1), repetition=1,
                   target=target, workload=WorkloadSpec(name="oltp_point_select"), data=DataShape(),
                   duration=1.0, warmup=0.0, seed=1, published_at=time.time())


def remote(**fields) -> DsnTarget:
    """A target as a run message carries it, built without the spec's checks: the worker must
    refuse on its own what a scheduler (an older one, or a forged message) let through."""
    base = dict(kind="dsn", name="a", host="db.example.com", port=3306, user="bench", database="sbtest")
    return DsnTarget.model_construct(**{**base, **fields})


@pytest.mark.parametrize("fields, field, reason", [
    ({"password_env": "BENCHFLEET_AMQP_PASSWORD"}, "targets.a.password_env", "one of the fleet's own variables"),
    ({"password_env": "HOME"}, "targets.a.password_env", "BENCHFLEET_TARGET_PASSWORD_ENV: BENCH_*"),
    ({"password_file": "${BENCHFLEET_SECRETS}/amqp_password"}, "targets.a.password_file", "the fleet's own secrets"),
    ({"password_file": "${BENCHFLEET_AMQP_PASSWORD}"}, "targets.a.password_file", "not in a directory this worker"),
    ({"password_file": "/etc/shadow"}, "targets.a.password_file", "not in a directory this worker"),
])
def test_a_forbidden_password_fails_the_run_before_anything_connects(fleet_env, nothing_happens, fields, field, reason):
    """The run fails naming the spec field and why; the fleet's secret is in no part of the result."""
    res = runner.execute(run_of(remote(**fields)), runner.WorkerIdentity("w1"))
    assert res.status == "failed" and res.error.startswith(f"{field}: "), res.error
    assert reason in res.error, res.error
    assert SECRET not in res.encode().decode()


def test_a_symlink_into_the_secrets_is_refused(fleet_env, nothing_happens):
    """A link in an allowed directory that points at the fleet's secrets is resolved and refused."""
    (fleet_env / "target-passwords" / "sneaky").symlink_to(fleet_env / "secrets" / "amqp_password")
    res = runner.execute(run_of(remote(password_file=str(fleet_env / "target-passwords" / "sneaky"))),
                         runner.WorkerIdentity("w1"))
    assert res.status == "failed" and "the fleet's own secrets" in res.error, res.error


def test_nothing_is_allowed_until_the_operator_says_so(fleet_env, monkeypatch, nothing_happens):
    """Without BENCHFLEET_TARGET_PASSWORD_ENV/_DIRS a worker uses no password a spec names."""
    monkeypatch.delenv("BENCHFLEET_TARGET_PASSWORD_ENV")
    monkeypatch.delenv("BENCHFLEET_TARGET_PASSWORD_DIRS")
    for fields in ({"password_env": "BENCH_PW"}, {"password_file": str(fleet_env / "target-passwords" / "bench")}):
        res = runner.execute(run_of(remote(**fields)), runner.WorkerIdentity("w1"))
        assert res.status == "failed" and "none configured" in res.error, res.error


def test_allowed_passwords_are_used_with_tls_verified_for_remote_hosts(fleet_env):
    """What the operator allows is read; a password sent to a remote host gets verified TLS,
    a local one the server's TLS as offered, and tls: disabled is the explicit opt-out."""
    by_env = dsn.connector_kwargs(dsn.connect_params(remote(password_env="BENCH_PW")))
    in_file = str(fleet_env / "target-passwords" / "bench")
    by_file = dsn.connector_kwargs(dsn.connect_params(remote(password_file=in_file)))
    assert by_env["password"] == by_file["password"] == "bench-password"
    assert by_env["ssl_verify_cert"] and by_env["ssl_verify_identity"] and by_env["ssl_ca"]
    local = dsn.connector_kwargs(dsn.connect_params(DsnTarget(name="a", user="bench", host="127.0.0.1", password_env="BENCH_PW",
                                                             database="d")))
    assert "ssl_verify_cert" not in local and "ssl_disabled" not in local
    opt_out = dsn.connector_kwargs(dsn.connect_params(remote(password_env="BENCH_PW", tls="disabled")))
    assert opt_out["ssl_disabled"] and "ssl_verify_cert" not in opt_out


@pytest.mark.parametrize("fields, field, reason", [
    ({"host": "127.0.0.2", "password_env": "BENCH_PW"}, "targets.a.host", "127.0.0.2:3306 is not where BENCH_PW"),
    ({"port": 3307, "password_env": "BENCH_PW"}, "targets.a.port", "db.example.com:3307 is not where BENCH_PW"),
    ({"host": "db2.example.com", "password_file": "${BENCHFLEET_TARGET_SECRETS}/bench"}, "targets.a.host",
     "binds it to db.example.com:3306"),
    ({"socket": "/run/mysqld/mysqld.sock"}, "targets.a.socket", "BENCHFLEET_TARGET_SOCKET_DIRS: none configured"),
])
def test_a_password_or_socket_aimed_elsewhere_fails_the_run_before_anything_connects(
        fleet_env, nothing_happens, monkeypatch, fields, field, reason):
    """An allowed password sent to a server it is not bound to, or a socket outside the
    operator's directories, fails the run naming the field; nothing is connected."""
    monkeypatch.setenv("BENCHFLEET_TARGET_SECRETS", str(fleet_env / "target-passwords"))
    res = runner.execute(run_of(remote(**fields)), runner.WorkerIdentity("w1"))
    assert res.status == "failed" and res.error.startswith(f"{field}: "), res.error
    assert reason in res.error, res.error
    assert "bench-password" not in res.encode().decode()


class FakeCursor:
    """SHOW GRANTS as MariaDB answers it for ``current``."""

    def __init__(self, current: str, lines: list[str]):
        self.rows: list[tuple] = []
        self.current, self.lines = current, lines

    def execute(self, sql, params=None):
        if self.lines is None and sql.startswith("SHOW GRANTS"):  # a server without grant tables
            raise dsn.mysql.connector.Error(msg="--skip-grant-tables", errno=1290)
        self.rows = [(self.current,)] if sql.startswith("SELECT CURRENT_USER") else [(line,) for line in self.lines]

    def fetchone(self):
        return self.rows[0]

    def fetchall(self):
        return self.rows


class FakeConnection:
    def __init__(self, cursor: FakeCursor):
        self._cursor = cursor

    def cursor(self):
        return self._cursor

    def close(self):
        pass


ROOT_GRANTS = ["GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION"]


@pytest.mark.parametrize("current, lines, refused", [
    ("root@localhost", ROOT_GRANTS, "it is root"),
    ("bench@%", ["GRANT USAGE ON *.* TO `bench`@`%`", "GRANT ALL PRIVILEGES ON `sbtest`.* TO `bench`@`%`"],
     "ALL PRIVILEGES ON `sbtest`"),
    ("bench@%", ["GRANT FILE ON *.* TO `bench`@`%`"], "FILE ON *.*"),
])
def test_root_or_an_over_privileged_account_fails_the_run_before_prepare(fleet_env, nothing_happens, monkeypatch,
                                                                       current, lines, refused):
    """The worker reads the account's grants on a connection of its own and refuses, naming
    targets.a.user, what it holds too much and the setting that would allow it; prepare never runs."""
    from services.worker.target import account_check

    monkeypatch.setattr(account_check, "connect", lambda *a, **k: FakeConnection(FakeCursor(current, lines)))
    target = DsnTarget(name="a", user=current.split("@")[0], host="127.0.0.1", database="sbtest")
    res = runner.execute(run_of(target), runner.WorkerIdentity("w1"))
    assert res.status == "failed" and res.error.startswith("targets.a.user: the account "), res.error
    assert refused in res.error and "BENCHFLEET_TARGET_PRIVILEGED_USERS" in res.error, res.error
    assert "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, LOCK TABLES ON `sbtest`.*" in res.error
    # Named by the operator, the same account passes the check (and reaches prepare, refused here).
    monkeypatch.setenv("BENCHFLEET_TARGET_PRIVILEGED_USERS", current.split("@")[0])
    with pytest.raises(AssertionError, match="connected or started"):
        runner.execute(run_of(target), runner.WorkerIdentity("w1"))


def test_a_server_without_grant_tables_is_used_only_as_an_account_the_operator_names(fleet_env, nothing_happens,
                                                                                      monkeypatch):
    """On a server started with --skip-grant-tables every account holds everything: refused
    naming targets.a.user, unless the operator lists the spec's user (a throwaway test server)."""
    from services.worker.target import account_check

    monkeypatch.setattr(account_check, "connect",
                        lambda *a, **k: FakeConnection(FakeCursor("skip-grants user@skip-grants host", None)))
    target = DsnTarget(name="a", user="root", host="127.0.0.1", database="sbtest")
    res = runner.execute(run_of(target), runner.WorkerIdentity("w1"))
    assert res.status == "failed" and res.error.startswith("targets.a.user: the server runs with --skip-grant-tables"), \
        res.error
    monkeypatch.setenv("BENCHFLEET_TARGET_PRIVILEGED_USERS", "root")
    with pytest.raises(AssertionError, match="connected or started"):
        runner.execute(run_of(target), runner.WorkerIdentity("w1"))


def test_the_results_db_is_refused_as_a_target_database(fleet_env, monkeypatch, nothing_happens):
    """A run message naming the results DB's database fails, whatever the scheduler let through."""
    monkeypatch.setenv("BENCHFLEET_DB_NAME", "results_here")
    res = runner.execute(run_of(DsnTarget(name="a", user="bench", database="results_here")), runner.WorkerIdentity("w1"))
    assert res.status == "failed" and res.error.startswith("targets.a.database: "), res.error


def test_a_run_message_with_a_reserved_option_is_not_decoded():
    """A message whose managed target sets plugin_load_add is refused naming the option."""
    body = json.loads(run_of(ManagedTarget(kind="managed", name="m", options={"key_buffer_size": "8M"})).encode())
    body["target"]["options"] = {"plugin_load_add": "evil.so"}
    with pytest.raises(DecodeError) as e:
        decode(json.dumps(body).encode(), expect=(RunSpec,))
    assert "plugin_load_add" in str(e.value) and "reserved" in str(e.value)


@pytest.mark.parametrize("options", [{"plugin_dir": "/tmp/evil", "plugin_load_add": "evil.so"},
                                     {"general_log_file": "/root/.bashrc"}, {"init_file": "/tmp/x.sql"}])
def test_a_reserved_option_that_got_through_starts_nothing(fleet_env, nothing_happens, tmp_path, options):
    """Even a target built without validation (an older scheduler): the worker checks again,
    before it runs any binary, and the run fails naming the option."""
    target = ManagedTarget.model_construct(kind="managed", name="m", options=options, build="x")
    servers = managed.ServerManager(base_dir=tmp_path / "managed")
    try:
        res = runner.execute(run_of(target), runner.WorkerIdentity("w1"), servers=servers)
    finally:
        servers.close()
    first = next(iter(options))
    assert res.status == "failed" and res.error.startswith(f"targets.m.options.{first}: reserved"), res.error
    assert not (tmp_path / "managed" / "templates").exists()


def test_a_run_naming_an_unregistered_build_starts_nothing(fleet_env, nothing_happens, tmp_path):
    """A build the worker's registry does not hold fails the run naming targets.NAME.build and the
    registered builds, before any binary runs or any template is made."""
    from services.worker.target.builds import Registry

    registry = Registry(tmp_path / "builds")
    target = ManagedTarget(kind="managed", name="m", build="mariadb-9.9.9")
    servers = managed.ServerManager(base_dir=tmp_path / "managed", builds=registry)
    try:
        res = runner.execute(run_of(target), runner.WorkerIdentity("w1"), servers=servers)
    finally:
        servers.close()
    assert res.status == "failed", res
    assert res.error.startswith("targets.m.build: build 'mariadb-9.9.9' is not registered on this worker"), res.error
    assert "worker builds add mariadb-9.9.9" in res.error
    assert not (tmp_path / "managed" / "templates").exists()


def test_a_worker_refuses_to_start_with_a_policy_naming_the_fleets_secrets(monkeypatch, tmp_path, capsys):
    """An operator allowing a BENCHFLEET_* variable or the secrets directory is told at start."""
    monkeypatch.setenv("BENCHFLEET_SECRETS", str(tmp_path))
    for var, value in (("BENCHFLEET_TARGET_PASSWORD_ENV", "BENCHFLEET_AMQP_PASSWORD"),
                       ("BENCHFLEET_TARGET_PASSWORD_DIRS", str(tmp_path))):
        monkeypatch.delenv("BENCHFLEET_TARGET_PASSWORD_ENV", raising=False)
        monkeypatch.delenv("BENCHFLEET_TARGET_PASSWORD_DIRS", raising=False)
        monkeypatch.setenv(var, value)
        assert worker_cli.main(["--max-runs", "0"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {var}: ") and "fleet's own" in err, err


def test_sysbench_is_refused_a_target_that_wants_verified_tls(fleet_env, nothing_happens, monkeypatch):
    """sysbench 1.0.20 cannot check a certificate: a run message asking for it with a remote
    password fails naming targets.a.tls, before prepare connects or sysbench starts."""
    from services.worker.driver.sysbench import driver as sysbench

    monkeypatch.setattr(sysbench.subprocess, "Popen", lambda *a, **k: pytest.fail("sysbench started"))
    for fields in ({"password_env": "BENCH_PW"}, {"password_env": "BENCH_PW", "tls": "verify"},
                   {"tls": "verify", "ssl_ca": "/etc/ssl/certs/ca-certificates.crt"}):
        run = run_of(remote(**fields)).model_copy(update={"driver": "sysbench"})
        res = runner.execute(run, runner.WorkerIdentity("w1"))
        assert res.status == "failed" and res.error.startswith("targets.a.tls: verify: driver sysbench"), res.error


def test_sysbench_never_sends_a_password_meant_for_verified_tls(monkeypatch):
    """Even called directly with parameters asking for verification, sysbench is not started."""
    from services.worker.driver.contract import ConnectParams, LoadError, LoadRequest
    from services.worker.driver.sysbench import driver as sysbench

    monkeypatch.setattr(sysbench.subprocess, "Popen", lambda *a, **k: pytest.fail("sysbench started"))
    params = ConnectParams(host="db.example.com", password="pw", ssl_ca="/ca.pem", ssl_verify_cert=True)
    with pytest.raises(LoadError, match="cannot check"):
        sysbench.run_sysbench(LoadRequest(params, WorkloadSpec(name="oltp_point_select"), DataShape(), 1, 0.0, 1.0, 1))


def test_a_worker_whose_client_library_would_send_clear_text_refuses_to_start(monkeypatch, tmp_path, capsys):
    """LIBMYSQL_ENABLE_CLEARTEXT_PLUGIN makes mysql.connector's library answer a clear-text auth
    switch: without BENCHFLEET_TARGET_ALLOW_CLEARTEXT the worker exits 2 naming both."""
    monkeypatch.setenv("BENCHFLEET_SECRETS", str(tmp_path))
    monkeypatch.delenv("BENCHFLEET_TARGET_ALLOW_CLEARTEXT", raising=False)
    monkeypatch.setenv("LIBMYSQL_ENABLE_CLEARTEXT_PLUGIN", "1")
    assert worker_cli.main(["--max-runs", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: LIBMYSQL_ENABLE_CLEARTEXT_PLUGIN is set") and "BENCHFLEET_TARGET_ALLOW_CLEARTEXT=1" in err, err
