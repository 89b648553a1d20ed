"""The server options a spec may set on a managed target, each with the values it takes.

An allow-list, not a list of refusals: a spec comes from whoever may submit, and a server build
has hundreds of options, some of which call out to URLs, open ports, trust proxy headers, write
files without bound or load code. Only tuning options are here, each with its kind and bounds;
sizes also count against the worker host's memory or disk (:func:`host_problems`). Pure: the
host's figures come in as arguments.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from typing import Literal, Mapping

KiB, MiB, GiB, TiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40

#: What a size option costs on the worker's host: memory once per server ("memory"), memory per
#: connection ("session", counted max_connections times), disk in the datadir ("disk"), or
#: nothing worth counting ("none": a ceiling on something else, such as query_cache_limit).
Cost = Literal["memory", "session", "disk", "none"]
#: max_connections when a spec does not set it (the server's default), for the session count.
DEFAULT_MAX_CONNECTIONS = 151


@dataclass(frozen=True)
class Rule:
    """The values one option takes: ``kind`` and its bounds (``lo``..``hi``, in bytes for sizes),
    or ``choices`` (case-insensitive) or a ``pattern`` for words and lists."""

    kind: Literal["bool", "int", "float", "size", "enum", "text"]
    lo: float = 0
    hi: float = 0
    cost: Cost = "none"
    choices: tuple[str, ...] = ()
    pattern: str = ""


def _bool() -> Rule:
    return Rule("bool")


def _int(lo: int, hi: int) -> Rule:
    return Rule("int", lo, hi)


def _size(lo: int, hi: int, cost: Cost) -> Rule:
    return Rule("size", lo, hi, cost)


def _enum(*choices: str) -> Rule:
    return Rule("enum", choices=tuple(c.lower() for c in choices))


_WORD = r"^[a-z0-9_]{1,64}$"
_SWITCHES = r"^[a-z_]{1,64}=(on|off|default)(,[a-z_]{1,64}=(on|off|default)){0,63}$"
_SQL_MODE = r"^([a-z_]{1,40}(,[a-z_]{1,40}){0,31})?$"
_LEVELS = ("read-uncommitted", "read-committed", "repeatable-read", "serializable")

#: Every option a spec may set (names with underscores), and its values. Sizes are capped here
#: too (1 TiB of memory, 4 GiB per connection, 1 TiB of disk) so that a spec checked without a
#: worker's figures still has a bound; the worker checks again against its own host.
ALLOWED: Mapping[str, Rule] = {
    # -- connections and threads
    "max_connections": _int(1, 100_000),
    "thread_cache_size": _int(0, 16_384),
    "back_log": _int(1, 65_535),
    "thread_handling": _enum("one-thread-per-connection", "pool-of-threads", "no-threads"),
    "thread_pool_size": _int(1, 100_000),
    "thread_pool_max_threads": _int(1, 65_536),
    "thread_pool_idle_timeout": _int(1, 86_400),
    "thread_pool_oversubscribe": _int(1, 1_000),
    "thread_pool_stall_limit": _int(1, 600_000),
    "thread_pool_prio_kickup_timer": _int(0, 600_000),
    "thread_pool_priority": _enum("high", "low", "auto"),
    "thread_pool_exact_stats": _bool(),
    "thread_pool_dedicated_listener": _bool(),
    "skip_name_resolve": _bool(),
    "wait_timeout": _int(1, 31_536_000),
    "interactive_timeout": _int(1, 31_536_000),
    "net_read_timeout": _int(1, 31_536_000),
    "net_write_timeout": _int(1, 31_536_000),
    "connect_timeout": _int(2, 31_536_000),
    "lock_wait_timeout": _int(1, 31_536_000),
    "host_cache_size": _int(0, 65_536),
    # -- caches and buffers
    "table_open_cache": _int(1, 1_048_576),
    "table_open_cache_instances": _int(1, 64),
    "table_definition_cache": _int(1, 1_048_576),
    "open_files_limit": _int(0, 1_048_576),
    "max_prepared_stmt_count": _int(0, 1_048_576),
    "stored_program_cache": _int(0, 524_288),
    "query_cache_type": _enum("0", "1", "2", "off", "on", "demand"),
    "query_cache_size": _size(0, TiB, "memory"),
    "query_cache_limit": _size(0, 4 * GiB, "none"),
    "query_cache_min_res_unit": _size(0, 4 * GiB, "none"),
    "query_cache_strip_comments": _bool(),
    "query_cache_wlock_invalidate": _bool(),
    "key_buffer_size": _size(8, TiB, "memory"),
    "key_cache_segments": _int(0, 64),
    "key_cache_block_size": _int(512, 16_384),
    "key_cache_division_limit": _int(1, 100),
    "key_cache_age_threshold": _int(100, 4_294_967_295),
    "key_cache_file_hash_size": _int(128, 16_384),
    "aria_pagecache_buffer_size": _size(128 * KiB, TiB, "memory"),
    "aria_block_size": _int(1_024, 32_768),
    "aria_checkpoint_interval": _int(0, 86_400),
    "aria_group_commit": _enum("none", "hard", "soft"),
    "aria_group_commit_interval": _int(0, 86_400_000_000),
    "aria_log_file_size": _size(8 * MiB, TiB, "disk"),
    "aria_sort_buffer_size": _size(16 * KiB, 4 * GiB, "session"),
    "sort_buffer_size": _size(1 * KiB, 4 * GiB, "session"),
    "join_buffer_size": _size(128, 4 * GiB, "session"),
    "read_buffer_size": _size(8 * KiB, 2 * GiB, "session"),
    "read_rnd_buffer_size": _size(1, 2 * GiB, "session"),
    "tmp_table_size": _size(0, 4 * GiB, "session"),
    "max_heap_table_size": _size(16 * KiB, 4 * GiB, "session"),
    "tmp_disk_table_size": _size(1 * KiB, TiB, "disk"),
    "net_buffer_length": _size(1 * KiB, 1 * MiB, "session"),
    "max_allowed_packet": _size(1 * KiB, 1 * GiB, "session"),
    "thread_stack": _size(128 * KiB, 64 * MiB, "session"),
    "bulk_insert_buffer_size": _size(0, 4 * GiB, "session"),
    "myisam_sort_buffer_size": _size(4 * KiB, 4 * GiB, "session"),
    "query_prealloc_size": _size(1 * KiB, 64 * MiB, "session"),
    "transaction_prealloc_size": _size(1 * KiB, 64 * MiB, "session"),
    "range_alloc_block_size": _size(4 * KiB, 64 * MiB, "session"),
    "concurrent_insert": _enum("0", "1", "2", "never", "auto", "always"),
    "delay_key_write": _enum("off", "on", "all"),
    "low_priority_updates": _bool(),
    "myisam_use_mmap": _bool(),
    "myisam_repair_threads": _int(1, 64),
    # -- InnoDB
    "innodb_buffer_pool_size": _size(2 * MiB, TiB, "memory"),
    "innodb_buffer_pool_chunk_size": _size(1 * MiB, TiB, "none"),
    "innodb_buffer_pool_instances": _int(1, 64),
    "innodb_log_file_size": _size(1 * MiB, 512 * GiB, "disk"),
    "innodb_log_buffer_size": _size(256 * KiB, 4 * GiB, "memory"),
    "innodb_log_write_ahead_size": _size(512, 64 * KiB, "none"),
    "innodb_sort_buffer_size": _size(64 * KiB, 64 * MiB, "session"),
    "innodb_flush_log_at_trx_commit": _int(0, 3),
    "innodb_flush_method": _enum("fsync", "o_dsync", "littlesync", "nosync", "o_direct", "o_direct_no_fsync",
                                 "0", "1", "2", "3", "4", "5"),
    "innodb_flush_neighbors": _int(0, 2),
    "innodb_doublewrite": _bool(),
    "innodb_io_capacity": _int(100, 10_000_000),
    "innodb_io_capacity_max": _int(100, 10_000_000),
    "innodb_read_io_threads": _int(1, 64),
    "innodb_write_io_threads": _int(1, 64),
    "innodb_purge_threads": _int(1, 32),
    "innodb_purge_batch_size": _int(1, 5_000),
    "innodb_page_cleaners": _int(1, 64),
    "innodb_thread_concurrency": _int(0, 1_000),
    "innodb_concurrency_tickets": _int(1, 4_294_967_295),
    "innodb_lru_scan_depth": _int(100, 10_000_000),
    "innodb_max_dirty_pages_pct": Rule("float", 0, 99.999),
    "innodb_max_dirty_pages_pct_lwm": Rule("float", 0, 99.999),
    "innodb_adaptive_flushing": _bool(),
    "innodb_adaptive_flushing_lwm": Rule("float", 0, 70),
    "innodb_adaptive_hash_index": _bool(),
    "innodb_adaptive_hash_index_parts": _int(1, 512),
    "innodb_change_buffering": _enum("none", "inserts", "deletes", "changes", "purges", "all"),
    "innodb_file_per_table": _bool(),
    "innodb_stats_persistent": _bool(),
    "innodb_use_native_aio": _bool(),
    "innodb_random_read_ahead": _bool(),
    "innodb_read_ahead_threshold": _int(0, 64),
    "innodb_old_blocks_pct": _int(5, 95),
    "innodb_old_blocks_time": _int(0, 4_294_967_295),
    "innodb_deadlock_detect": _bool(),
    "innodb_lock_wait_timeout": _int(0, 31_536_000),
    "innodb_autoinc_lock_mode": _int(0, 2),
    "innodb_spin_wait_delay": _int(0, 6_000),
    "innodb_sync_spin_loops": _int(0, 4_294_967_295),
    "innodb_sync_array_size": _int(1, 1_024),
    "innodb_open_files": _int(10, 1_048_576),
    "innodb_fast_shutdown": _int(0, 3),
    "innodb_page_size": _enum("4k", "8k", "16k", "32k", "64k", "4096", "8192", "16384", "32768", "65536"),
    "innodb_checksum_algorithm": _enum("crc32", "strict_crc32", "full_crc32", "strict_full_crc32", "innodb",
                                       "strict_innodb", "none", "strict_none"),
    "innodb_undo_tablespaces": _int(0, 127),
    # -- SQL behaviour
    "performance_schema": _bool(),
    "default_storage_engine": _enum("innodb", "myisam", "aria", "memory"),
    "character_set_server": Rule("text", pattern=_WORD),
    "collation_server": Rule("text", pattern=_WORD),
    "transaction_isolation": _enum(*_LEVELS),
    "tx_isolation": _enum(*_LEVELS),
    "autocommit": _bool(),
    "sql_mode": Rule("text", pattern=_SQL_MODE),
    "optimizer_switch": Rule("text", pattern=_SWITCHES),
    "optimizer_search_depth": _int(0, 62),
    "optimizer_prune_level": _int(0, 2),
    "join_cache_level": _int(0, 8),
    "eq_range_index_dive_limit": _int(0, 4_294_967_295),
    "max_seeks_for_key": _int(1, 4_294_967_295),
    "max_length_for_sort_data": _int(4, 8_388_608),
    "default_time_zone": Rule("text", pattern=r"^(system|[+-]\d{1,2}:\d{2})$"),
    "lower_case_table_names": _int(0, 2),
}

#: Options left off the list on purpose, with the reason a spec is told.
REFUSED: Mapping[str, str] = {
    "general_log": "it writes every statement to a file that grows without bound",
    "slow_query_log": "it writes to a file that grows without bound",
    "log_slow_query": "it writes to a file that grows without bound",
    "log_output": "it chooses where the server's logs go",
    "proxy_protocol_networks": "it makes the server trust client addresses from proxy headers",
    "feedback": "the feedback plugin sends data to a URL",
    "feedback_url": "it makes the server call out to a URL",
    "feedback_http_proxy": "it makes the server call out through a proxy",
    "local_infile": "prepare loads the tables with it on",
    "max_binlog_size": "binary logs are off on managed servers",
}

#: Prefixes my_getopt reads in front of an option name, and what a spec may do with them: a
#: switch's `skip-`/`disable-`/`enable-` form is the switch set OFF or ON; `loose-` only hides
#: an unknown name, and every name is checked against the build anyway.
_OFF_PREFIXES = ("skip_", "disable_")
_ON_PREFIXES = ("enable_",)
_LOOSE = "loose_"
#: `maximum-x` sets the ceiling a session may raise x to: the build's stays.
_MAXIMUM = "maximum_"

_SIZE = re.compile(r"^(\d{1,16})([kmgt]?)$")
_UNITS = {"": 1, "k": KiB, "m": MiB, "g": GiB, "t": TiB}
_TRUE = ("on", "true", "1", "yes")
_FALSE = ("off", "false", "0", "no")


class NotAllowed(ValueError):
    """A name or value a spec may not give a managed server; the message says why."""


def canonical(name: str, value: object) -> tuple[str, object]:
    """(the option's full name with underscores, the value it sets) for a spec's ``name`` and
    ``value``: prefixes resolved as my_getopt would (an exact name first), so `skip-performance-schema`
    is performance_schema OFF. NotAllowed for a name that is not on the list, prefixes and all."""
    n = name.replace("-", "_")
    if n in ALLOWED:
        return n, value
    if n.startswith(_LOOSE):
        return canonical(n[len(_LOOSE):], value)
    if n.startswith(_MAXIMUM):
        raise NotAllowed("a maximum- option sets the ceiling sessions may raise an option to; the build's stays")
    for prefixes, on in ((_OFF_PREFIXES, False), (_ON_PREFIXES, True)):
        for p in prefixes:
            base = n[len(p):]
            if n.startswith(p) and ALLOWED.get(base, Rule("int")).kind == "bool":
                if value is not None and value is not True:
                    raise NotAllowed(f"write {base}: {'true' if on else 'false'} (the {p.rstrip('_')}- form is a "
                                     "switch without a value)")
                return base, on
    longer = sorted(k for k in ALLOWED if k.startswith(n))
    if longer:
        raise NotAllowed(f"an abbreviation (of {', '.join(longer[:3])}); write the option's full name")
    if n in REFUSED:
        raise NotAllowed(f"not allowed: {REFUSED[n]}")
    near = difflib.get_close_matches(n, list(ALLOWED), n=1, cutoff=0.8)
    raise NotAllowed("not an option a spec may set on a managed server (docs/specs.md lists them)"
                     + (f"; did you mean {near[0]}?" if near else ""))


def parse_size(value: object) -> int | None:
    """Bytes of a size (``400M``, ``1g``, 8388608); None when ``value`` is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    m = _SIZE.match(str(value).lower())
    return int(m.group(1)) * _UNITS[m.group(2)] if m else None


def _shown_size(n: float) -> str:
    for unit, size in (("T", TiB), ("G", GiB), ("M", MiB), ("K", KiB)):
        if n >= size and n % size == 0:
            return f"{int(n // size)}{unit}"
    return f"{int(n)}"


def _mib(n: int) -> str:
    return f"{n / MiB:,.0f} MiB"


def value_problem(name: str, value: object) -> str | None:
    """Why ``value`` is not one option ``name`` (a full name on the list) takes, or None."""
    rule = ALLOWED[name]
    text = str(value).lower() if not isinstance(value, bool) else ("on" if value else "off")
    if rule.kind == "bool":
        if value is None or isinstance(value, bool) or text in _TRUE + _FALSE:
            return None
        return "takes true or false"
    if value is None:
        return "needs a value"
    if rule.kind == "enum":
        return None if text in rule.choices else f"takes one of {', '.join(rule.choices)}"
    if rule.kind == "text":
        return None if re.fullmatch(rule.pattern, text) else "is not a value this option takes"
    if rule.kind == "size":
        n = parse_size(value)
        if n is None:
            return "takes a size: a whole number of bytes, or with K, M, G or T"
        if not rule.lo <= n <= rule.hi:
            return f"must be from {_shown_size(rule.lo)} to {_shown_size(rule.hi)}"
        return None
    if isinstance(value, bool):
        return "takes a number"
    try:
        number = float(value) if rule.kind == "float" else int(str(value), 10)  # type: ignore[arg-type]
    except ValueError:
        return "takes a whole number" if rule.kind == "int" else "takes a number"
    if isinstance(value, float) and rule.kind == "int" and not value.is_integer():
        return "takes a whole number"
    if not math.isfinite(number) or not rule.lo <= number <= rule.hi:
        return f"must be from {rule.lo:g} to {rule.hi:g}"
    return None


def cost_of(options: Mapping[str, object], cost: Cost) -> int:
    """Bytes the canonical ``options`` give sizes of ``cost`` (values already checked)."""
    return sum(parse_size(v) or 0 for k, v in options.items() if ALLOWED[k].kind == "size" and ALLOWED[k].cost == cost)


def memory_needed(options: Mapping[str, object]) -> int:
    """Bytes the sizes of canonical ``options`` may take: the server's own buffers, and every
    connection's buffers times max_connections (only what the spec sets; defaults are small)."""
    connections = int(str(options.get("max_connections", DEFAULT_MAX_CONNECTIONS)))
    return cost_of(options, "memory") + connections * cost_of(options, "session")


def host_problems(options: Mapping[str, object], *, memory: int, disk_free: int) -> list[tuple[str, str]]:
    """(field, why) when canonical ``options`` ask for more than the worker's host has:
    ``memory`` bytes in all (MemTotal), ``disk_free`` bytes free where the datadir is."""
    out = []
    need = memory_needed(options)
    if need > memory:
        sized = sorted(k for k, v in options.items() if ALLOWED[k].kind == "size" and ALLOWED[k].cost in ("memory", "session"))
        out.append((sized[0] if sized else "max_connections",
                    f"the server's buffers ({', '.join(sized)}; per-connection ones times max_connections) could "
                    f"take {_mib(need)}, more than this worker's memory ({_mib(memory)})"))
    disk = cost_of(options, "disk")
    if disk > disk_free:
        sized = sorted(k for k in options if ALLOWED[k].kind == "size" and ALLOWED[k].cost == "disk")
        out.append((sized[0], f"{', '.join(sized)} take {_mib(disk)}, more than is free where this worker "
                              f"keeps the datadirs ({_mib(disk_free)})"))
    return out
