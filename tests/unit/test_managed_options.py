"""Managed targets: spec validation, option names against --help output, CPU split, status deltas."""

from __future__ import annotations

import pytest

from services.common.spec import server_options as so
from services.common.spec.loading import SpecError, parse_spec
from services.worker.target import info as server_info
from services.worker.target.connect_params import ConnectParams

HELP = """\
Usage: mariadbd [OPTIONS]
  --key-buffer-size=# The size of the buffer used for index blocks for MyISAM
  --key-cache-segments=#
                      The number of segments in a key cache
  --thread-handling=name
  --skip-name-resolve Only use IP numbers
  --performance-schema
                      Enable the performance schema.

Variables (--variable-name=value)
and boolean options {FALSE|TRUE}                             Value (after reading options)
------------------------------------------------------------ -------------
key-buffer-size                                              134217728
key-cache-segments                                           0
max-connections                                              151
"""

SPEC = """\
name: m
targets:
  - kind: managed
    name: off
    options: {key_buffer_size: 16M, key_cache_segments: 0}
%s
workloads: [oltp_point_select]
threads: [1]
duration: 5s
"""


def errors_of(extra: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(SPEC % extra, "spec.yaml")
    return str(info.value).splitlines()


def test_help_output_lists_options_and_variables():
    """Both the option list and the variables table of --help --verbose are read, underscored."""
    names = so.parse_help(HELP)
    assert {"key_buffer_size", "key_cache_segments", "thread_handling", "skip_name_resolve",
            "performance_schema", "max_connections"} <= names
    assert "and" not in names and "usage" not in names


def test_unknown_options_accepts_prefixes_and_refuses_abbreviations():
    """skip-/loose- prefixes and dashes are fine; a typo or an abbreviation is reported as given."""
    names = so.parse_help(HELP)
    bad = so.unknown_options(["key-cache-segments", "loose_max_connections", "skip-performance-schema",
                              "key_cache_segmnts", "key_buffer"], names)
    assert bad == ["key_cache_segmnts", "key_buffer"]
    assert so.suggestion("key_cache_segmnts", names) == "key_cache_segments"


def test_argv_renders_booleans_and_flags():
    """Options keep the spec's order under their full names; true/false become ON/OFF, null a bare flag."""
    assert so.argv({"key_buffer_size": "400M", "skip-name-resolve": True, "performance_schema": False,
                    "thread_pool_exact_stats": None, "max-connections": 8}) == [
        "--key_buffer_size=400M", "--skip_name_resolve=ON", "--performance_schema=OFF", "--thread_pool_exact_stats",
        "--max_connections=8"]


def test_managed_target_loads():
    """A managed target with options and CPU lists validates; numbers as names stay names."""
    spec = parse_spec(SPEC % '  - {kind: managed, name: 8, options: {key_cache_segments: 8}, server_cpus: 0, client_cpus: "1-3"}')
    t = spec.target("8")
    assert t.kind == "managed" and t.options == {"key_cache_segments": 8}
    assert t.server_cpus == "0" and t.client_cpus == "1-3"


@pytest.mark.parametrize("extra, needle", [
    ('  - {kind: managed, name: x, options: {key_buffer_size: "1M; DROP TABLE t"}}', "targets[1].options.key_buffer_size: invalid value"),
    ('  - {kind: managed, name: x, options: {"key buffer": 1}}', "targets[1].options: key buffer: invalid option name"),
    ('  - {kind: managed, name: x, options: {datadir: /tmp/x}}', "targets[1].options.datadir: set by the worker"),
    ('  - {kind: managed, name: x, options: {skip-grant-tables: true}}', "targets[1].options.skip-grant-tables: set by the worker"),
    ('  - {kind: managed, name: x, options: {init_file: /tmp/x.sql}}', "targets[1].options.init_file: reserved: it loads code"),
    ('  - {kind: managed, name: x, options: {key_buffer_size: 1M, key-buffer-size: 2M}}', "same option as key_buffer_size"),
    ('  - {kind: managed, name: x, binary: "/usr/sbin/mariadbd; rm -rf /"}', "targets[1].binary: a spec names no path on a worker"),
    ('  - {kind: managed, name: x, server_cpus: "0;1"}', "targets[1].server_cpus: invalid value"),
    ('  - {kind: managed, name: x, password: ""}', "targets[1].password: unknown field"),
])
def test_bad_managed_targets_are_refused_naming_the_field(extra, needle):
    """Option names, values, paths and CPU lists are strict: no shell or SQL text gets through."""
    errors = errors_of(extra)
    assert any(needle in e for e in errors), errors


@pytest.mark.parametrize("avail, server, client, worker, expected", [
    ([0, 1], None, None, None, ([0], [1])),
    ([0, 1, 2, 3], None, None, None, ([0, 1], [2, 3])),
    ([0, 1, 2, 3], "0", None, None, ([0], [1, 2, 3])),
    ([0, 1, 2, 3], None, "3", None, ([0, 1, 2], [3])),
    ([0, 1, 2, 3], None, None, [2, 3], ([0, 1], [2, 3])),
    ([0], None, None, None, ([0], [0])),
    ([0, 1], "0-1", None, None, ([0, 1], [0, 1])),
])
def test_cpu_split(avail, server, client, worker, expected):
    """The default gives the server the first half; given lists win; a lone CPU is shared."""
    assert so.split_cpus(avail, server, client, worker) == expected


def test_cpu_split_refuses_cpus_the_worker_lacks():
    """A CPU outside the worker's set is an error naming the field and the available CPUs."""
    with pytest.raises(so.CpuSplitError, match=r"server_cpus: CPU 4-5 not available on this worker \(available: 0-1\)"):
        so.split_cpus([0, 1], "4-5")


def test_status_deltas_interpolate_between_samples():
    """Counters are interpolated at the interval's ends; the Threads_running peak is taken inside."""
    samples = [(10.0, {"Questions": 0, "Threads_running": 1}, 1.0),
               (11.0, {"Questions": 1000, "Threads_running": 9}, 2.0),
               (12.0, {"Questions": 2000, "Threads_running": 4}, 3.0),
               (13.0, {"Questions": 2100, "Threads_running": 30}, 3.1)]
    assert server_info.status_deltas(samples, 10.5, 12.0, ["Questions"]) == {"Questions": 1500}
    assert server_info.peak(samples, 10.5, 12.0) == 9
    sampler = server_info.StatusSampler(ConnectParams())
    sampler.samples = samples
    report = sampler.report(10.5, 12.0)
    assert report.server_cpu_s == 1.5 and report.status_deltas["Questions"] == 1500


def test_proc_stat_cpu_seconds():
    """utime + stime are fields 14 and 15, counted after the command name (which may hold spaces)."""
    line = "1234 (my sql d) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 150 0 0 20 0 30 0 100 1000 50"
    assert server_info.proc_cpu_seconds(line, 100) == 4.0
