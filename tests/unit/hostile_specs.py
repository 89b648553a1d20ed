"""A corpus of hostile specs: each a file content and the field its refusal must name.

Used by tests/unit/test_hostile_specs.py (in-process through `scheduler validate`, and in one
subprocess measuring time and memory per case). ``field`` is the path printed between the
location and the message; "(spec)" for problems of the file as a whole.
"""

from __future__ import annotations

from dataclasses import dataclass

BASE_TARGET = "{name: a, user: bench, host: 127.0.0.1, database: sb_a}"


@dataclass(frozen=True)
class Case:
    name: str
    content: bytes
    field: str


def spec(*, name: str = "hostile", targets: str | None = None, workloads: str = "[oltp_point_select]",
         threads: str = "[1, 4]", duration: str = "5s", extra: str = "") -> str:
    """A valid spec with the given parts replaced (each a YAML flow value) and ``extra`` lines added."""
    return (f"name: {name}\n"
            f"targets:\n  - {targets or BASE_TARGET}\n"
            f"workloads: {workloads}\n"
            f"threads: {threads}\n"
            f"duration: {duration}\n"
            "warmup: 1s\n" + extra)


def target(**fields: str) -> str:
    """The base dsn target with ``fields`` (YAML flow values) set."""
    base = {"name": "a", "user": "bench", "host": "127.0.0.1", "database": "sb_a", **fields}
    return "{" + ", ".join(f"{k}: {v}" for k, v in base.items()) + "}"


def managed(options: str = "{key_buffer_size: 8M}", **fields: str) -> str:
    base = {"kind": "managed", "name": "m", "options": options, **fields}
    return "{" + ", ".join(f"{k}: {v}" for k, v in base.items()) + "}"


def option(name: str, value: str) -> str:
    """A managed target setting one server option."""
    return spec(targets=managed("{" + f"{name}: {value}" + "}"))


def wl_option(workload: str, name: str, value: str) -> str:
    return spec(workloads="[{name: " + workload + ", options: {" + f"{name}: {value}" + "}}]")


def _bomb(levels: int = 9) -> str:
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def _many_windows_runs() -> str:
    """5 workloads each with 1000 windows by thread count, 100,000 runs: every run order holds its workload."""
    windows = "{" + ", ".join(f"{t}: 1s" for t in range(1, 1001)) + "}"
    return ("name: x\ntargets: [{name: a, user: bench, database: sb}]\nworkloads:\n"
            + "".join(f"  - {{name: oltp_point_select, label: w{i}, duration_by_threads: {windows}}}\n" for i in range(5))
            + "threads: [" + ", ".join(str(i) for i in range(1, 1001)) + "]\nduration: 1s\nrepeat: 20\n")


def _many_options_runs() -> str:
    """10 managed targets each with 63 server options, 100,000 runs: each target goes out once."""
    from services.common.spec.server_allowed import ALLOWED

    opts = "{" + ", ".join(f"{k}: {int(r.lo)}" for k, r in ALLOWED.items() if r.kind == "int") + "}"
    return ("name: x\ntargets:\n" + "".join(f"  - {{kind: managed, name: m{i}, options: {opts}}}\n" for i in range(10))
            + "workloads: [oltp_point_select]\nthreads: [" + ", ".join(str(i) for i in range(1, 1001)) + "]\n"
            "duration: 1s\nrepeat: 10\n")


def _cases() -> list[tuple[str, str | bytes, str]]:
    deep_options = "\n".join("  " * (i + 3) + f"k{i}:" for i in range(40)) + " 1\n"
    many = ", ".join(str(i) for i in range(1, 1001))
    return [
        # -- types: booleans are not numbers, strings are not numbers, numbers are not names
        ("bool thread count", spec(threads="[true]"), "threads[0]"),
        ("string thread count", spec(threads='["4"]'), "threads[0]"),
        ("float thread count", spec(threads="[4.0]"), "threads[0]"),
        ("bool repeat", spec(extra="repeat: true\n"), "repeat"),
        ("fractional repeat", spec(extra="repeat: 2.5\n"), "repeat"),
        ("bool seed", spec(extra="seed: true\n"), "seed"),
        ("bool tables", spec(extra="data: {tables: true}\n"), "data.tables"),
        ("string table size", spec(extra='data: {table_size: "100"}\n'), "data.table_size"),
        ("bool port", spec(targets=target(port="true")), "targets[0].port"),
        ("bool rate", spec(extra="rate: true\n"), "rate"),
        ("number for a switch", spec(extra="latency_by_kind: 1\n"), "latency_by_kind"),
        ("string for ssl_disabled", spec(targets=target(ssl_disabled='"yes"')), "targets[0].ssl_disabled"),
        ("string for quiesce", spec(targets=target(quiesce='"yes"')), "targets[0].quiesce"),
        ("number for quiesce", spec(targets=managed(quiesce="1")), "targets[0].quiesce"),
        ("number for quiesce.enabled", spec(targets=target(quiesce="{enabled: 1}")), "targets[0].quiesce.enabled"),
        ("string history limit", spec(targets=target(quiesce='{max_history: "10"}')), "targets[0].quiesce.max_history"),
        ("bool duration", spec(duration="true"), "duration"),
        ("list as name", spec(name="[a, b]"), "name"),
        ("mapping as targets", "name: x\ntargets: {a: 1}\nworkloads: [oltp_point_select]\nthreads: [1]\nduration: 1s\n",
         "targets"),
        ("bool workload option", wl_option("oltp_read_only", "point_selects", "true"),
         "workloads[0].options.point_selects"),
        ("fractional workload option", wl_option("oltp_read_only", "point_selects", "5.5"),
         "workloads[0].options.point_selects"),
        ("number as rand_type", wl_option("oltp_read_only", "rand_type", "3"), "workloads[0].options.rand_type"),
        ("number as switch option", wl_option("oltp_read_only", "range_selects", "1"),
         "workloads[0].options.range_selects"),
        ("a list as the spec", "- name: x\n- targets: []\n", "(spec)"),
        ("number as description", spec(extra="description: 5\n"), "description"),
        ("spec_version 2", spec(extra="spec_version: 2\n"), "spec_version"),
        # -- bounds
        ("zero threads", spec(threads="[0]"), "threads[0]"),
        ("threads above 65535", spec(threads="[65536]"), "threads[0]"),
        ("1,025 thread counts", spec(threads="[" + ", ".join(str(i) for i in range(1, 1026)) + "]"), "threads"),
        ("repeat 1001", spec(extra="repeat: 1001\n"), "repeat"),
        ("negative seed", spec(extra="seed: -1\n"), "seed"),
        ("seed above 2^63", spec(extra=f"seed: {2 ** 63}\n"), "seed"),
        ("1,025 tables", spec(extra="data: {tables: 1025}\n"), "data.tables"),
        ("3e9 rows", spec(extra="data: {table_size: 3000000000}\n"), "data.table_size"),
        ("port 0", spec(targets=target(port="0")), "targets[0].port"),
        ("zero duration", spec(duration="0s"), "duration"),
        ("200 h duration", spec(duration="200h"), "duration"),
        ("200 h warmup", spec().replace("warmup: 1s", "warmup: 200h"), "warmup"),
        ("negative rate", spec(extra="rate: -1\n"), "rate"),
        ("rate 2e6", spec(extra="rate: 2000000\n"), "rate"),
        ("zero start_timeout", spec(targets=managed(start_timeout="0s")), "targets[0].start_timeout"),
        ("2 h stop_timeout", spec(targets=managed(stop_timeout="2h")), "targets[0].stop_timeout"),
        ("2 h quiesce timeout", spec(targets=managed(quiesce="{timeout: 2h}")), "targets[0].quiesce.timeout"),
        ("zero quiesce timeout", spec(targets=target(quiesce="{timeout: 0}")), "targets[0].quiesce.timeout"),
        ("dirty pages above 100%", spec(targets=target(quiesce="{max_dirty_pct: 101}")),
         "targets[0].quiesce.max_dirty_pct"),
        ("negative history limit", spec(targets=target(quiesce="{max_history: -5}")), "targets[0].quiesce.max_history"),
        ("history limit 1e12", spec(targets=target(quiesce="{max_history: 1000000000000}")),
         "targets[0].quiesce.max_history"),
        ("1,001 point selects", wl_option("oltp_read_only", "point_selects", "1001"),
         "workloads[0].options.point_selects"),
        ("1e9 random points", wl_option("select_random_points", "random_points", "1000000000"),
         "workloads[0].options.random_points"),
        ("5,000 ranges", wl_option("select_random_ranges", "number_of_ranges", "5000"),
         "workloads[0].options.number_of_ranges"),
        ("3e9 range size", wl_option("oltp_read_only", "range_size", "3000000000"),
         "workloads[0].options.range_size"),
        ("negative delta", wl_option("select_random_ranges", "delta", "-5"), "workloads[0].options.delta"),
        ("five-digit CPU", spec(targets=managed(server_cpus='"0-99999"')), "targets[0].server_cpus"),
        ("CPU 9000", spec(targets=managed(server_cpus='"9000"')), "targets[0].server_cpus"),
        ("backwards CPU range", spec(targets=managed(client_cpus='"3-1"')), "targets[0].client_cpus"),
        ("endless CPU list", spec(targets=managed(server_cpus='"' + ",".join(["0"] * 200) + '"')),
         "targets[0].server_cpus"),
        ("two million runs", spec(threads=f"[{many}]", extra="repeat: 1000\n"), "repeat"),
        ("3 h run", spec(duration="3h"), "duration"),
        ("long description", spec(extra="description: " + "x" * 3000 + "\n"), "description"),
        ("65 targets", "name: x\ntargets:\n" + "".join(f"  - {{name: t{i}, database: d{i}}}\n" for i in range(65))
         + "workloads: [oltp_point_select]\nthreads: [1]\nduration: 1s\n", "targets"),
        ("201 server options", spec(targets=managed("{" + ", ".join(f"table_open_cache{i}: 1" for i in range(201)) + "}")),
         "targets[0].options"),
        # -- non-finite numbers
        ("infinite duration", spec(duration=".inf"), "duration"),
        ("NaN duration", spec(duration=".nan"), "duration"),
        ("NaN warmup", spec().replace("warmup: 1s", "warmup: .nan"), "warmup"),
        ("infinite rate", spec(extra="rate: .inf\n"), "rate"),
        ("NaN rate", spec(extra="rate: .nan\n"), "rate"),
        ("NaN start_timeout", spec(targets=managed(start_timeout=".nan")), "targets[0].start_timeout"),
        ("infinite quiesce timeout", spec(targets=target(quiesce="{timeout: .inf}")), "targets[0].quiesce.timeout"),
        ("NaN dirty page limit", spec(targets=managed(quiesce="{max_dirty_pct: .nan}")),
         "targets[0].quiesce.max_dirty_pct"),
        ("infinite history limit", spec(targets=target(quiesce="{max_history: .inf}")),
         "targets[0].quiesce.max_history"),
        ("400-digit duration", spec(duration="9" * 400 + "s"), "duration"),
        ("infinite option value", option("key_buffer_size", ".inf"), "targets[0].options.key_buffer_size"),
        ("float seed 1e400", spec(extra="seed: 1.0e400\n"), "seed"),
        ("5,000-digit seed", spec(extra="seed: " + "9" * 5000 + "\n"), "(spec)"),
        # -- aliases
        ("billion laughs", _bomb(), "l4[1]"),
        ("recursive alias", "name: x\nthreads: &t [1, *t]\n", "threads[1]"),
        ("alias deeper than 32", "a: &a " + "[" * 20 + "1" + "]" * 20 + "\nb: " + "[" * 15 + "*a" + "]" * 15 + "\n",
         "b[0][0][0][0][0]..."),
        ("undefined alias", spec(threads="[*nope]"), "(spec)"),
        ("one big list used 200 times", "big: &big [" + ", ".join(["1"] * 1000) + "]\nuse: [" + ", ".join(["*big"] * 200)
         + "]\n", "use[18]"),
        # -- nesting
        ("20,000-deep list", "[" * 20000 + "]" * 20000, "(spec)"),
        ("40-deep options", "name: x\ntargets:\n  - kind: managed\n    name: m\n    options:\n" + deep_options
         + "workloads: [oltp_point_select]\nthreads: [1]\nduration: 1s\n", "targets[0].options.k0.k1.k2..."),
        ("1,000-deep mapping", "{a: " * 1000 + "1" + "}" * 1000, "a.a.a.a.a.a..."),
        # -- encodings
        ("byte 0xff", b"name: \xff\xfe\n", "(spec)"),
        ("UTF-16", spec().encode("utf-16"), "(spec)"),
        ("latin-1 name", spec(name="t\xe9st").encode("latin-1"), "(spec)"),
        ("NUL byte", spec(name="a\x00b"), "(spec)"),
        ("ANSI escape in description", spec(extra='description: "\\e[31mred\\e[0m"\n'), "description"),
        ("bidi override in description", spec(extra='description: "abc\\u202edcb"\n'), "description"),
        ("Arabic letter mark in description", spec(extra='description: "abc\\u061cdcb"\n'), "description"),
        ("zero-width space in description", spec(extra='description: "ab\\u200bc"\n'), "description"),
        ("line separator in description", spec(extra='description: "ab\\u2028c"\n'), "description"),
        ("byte-order mark in description", spec(extra='description: "ab\\ufeffc"\n'), "description"),
        ("deprecated bidi format control in description", spec(extra='description: "ab\\u206ec"\n'), "description"),
        ("language tag in description", spec(extra='description: "ab\\U000e0001c"\n'), "description"),
        ("accented name", spec(name="tést"), "name"),
        # -- names
        ("space in target name", spec(targets=target(name='"a b"')), "targets[0].name"),
        ("path as campaign name", spec(name='"../../etc"'), "name"),
        ("semicolon in label", spec(workloads="[{name: oltp_point_select, label: 'x;y'}]"), "workloads[0].label"),
        ("colliding run ids", "name: x\ntargets: [{name: a, user: bench, database: x},\n"
         " {name: a.b, user: bench, database: y}]\n"
         "workloads: [{name: oltp_point_select, label: b.c}, {name: oltp_read_only, label: c}]\n"
         "threads: [1]\nduration: 1s\n", "targets"),
        ("repeated target name", "name: x\ntargets: [{name: a, user: bench, database: x},\n"
         " {name: a, user: bench, database: y}]\n"
         "workloads: [oltp_point_select]\nthreads: [1]\nduration: 1s\n", "targets"),
        ("baseline not a target", spec(extra="baseline: zz\n"), "baseline"),
        ("100 kB baseline", spec(extra="baseline: " + "b" * 100_000 + "\n"), "baseline"),
        ("slash in pool", spec(extra="pool: a/b\n"), "pool"),
        ("10 kB workload name", spec(workloads="[" + "w" * 10_000 + "]"), "workloads[0].name"),
        ("1,000-character unknown key", spec(extra="k" * 1_000 + ": 1\n"), "[" + repr("k" * 40 + "...") + "]"),
        ("database mysql", spec(targets=target(database="mysql")), "targets[0].database"),
        ("database information_schema", spec(targets=target(database="information_schema")), "targets[0].database"),
        ("database Performance_Schema", spec(targets=target(database="Performance_Schema")), "targets[0].database"),
        ("database sys", spec(targets=target(database="sys")), "targets[0].database"),
        ("the results DB", spec(targets=target(database="benchfleet")), "targets[0].database"),
        ("duplicate key", spec(extra="duration: 6s\n"), "duration"),
        ("duplicate nested key", "name: x\ntargets:\n  - name: a\n    port: 3306\n    port: 3307\n"
         "workloads: [oltp_point_select]\nthreads: [1]\nduration: 1s\n", "targets[0].port"),
        ("no user", spec(targets="{name: a, host: 127.0.0.1, database: sb_a}"), "targets[0].user"),
        ("space in host", spec(targets=target(host='"evil host"')), "targets[0].host"),
        ("option-like host", spec(targets=target(host='"-oProxyCommand=x"')), "targets[0].host"),
        ("quote in user", spec(targets=target(user='"root\'--"')), "targets[0].user"),
        # -- paths
        ("relative socket", spec(targets=target(socket="relative/sock")), "targets[0].socket"),
        ("relative CA", spec(targets=target(ssl_ca="../ca.pem")), "targets[0].ssl_ca"),
        ("shell in password_file", spec(targets=target(password_file='"/etc/shadow; rm"')),
         "targets[0].password_file"),
        ("shell in binary", spec(targets=managed(binary='"/usr/sbin/mariadbd; rm -rf /"')), "targets[0].binary"),
        ("relative basedir", spec(targets=managed(basedir="relative")), "targets[0].basedir"),
        ("path as build", spec(targets=managed(build='"/opt/mariadb/bin/mariadbd"')), "targets[0].build"),
        ("dotdot build", spec(targets=managed(build='"../builds/x"')), "targets[0].build"),
        ("shell in build", spec(targets=managed(build='"x; rm -rf /"')), "targets[0].build"),
        ("unknown allocator", spec(targets=managed(malloc="hoard")), "targets[0].malloc"),
        ("allocator as a path", spec(targets=managed(malloc='"/tmp/evil.so"')), "targets[0].malloc"),
        # -- server options that load code or name paths
        ("plugin_dir", option("plugin_dir", "/tmp/evil"), "targets[0].options.plugin_dir"),
        ("plugin-load-add", option("plugin-load-add", "evil.so"), "targets[0].options.plugin-load-add"),
        ("loose plugin_load", option("loose-plugin-load", "evil.so"), "targets[0].options.loose-plugin-load"),
        ("init_file", option("init_file", "/tmp/x.sql"), "targets[0].options.init_file"),
        ("init_connect", option("init_connect", "x"), "targets[0].options.init_connect"),
        ("general_log_file", option("general_log_file", "/root/.bashrc"), "targets[0].options.general_log_file"),
        ("slow_query_log_file", option("slow_query_log_file", "x.log"), "targets[0].options.slow_query_log_file"),
        ("secure_file_priv", option("secure_file_priv", "/"), "targets[0].options.secure_file_priv"),
        ("log_bin", option("log_bin", "/tmp/bin"), "targets[0].options.log_bin"),
        ("datadir", option("datadir", "/var/lib/mysql"), "targets[0].options.datadir"),
        ("innodb_data_home_dir", option("innodb_data_home_dir", "/tmp"), "targets[0].options.innodb_data_home_dir"),
        ("innodb_undo_directory", option("innodb_undo_directory", "/tmp"),
         "targets[0].options.innodb_undo_directory"),
        ("tmpdir", option("tmpdir", "/tmp"), "targets[0].options.tmpdir"),
        ("wsrep_provider", option("wsrep_provider", "/usr/lib/galera/libgalera_smm.so"),
         "targets[0].options.wsrep_provider"),
        ("wsrep_notify_cmd", option("wsrep_notify_cmd", "/bin/sh"), "targets[0].options.wsrep_notify_cmd"),
        ("ssl_key", option("ssl_key", "/etc/ssl/private/x.key"), "targets[0].options.ssl_key"),
        ("debug trace", option("debug", "d:t:o,/tmp/trace"), "targets[0].options.debug"),
        ("character_sets_dir", option("character_sets_dir", "/tmp"), "targets[0].options.character_sets_dir"),
        ("absolute path value", option("key_buffer_size", "/etc/passwd"), "targets[0].options.key_buffer_size"),
        ("dot-dot value", option("default_time_zone", "../../x"), "targets[0].options.default_time_zone"),
        ("uppercase option", spec(targets=managed("{Plugin_Dir: /x}")), "targets[0].options.Plugin_Dir"),
        ("skip-grant-tables", option("skip-grant-tables", "true"), "targets[0].options.skip-grant-tables"),
        # -- server options off the allow-list, abbreviated, or past their bounds
        ("abbreviated option", option("key_buffer", "8M"), "targets[0].options.key_buffer"),
        ("loose abbreviated option", option("loose-innodb-buffer-pool", "1G"),
         "targets[0].options.loose-innodb-buffer-pool"),
        ("skip- abbreviation", option("skip-performance", "null"), "targets[0].options.skip-performance"),
        ("feedback URL", option("feedback_url", "http:evil.example"), "targets[0].options.feedback_url"),
        ("proxy protocol", option("proxy_protocol_networks", "127.0.0.1"), "targets[0].options.proxy_protocol_networks"),
        ("monitor port", option("extra_port", "3307"), "targets[0].options.extra_port"),
        ("general log", option("general_log", "true"), "targets[0].options.general_log"),
        ("maximum- ceiling", option("maximum-max-connections", "1000"), "targets[0].options.maximum-max-connections"),
        ("2 TB buffer pool", option("innodb_buffer_pool_size", "2T"), "targets[0].options.innodb_buffer_pool_size"),
        ("8 GB sort buffer", option("sort_buffer_size", "8G"), "targets[0].options.sort_buffer_size"),
        ("a million connections", option("max_connections", "1000000"), "targets[0].options.max_connections"),
        ("unknown thread handling", option("thread_handling", "no-such-handling"), "targets[0].options.thread_handling"),
        ("size as a word", option("key_buffer_size", "lots"), "targets[0].options.key_buffer_size"),
        # -- costs
        ("120,000 deliveries over load hosts", spec(threads="[" + ", ".join(str(i) for i in range(2, 1002)) + "]",
                                                    extra="repeat: 60\nload_hosts: 2\n"), "repeat"),
        ("2 billion rows", spec(extra="data: {tables: 1024, table_size: 2000000}\n"), "data"),
        ("rows prepared again per layout", spec(workloads="[oltp_point_select, oltp_simple]",
                                                extra="data: {table_size: 200000000}\nrepeat: 10\n"), "data"),
        ("gigabytes of run messages", _many_windows_runs(), "workloads"),
        # -- secrets
        ("literal password", spec(targets=target(password="hunter2")), "targets[0].password"),
        ("space in password_env", spec(targets=target(password_env='"BENCHFLEET AMQP"')), "targets[0].password_env"),
        ("two password sources", spec(targets=target(password_env="PW", password_file="/x")), "targets[0]"),
        ("the fleet's broker password", spec(targets=target(password_env="BENCHFLEET_AMQP_PASSWORD")),
         "targets[0].password_env"),
        ("the fleet's secrets directory", spec(targets=target(password_file='"${BENCHFLEET_SECRETS}/db_password"')),
         "targets[0].password_file"),
        ("100-character password_env", spec(targets=target(password_env="P" * 100)), "targets[0].password_env"),
        ("sysbench cannot verify TLS", spec(targets=target(host="db.example.com", password_env="PW"),
                                            extra="driver: sysbench\n"), "targets[0].tls"),
        ("CA with tls preferred", spec(targets=target(tls="preferred", ssl_ca="/ca.pem")), "targets[0].ssl_ca"),
        ("unknown tls mode", spec(targets=target(tls="sometimes")), "targets[0].tls"),
        ("tls against ssl_disabled", spec(targets=target(tls="verify", ssl_disabled="true")), "targets[0].tls"),
        # -- sizes
        ("2 MB file", spec() + "#" + "x" * (2 << 20) + "\n", "(spec)"),
        ("5,000 thread counts", spec(threads="[" + ", ".join(str(i) for i in range(1, 5001)) + "]"), "threads"),
        ("150,000 values", "x: [" + ", ".join(["1"] * 150_000) + "]\n", "x[19999]"),
    ]


CASES: list[Case] = [Case(n, c.encode() if isinstance(c, str) else c, f) for n, c, f in _cases()]
