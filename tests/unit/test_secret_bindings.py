"""A target password goes only to the server its operator bound it to: the allow-list's
``SOURCE@HOST[:PORT]`` entries, the earlier unbound form (this worker's loopback only), and the
field a refusal names."""

from __future__ import annotations

import os

import pytest

from services.common.errors import SettingsError, TargetError
from services.worker.target import destinations
from services.worker.target.destinations import Destination, Where
from services.worker.target.secret_policy import SecretPolicy, resolve_password


@pytest.mark.parametrize("text, expected", [
    ("db1.example", Destination("db1.example", 3306)),
    ("DB1.Example:3307", Destination("db1.example", 3307)),
    ("db1.example:*", Destination("db1.example", None)),
    ("10.0.0.5:3306", Destination("10.0.0.5", 3306)),
    ("[2001:db8::5]:3306", Destination("2001:db8::5", 3306)),
    ("2001:db8:0::5", Destination("2001:db8::5", 3306)),
    ("/run/mysqld/mysqld.sock", Destination(None, None, socket="/run/mysqld/mysqld.sock")),
])
def test_a_binding_names_a_host_and_port_or_a_socket(text, expected):
    """Without a port a binding means 3306, `:*` any port; IPv6 addresses compare in short form."""
    assert destinations.parse(text) == expected


@pytest.mark.parametrize("text, why", [
    ("db1.example:0", "1..65535"), ("db1.example:http", "1..65535"), ("db 1", "not a host"),
    ("[::1", "[ADDRESS]"), ("[nothost]:3306", "not an IPv6 address"), ("/run/my sock", "not a socket path"),
    ("", "not a host"),
])
def test_a_binding_that_names_nothing_usable_is_refused(text, why):
    with pytest.raises(ValueError, match=why):
        destinations.parse(text)


ENV = {"BENCHFLEET_SECRETS": "/nonexistent/secrets", "BENCHFLEET_MANAGED_DIR": "/nonexistent/managed",
       "DB1_PW": "pw-one", "LOCAL_PW": "pw-local"}


def policy(env_allow: str = "", dirs_allow: str = "") -> SecretPolicy:
    return SecretPolicy.from_environ({**ENV, "BENCHFLEET_TARGET_PASSWORD_ENV": env_allow,
                                      "BENCHFLEET_TARGET_PASSWORD_DIRS": dirs_allow})


def resolve(p: SecretPolicy, where: Where, env: str | None = "DB1_PW", file: str | None = None) -> str:
    return resolve_password("targets.a", env, file, ENV, p, where)


def test_a_bound_password_goes_to_its_server_and_nowhere_else():
    """DB1_PW@db1.example:3306 reaches db1.example:3306 (any case); another host fails naming
    targets.a.host, another port targets.a.port, a socket targets.a.socket: before any connection."""
    p = policy("DB1_PW@db1.example:3306, LOCAL_PW@127.0.0.1:3306")
    assert resolve(p, Where("db1.example", 3306)) == "pw-one"
    assert resolve(p, Where("DB1.EXAMPLE", 3306)) == "pw-one"
    for where, field in ((Where("127.0.0.2", 3306), "host"), (Where("db1.example.attacker.example", 3306), "host"),
                         (Where("db1.example", 3307), "port"), (Where("db1.example", 3306, "/tmp/x.sock"), "socket")):
        with pytest.raises(TargetError) as e:
            resolve(p, where)
        assert e.value.field == f"targets.a.{field}", e.value
        assert str(where) in e.value.message and "db1.example:3306" in e.value.message, e.value
    with pytest.raises(TargetError, match="binds it to 127.0.0.1:3306"):
        resolve(p, Where("db1.example", 3306), env="LOCAL_PW")


def test_a_name_may_be_bound_to_several_servers_and_a_prefix_to_one():
    """One entry per destination; a prefix entry binds every variable it names."""
    p = policy("DB1_PW@db1.example:3306,DB1_PW@db2.example:*,BENCH_*@10.0.0.9")
    assert resolve(p, Where("db2.example", 4406)) == "pw-one"
    env = {**ENV, "BENCH_A": "a"}
    assert resolve_password("targets.a", "BENCH_A", None, env, p, Where("10.0.0.9", 3306)) == "a"
    with pytest.raises(TargetError, match="targets.a.port"):
        resolve_password("targets.a", "BENCH_A", None, env, p, Where("10.0.0.9", 3307))


def test_the_unbound_form_of_earlier_versions_sends_to_this_hosts_loopback_only():
    """`DB1_PW` (no @) keeps working for 127.0.0.0/8, localhost, ::1 and sockets; a remote host
    fails naming targets.a.host and saying the entry names no host, and the policy lists it as
    unbound (the worker warns at start)."""
    p = policy("DB1_PW")
    for where in (Where("127.0.0.1", 3306), Where("localhost", 3307), Where("::1", 3306),
                  Where("127.0.0.1", 3306, "/run/mysqld/mysqld.sock")):
        assert resolve(p, where) == "pw-one"
    with pytest.raises(TargetError) as e:
        resolve(p, Where("db1.example", 3306))
    assert e.value.field == "targets.a.host" and "names no host" in e.value.message, e.value
    assert p.unbound == ["DB1_PW"]
    assert policy("DB1_PW@db1.example").unbound == []


def test_password_directories_are_bound_the_same_way(tmp_path):
    """A file of DIR@HOST:PORT goes to that server only; the earlier colon-separated form still
    splits on colons, bound entries on commas only (a port has one)."""
    one, two = tmp_path / "one", tmp_path / "two"
    for d in (one, two):
        d.mkdir()
        (d / "pw").write_text("from-" + d.name + "\n")
    p = policy(dirs_allow=f"{one}@db1.example:3306,{two}@[::1]:3307")
    assert resolve(p, Where("db1.example", 3306), env=None, file=str(one / "pw")) == "from-one"
    assert resolve(p, Where("::1", 3307), env=None, file=str(two / "pw")) == "from-two"
    with pytest.raises(TargetError) as e:
        resolve(p, Where("db2.example", 3306), env=None, file=str(one / "pw"))
    assert e.value.field == "targets.a.host" and e.value.message.startswith("db2.example:3306 is not where "
                                                                             f"{one / 'pw'} may be sent")
    legacy = policy(dirs_allow=f"{one}:{two}")
    assert [str(r) for r in legacy.dir_rules] == [os.path.realpath(one), os.path.realpath(two)]


@pytest.mark.parametrize("var, value, why", [
    ("BENCHFLEET_TARGET_PASSWORD_ENV", "DB1_PW@db1.example:99999", "1..65535"),
    ("BENCHFLEET_TARGET_PASSWORD_ENV", "DB1_PW@", "not a host"),
    ("BENCHFLEET_TARGET_PASSWORD_DIRS", "/srv/pw@db 1", "not a host"),
])
def test_a_binding_the_worker_cannot_use_stops_it_at_start(var, value, why):
    """A malformed binding is a settings error naming the variable, not a per-run surprise."""
    with pytest.raises(SettingsError) as e:
        SecretPolicy.from_environ({**ENV, var: value})
    assert str(e.value).startswith(f"{var}: ") and why in str(e.value), e.value


def test_the_start_up_log_shows_each_entry_with_its_server():
    assert policy("DB1_PW@db1.example:3306,L*").describe()["allowed_env"] == ["DB1_PW@db1.example:3306", "L*"]


def test_a_socket_binding_and_the_targets_socket_compare_with_their_links_resolved(tmp_path):
    """The socket directory check resolves links, so the binding does too: a password bound to a socket
    through a linked directory reaches it however the spec spells it, and a spelling that resolves to
    another server's socket is refused naming targets.a.socket."""
    from services.common.spec.targets import DsnTarget
    from services.worker.target.account_policy import AccountPolicy
    from services.worker.target.dsn import connect_params
    real, other = tmp_path / "run", tmp_path / "other"
    real.mkdir()
    other.mkdir()
    (tmp_path / "link").symlink_to(real)
    (tmp_path / "link2").symlink_to(other)
    env = {**ENV, "BENCHFLEET_TARGET_SOCKET_DIRS": f"{real},{other}",
           "BENCHFLEET_TARGET_PASSWORD_ENV": f"DB1_PW@{tmp_path}/link/mysqld.sock"}
    p, accounts = SecretPolicy.from_environ(env), AccountPolicy.from_environ(env)

    def params(socket: str):
        return connect_params(DsnTarget(name="a", user="bench", socket=socket, password_env="DB1_PW"), env, p, accounts)

    assert params(str(real / "mysqld.sock")).password == "pw-one"
    assert params(str(tmp_path / "link" / "mysqld.sock")).password == "pw-one"
    with pytest.raises(TargetError) as e:
        params(str(tmp_path / "link2" / "mysqld.sock"))
    assert e.value.field == "targets.a.socket" and f"{other}/mysqld.sock is not where" in e.value.message, e.value
