"""Least privilege in the pure parts: what each broker role declares, what settings and reports
show of secrets, which server options a spec may set, and the TLS a target gets by default."""

from __future__ import annotations

import pytest

from services.common.spec import server_binary
from services.common.spec import server_options
from services.common.bus import topology
from services.common.bus.rabbitmq import Names
from services.common.config import Settings, settings_from
from services.common.errors import SettingsError
from services.common.spec.targets import DsnTarget, ManagedTarget
from services.common.spec.loading import parse_spec
from services.common.bus.topology import Binding, Role

N = Names("bf")


def bindings(role: Role) -> set[tuple[str, str]]:
    return {(s.queue, s.exchange) for s in topology.steps(N, ("p",), role, {}) if isinstance(s, Binding)}


def test_only_the_publisher_of_runs_binds_runs_and_a_worker_binds_nothing():
    """Binding a queue needs write on it: the scheduler alone binds the runs queues, the collector
    binds the results queue it consumes, and a worker binds nothing shared (it only publishes)."""
    assert ("bf.runs.p", "bf.runs") in bindings(Role.SCHEDULER)
    assert bindings(Role.WORKER) == set()
    assert bindings(Role.COLLECTOR) == {("bf.dead", "bf.dead"), ("bf.dead.watch", "bf.dead"),
                                        ("bf.results", "bf.results.x")}
    assert not any("results" in q for q, _ in bindings(Role.SCHEDULER))
    assert bindings(Role.ALL) == bindings(Role.SCHEDULER) | bindings(Role.WORKER) | bindings(Role.COLLECTOR)
    # Every role still has the queues it consumes; the collector declares no runs queue (it
    # only reports their depth), so its user needs no grant that could take or purge runs.
    queues = {s.name for s in topology.steps(N, ("p",), Role.COLLECTOR, {}) if isinstance(s, topology.Queue)}
    assert {"bf.results", "bf.dead", "bf.dead.watch"} == queues
    # A worker needs only what the collector declares, so it announces itself before the first
    # submit; its runs queue (the scheduler's) may come later: it finds it when it consumes.
    worker = topology.steps(N, ("p",), Role.WORKER, {})
    assert {s.name for s in worker} == {"bf.dead", "bf.results.x", "bf.results", "bf.runs.p"}
    assert [s.name for s in worker if isinstance(s, topology.Queue) and s.optional] == ["bf.runs.p"]


def test_results_are_published_to_an_exchange_named_apart_from_the_results_queue():
    """Permissions are granted by name: the worker may publish results without any grant on the
    name of the queue that holds them."""
    assert N.results_exchange == "bf.results.x" != N.results
    worker = topology.steps(N, ("p",), Role.WORKER, {})
    assert topology.Exchange("bf.results.x", "fanout") in worker
    assert not any(isinstance(s, topology.Exchange) and s.name == "bf.results" for s in worker)


def test_no_declare_deletes_the_old_results_exchange_only_the_explicit_retire_step_does():
    """Upgrading, workers not yet upgraded publish to the exchange of earlier versions (the queue's
    name): no role's declare deletes it; the collector binds the new one, and the retire step
    (`collector retire-old-exchange`) is what deletes the old one."""
    for role in Role:
        assert not any(isinstance(s, topology.RetiredExchange) for s in topology.steps(N, ("p",), role, {}))
    assert Binding("bf.results", "bf.results.x") in topology.steps(N, ("p",), Role.COLLECTOR, {})
    assert topology.retired(N) == [topology.RetiredExchange("bf.results")]


def test_settings_never_show_a_password():
    """repr (tracebacks, debug logs) hides the results DB's password and the broker's in its URL."""
    s = Settings(db_password="db-secret-1", amqp_url="amqp://u:amqp-secret-2@h:5672/v")
    text = repr(s) + str(s)
    assert "db-secret-1" not in text and "amqp-secret-2" not in text
    assert "amqp://u:***@h:5672/v" in text and "db_password='***'" in text


def test_an_unreadable_password_file_is_a_usage_error_naming_the_setting(tmp_path):
    with pytest.raises(SettingsError, match="BENCHFLEET_DB_PASSWORD_FILE: cannot read"):
        settings_from(None, env={"BENCHFLEET_DB_PASSWORD_FILE": str(tmp_path / "missing")})


def test_reports_get_the_spec_without_where_passwords_are_kept():
    spec = parse_spec("name: r\ntargets: [{name: a, user: bench, database: d, password_env: PW}, "
                      "{name: b, user: bench, database: e, password_file: /x/pw}]\nworkloads: [oltp_point_select]\n"
                      "threads: [1]\nduration: 1s\n")
    text = str(spec.public_dump())
    assert "password" not in text and "PW" not in text and "/x/pw" not in text and "'a'" in text


@pytest.mark.parametrize("name", ["plugin_load_add", "plugin-dir", "loose-plugin-load", "enable-init-file",
                                  "skip-grant-tables", "maximum-plugin-maturity", "general_log_file",
                                  "innodb_undo_directory", "innodb_tmpdir", "aria_log_dir_path", "log_bin",
                                  "wsrep_provider", "ssl_key", "secure_file_priv", "debug", "language"])
def test_options_that_load_code_or_name_paths_are_reserved(name):
    assert server_options.name_problem(name) is not None


@pytest.mark.parametrize("name", ["key_buffer_size", "key_cache_segments", "thread_handling", "thread_pool_size",
                                  "query_cache_type", "innodb_adaptive_hash_index", "innodb_file_per_table",
                                  "skip_name_resolve", "performance_schema", "innodb_buffer_pool_size"])
def test_tuning_options_stay_allowed(name):
    assert server_options.name_problem(name) is None


def test_option_checking_never_asks_a_binary_about_reserved_options(monkeypatch, tmp_path):
    """A reserved option is refused without running the target's binary at all."""
    def refuse(*a, **k):
        raise AssertionError("a binary was run")

    monkeypatch.setattr(server_binary.subprocess, "run", refuse)
    target = ManagedTarget.model_construct(kind="managed", name="m", options={"plugin_load_add": "x.so"})
    assert server_binary.option_errors(target, tmp_path / "mariadbd")[0][0] == "plugin_load_add"


@pytest.mark.parametrize("fields, mode", [
    ({"host": "db.example.com", "password_env": "PW"}, "verify"),
    ({"host": "db.example.com"}, "preferred"),
    ({"host": "127.0.0.1", "password_env": "PW"}, "preferred"),
    ({"host": "localhost", "password_file": "/pw"}, "preferred"),
    ({"host": "db.example.com", "socket": "/run/mysqld/mysqld.sock", "password_env": "PW"}, "preferred"),
    ({"host": "db.example.com", "password_env": "PW", "tls": "preferred"}, "preferred"),
    ({"host": "db.example.com", "password_env": "PW", "ssl_disabled": True}, "disabled"),
    ({"host": "127.0.0.1", "ssl_ca": "/ca.pem"}, "verify"),
    # Only real loopback addresses and localhost stay on the machine; a name that begins like one
    # is resolved by DNS, anywhere.
    ({"host": "127.0.0.1.evil.example", "password_env": "PW"}, "verify"),
    ({"host": "127.attacker.example", "password_env": "PW"}, "verify"),
    ({"host": "127.5.5.5", "password_env": "PW"}, "preferred"),
    ({"host": "LocalHost", "password_env": "PW"}, "preferred"),
    ({"host": "::1", "password_env": "PW"}, "preferred"),
    ({"host": "::ffff:127.0.0.1", "password_env": "PW"}, "verify"),
])
def test_tls_is_verified_by_default_when_a_password_crosses_the_network(fields, mode):
    assert DsnTarget(name="a", user="bench", **fields).tls_mode == mode


def test_markdown_reports_show_user_text_as_text():
    """A description's HTML, links, emphasis and table pipes are escaped in Markdown reports."""
    from services.reporting.options import ReportOptions
    from services.reporting.render.formats import md_text
    from services.reporting.report import analyse, render_markdown_lines
    from tests.unit.test_report_formats import POOL_RUNS, campaign

    out = md_text("<img src=x onerror=alert(1)> [click](http://evil) *bold* a|b")
    assert "<" not in out.replace("\\<", "") and "[" not in out.replace("\\[", "")
    assert "\\*bold\\*" in out and "a\\|b" in out
    assert md_text("# not a heading").startswith("\\#") and md_text("key_buffer_size=8M") == "key_buffer_size=8M"
    data = campaign(POOL_RUNS)
    data.settings["description"] = "<script>alert(1)</script>"
    lines = render_markdown_lines(analyse(data, ReportOptions()))
    assert "\\<script\\>alert(1)\\</script\\>" in lines and "<script>" not in "\n".join(lines)
