"""Managed servers boxed: only listed options with bounded values, exact names on the command
line with the worker's own last, sizes against the worker's host, a scrubbed environment,
secure_file_priv and a client account without FILE; recorded campaigns still decode."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from services.common.spec import server_allowed as sa
from services.common.spec import server_options as so
from services.common.spec.loading import SpecError, parse_spec
from services.common.spec.stored import read_stored_spec
from services.common.spec.targets import ManagedTarget
from services.worker.target import flavours
from services.worker.target.managed_server import ManagedServer
from services.worker.target.managed_template import ServerBuild
from services.worker.target.server_env import SERVER_PATH, server_environment

ROOT = Path(__file__).resolve().parents[2]
SPEC = """\
name: box
targets:
  - {kind: managed, name: m, options: %s}
workloads: [oltp_point_select]
threads: [1]
duration: 1s
"""


def refusal(options: str) -> str:
    with pytest.raises(SpecError) as info:
        parse_spec(SPEC % options, "spec.yaml")
    return str(info.value)


@pytest.mark.parametrize("options, needle", [
    ("{key_buffer: 8M}", "options.key_buffer: an abbreviation (of key_buffer_size)"),
    ("{loose-key-buf: 8M}", "options.loose-key-buf: an abbreviation (of key_buffer_size)"),
    ("{innodb_buffer_pool: 1G}", "an abbreviation (of innodb_buffer_pool_chunk_size, innodb_buffer_pool_instances"),
    ("{feedback_url: 'http:evil.example'}", "options.feedback_url: not allowed: it makes the server call out to a URL"),
    ("{general_log: true}", "options.general_log: not allowed: it writes every statement to a file"),
    ("{extra_port: 3307}", "options.extra_port: set by the worker"),
    ("{maximum-key-buffer-size: 1G}", "options.maximum-key-buffer-size: a maximum- option"),
    ("{innodb_buffer_pool_size: 2T}", "options.innodb_buffer_pool_size: must be from 2M to 1T"),
    ("{sort_buffer_size: 5G}", "options.sort_buffer_size: must be from 1K to 4G"),
    ("{max_connections: 1000000}", "options.max_connections: must be from 1 to 100000"),
    ("{thread_handling: no-such-handling}", "options.thread_handling: takes one of one-thread-per-connection"),
    ("{skip-performance-schema: 'OFF'}", "options.skip-performance-schema: write performance_schema: false"),
    ("{key_cache_segmnts: 8}", "did you mean key_cache_segments?"),
    ("{performance_schema: false, skip-performance-schema: null}", "same option as performance_schema"),
])
def test_an_option_off_the_list_or_out_of_bounds_is_refused_naming_it(options, needle):
    """Abbreviations, options that call out, open ports or log without bound, and sizes past
    their bound are refused by validation, each naming the option as the spec wrote it."""
    assert needle in refusal(options)


def test_the_shipped_examples_and_studies_validate():
    """Every option the examples and studies set is on the list, within its bounds."""
    files = sorted((ROOT / "examples").glob("**/*.yaml"))
    assert len(files) >= 10
    for f in files:
        parse_spec(f.read_text(), str(f))


def test_prefixes_resolve_to_full_names_and_only_those_reach_the_server():
    """`skip-`/`loose-` forms become the full name with its value: the server never parses a prefix."""
    options = {"skip-performance-schema": None, "loose-key-buffer-size": "8M", "skip_name_resolve": True}
    assert so.canonical(options) == {"performance_schema": False, "key_buffer_size": "8M", "skip_name_resolve": True}
    assert so.argv(options) == ["--performance_schema=OFF", "--key_buffer_size=8M", "--skip_name_resolve=ON"]


def _server(options: dict, exact: bool = True) -> ManagedServer:
    target = ManagedTarget(kind="managed", name="m", options=options)
    build = ServerBuild("system", Path("/usr/sbin/mariadbd"), None, "10.11.19-MariaDB", "ab")
    return ManagedServer(target=target, key="k", build=build, dir=Path("/tmp/x"), port=3307, password="pw",
                         server_cpus=[0], client_cpus=[1], exact_names=exact)


def test_the_command_line_takes_exact_names_and_ends_with_the_workers_own_options():
    """--skip-getopt-prefix-matching right after --no-defaults, then the spec's options, then the
    worker's datadir, port, socket, secure_file_priv and tmpdir, so a repeat of one of them loses."""
    argv = _server({"key_buffer_size": "8M"}).argv()
    assert argv[:3] == ["/usr/sbin/mariadbd", "--no-defaults", "--skip-getopt-prefix-matching"]
    spec_at = argv.index("--key_buffer_size=8M")
    for own in ("--datadir=", "--port=", "--socket=", "--bind-address=", "--secure-file-priv=/tmp/x/no-files",
                "--tmpdir=/tmp/x/tmp"):
        assert any(a.startswith(own) for a in argv[spec_at + 1:]), own
    assert "--skip-getopt-prefix-matching" not in _server({}, exact=False).argv()


def test_the_exact_names_switch_is_used_only_where_the_build_lists_it():
    help_text = "  --getopt-prefix-matching \n  --key-buffer-size=#\n"
    assert so.exact_names_args(so.parse_help(help_text)) == ["--skip-getopt-prefix-matching"]
    assert so.exact_names_args(so.parse_help("  --key-buffer-size=#\n")) == []


def test_a_managed_server_gets_none_of_the_workers_environment():
    """No password variable, setting or PATH of the worker's: a fixed PATH, the time zone and
    locale, and the allocator's LD_PRELOAD."""
    worker_env = {"BENCHFLEET_DB_PASSWORD": "s3cret", "PW_TARGET": "s3cret", "PATH": "/home/evil/bin",
                  "TMPDIR": "/root", "MYSQL_HOME": "/root", "LD_PRELOAD": "/tmp/evil.so", "TZ": "UTC"}
    env = server_environment("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", worker_env)
    assert env == {"PATH": SERVER_PATH, "TZ": "UTC", "LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"}
    assert "s3cret" not in json.dumps(server_environment("", worker_env))


def test_the_client_account_may_not_read_or_write_files():
    sql = flavours.client_user_sql(flavours.flavour_of("10.11.19-MariaDB"), "benchfleet", "pw", ("localhost",))
    assert "REVOKE FILE ON *.* FROM 'benchfleet'@'localhost';" in sql
    assert sql.index("GRANT ALL") < sql.index("REVOKE FILE")


def test_sizes_count_against_the_workers_memory_and_disk():
    """The server's buffers plus per-connection buffers times max_connections against MemTotal;
    log files against the free disk; each problem names an option that sets it."""
    options = so.canonical({"innodb_buffer_pool_size": "6G", "sort_buffer_size": "4M", "max_connections": 1000,
                            "innodb_log_file_size": "20G"})
    assert sa.memory_needed(options) == 6 * sa.GiB + 1000 * 4 * sa.MiB
    problems = sa.host_problems(options, memory=8 * sa.GiB, disk_free=100 * sa.GiB)
    assert [p[0] for p in problems] == ["innodb_buffer_pool_size"] and "8,192 MiB" in problems[0][1]
    problems = sa.host_problems(options, memory=64 * sa.GiB, disk_free=10 * sa.GiB)
    assert problems == [("innodb_log_file_size", "innodb_log_file_size take 20,480 MiB, more than is free where "
                                                 "this worker keeps the datadirs (10,240 MiB)")]
    assert sa.host_problems(so.canonical({"key_buffer_size": "64M"}), memory=8 * sa.GiB, disk_free=sa.GiB) == []


def test_a_recorded_campaign_with_options_off_the_list_still_decodes():
    """Reports and exports of campaigns recorded before the list read their specs back."""
    doc = {"name": "old", "targets": [{"kind": "managed", "name": "m", "options": {
        "general_log": True, "server_audit_secret_token": "hidden"}}],
           "workloads": ["oltp_point_select"], "threads": [1], "duration": 1.0}
    spec = read_stored_spec(json.dumps(doc), "old-1")
    assert spec.targets[0].options["general_log"] is True
    assert spec.public().targets[0].options["general_log"] is True


def test_every_allowed_option_is_listed_in_the_docs():
    text = (ROOT / "docs" / "specs.md").read_text()
    missing = [name for name in sa.ALLOWED if not re.search(rf"`{name}`", text)]
    assert not missing, missing
