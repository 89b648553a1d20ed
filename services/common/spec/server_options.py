"""Server options of managed targets: strict names and values (the allow-list is in
server_allowed.py), checks against what a binary accepts, command-line rendering and the CPU
split between server and clients.

Pure on purpose: ``mariadbd --help --verbose`` output and the worker's CPU set come in as
arguments, so everything here is tested on literal text.
"""

from __future__ import annotations

import math
import re
from typing import Iterable, Mapping, TypeVar

from services.common.errors import CpuSplitError
from services.common.spec import server_allowed
from services.common.spec.server_allowed import NotAllowed

#: Option names as mariadbd spells them, dashes or underscores (`key_buffer_size`,
#: `thread-handling`). Nothing else ever reaches an argv or a SQL statement.
OPTION_NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,79}$"
#: Option values: sizes (400M), numbers, words (pool-of-threads), lists (a,b) and plain
#: absolute paths. No spaces, quotes, semicolons, backticks, `$` or `\`: values go into an
#: argv (never a shell), and this keeps them harmless in logs and reports too.
OPTION_VALUE_PATTERN = r"^[A-Za-z0-9_.,:+/@=%-]{1,255}$"
#: CPU lists as taskset and --client-cpus take them: `0`, `2-3`, `0,2-3`.
CPU_LIST_PATTERN = r"^\d{1,4}(-\d{1,4})?(,\d{1,4}(-\d{1,4})?)*$"

#: Options the worker sets itself for every managed server; a spec may not change them,
#: because they decide where the server keeps its files, who it runs as and how the
#: clients reach it (extra_port and extra_max_connections: the monitor's way past a thread pool).
WORKER_OWNED = frozenset({
    "datadir", "port", "socket", "pid_file", "log_error", "user", "basedir", "bind_address",
    "extra_port", "extra_max_connections",
    "defaults_file", "defaults_extra_file", "defaults_group_suffix", "no_defaults", "print_defaults",
    "bootstrap", "skip_grant_tables", "skip_networking", "help", "verbose", "version",
    "daemonize", "chroot",
})

#: Options a spec may never set, with the reason, because a spec comes from whoever may submit
#: and the server runs on a worker beside the fleet's secrets:
#:  - code: plugins are shared libraries the server dlopen()s (plugin_load, plugin_load_add,
#:    plugin_dir, plugin_maturity widens what loads); galera's wsrep_provider is one too and
#:    wsrep_notify_cmd / wsrep_sst_method run programs; init_file, init_connect, init_slave and
#:    init_rpl_role run SQL the workload did not ask for (init_file as root);
#:  - paths: every option that names a file or directory the server reads or writes (logs,
#:    binary and relay logs, tablespaces outside the datadir, temporary directories, message
#:    and character set directories, stopword files, TLS keys, secure_file_priv, debug traces),
#:    so a server can only touch its own scratch datadir. Matched by name and by pattern
#:    (RESERVED_PREFIXES, RESERVED_SUFFIXES) so a build's extra path options are caught too;
#:    a few harmless switches that match a pattern (core_file, innodb_status_file) go with them.
RESERVED_CODE = frozenset({"init_file", "init_connect", "init_slave", "init_rpl_role", "wsrep_provider",
                           "wsrep_notify_cmd", "wsrep_sst_method"})
RESERVED_PATHS = frozenset({
    "log_basename", "log_bin", "log_bin_index", "relay_log", "relay_log_index", "log_tc", "log_ddl_recovery",
    "secure_file_priv", "language", "tmpdir",
})
#: Name prefixes reserved whole: plugins, SQL run at start or connect, galera, the server's TLS
#: identity files, debug traces.
RESERVED_PREFIXES = ("plugin_", "init_", "wsrep", "ssl", "debug")
#: Name endings of path-valued options (general_log_file, innodb_data_home_dir, aria_log_dir_path,
#: innodb_buffer_pool_filename, innodb_undo_directory, innodb_tmpdir, ...).
RESERVED_SUFFIXES = ("_dir", "_directory", "_file", "_filename", "_path", "tmpdir")

#: Kept for callers that knew one set: every exact name a spec may not set.
RESERVED = WORKER_OWNED | RESERVED_CODE | RESERVED_PATHS

#: Prefixes my_getopt accepts in front of option names (`--skip-name-resolve`, `--loose-x`).
_PREFIXES = ("skip_", "enable_", "disable_", "loose_", "maximum_")


def thread_pool(options: Mapping[str, object]) -> bool:
    """Whether ``options`` give the server a thread pool (thread_handling=pool-of-threads), behind
    which a monitor's statements queue with the load's unless they come through extra_port."""
    return any(normalise(k) == "thread_handling" and normalise(str(v)) == "pool_of_threads"
               for k, v in options.items())


def normalise(name: str) -> str:
    """`thread-handling` and `thread_handling` are the same option; compare with underscores."""
    return name.replace("-", "_")


def readings(name: str) -> list[str]:
    """Every option ``name`` may set: itself and each form without my_getopt's prefixes
    (`loose-skip-plugin-load` -> loose_skip_plugin_load, skip_plugin_load, plugin_load)."""
    out = [normalise(name)]
    stripped = True
    while stripped:
        stripped = False
        for prefix in _PREFIXES:
            if out[-1].startswith(prefix) and len(out[-1]) > len(prefix):
                out.append(out[-1][len(prefix):])
                stripped = True
                break
    return out


def reserved_problem(name: str) -> str | None:
    """Why a spec may not set option ``name`` (see RESERVED_CODE and RESERVED_PATHS), or None."""
    bases = readings(name)
    if any(b in WORKER_OWNED for b in bases):
        return "set by the worker for every managed server; a spec may not change it"
    if any(b in RESERVED_CODE or b.startswith(("plugin_", "init_", "wsrep")) for b in bases):
        return "reserved: it loads code or runs SQL or programs on the worker; a spec may not set it"
    if any(b in RESERVED_PATHS or b.startswith(RESERVED_PREFIXES) or b.endswith(RESERVED_SUFFIXES) for b in bases):
        return ("reserved: it names a file or directory on the worker; the managed server keeps every "
                "file in its own datadir")
    return None


#: What reports and exports show instead of the value of an option that looks like a secret.
HIDDEN_VALUE = "hidden"
_SECRET_WORDS = ("password", "passwd", "secret", "token", "filekey")
V = TypeVar("V")


def is_secret_name(name: str) -> bool:
    """Whether a setting or option called ``name`` may hold a secret (or say where one is kept):
    reports and exports never show its value."""
    k = name.lower().replace("-", "_")
    # "*_auth" is wsrep_sst_auth's user:password; a bare "auth" would hide default_authentication_plugin.
    return any(word in k for word in _SECRET_WORDS) or k.endswith("_auth")


def hide_secrets(values: Mapping[str, V]) -> dict[str, V | str]:
    """``values`` (options or variables by name) with HIDDEN_VALUE for every secret-named one."""
    return {k: HIDDEN_VALUE if is_secret_name(k) else v for k, v in values.items()}


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a spec option (pattern, reserved, or not on the allow-list), or None."""
    if not re.fullmatch(OPTION_NAME_PATTERN, name):
        return "invalid option name (allowed: lowercase letters, digits, _ and -)"
    problem = reserved_problem(name)
    if problem:
        return problem
    try:
        server_allowed.canonical(name, None)
    except NotAllowed as e:
        return str(e)
    return None


def form_problem(name: str, value: object) -> str | None:
    """Why ``name``/``value`` could not be a server option of any spec, recorded or new: the
    name's pattern, a reserved name, the value's characters."""
    if not re.fullmatch(OPTION_NAME_PATTERN, name):
        return "invalid option name (allowed: lowercase letters, digits, _ and -)"
    return reserved_problem(name) or value_problem(value)


def option_problem(name: str, value: object) -> str | None:
    """Why a spec may not set option ``name`` to ``value``, or None: the name's problem, the
    value's form, then the bounds of the option it resolves to."""
    problem = name_problem(name) or value_problem(value)
    if problem:
        return problem
    try:
        base, resolved = server_allowed.canonical(name, value)
    except NotAllowed as e:
        return str(e)
    return server_allowed.value_problem(base, resolved)


def canonical(options: Mapping[str, V]) -> dict[str, V | bool | None]:
    """``options`` (checked) by their full names with prefixes resolved: what the server is given,
    so no prefix or abbreviation ever reaches its option parser."""
    return dict(server_allowed.canonical(k, v) for k, v in options.items())  # type: ignore[misc]


def render_value(value: object) -> str | None:
    """The text after `=`: booleans become ON/OFF, None means a bare `--flag`."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "ON" if value else "OFF"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def value_problem(value: object) -> str | None:
    """Why ``value`` cannot be passed as an option value, or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number"
    text = render_value(value)
    if text is None:
        return None
    if not re.fullmatch(OPTION_VALUE_PATTERN, text):
        return "invalid value (allowed: letters, digits and _ . , : + / @ = % -; no spaces or quotes)"
    # A path option this module does not know still cannot leave the datadir.
    if text.startswith("/") or ".." in text.split("/"):
        return "an absolute path or '..' is not accepted in option values; the server keeps its files in its datadir"
    return None


def argv(options: Mapping[str, object]) -> list[str]:
    """`--name=value` (or `--name`) for each option, in the spec's order, by its full name."""
    out = []
    for name, value in canonical(options).items():
        text = render_value(value)
        out.append(f"--{name}" if text is None else f"--{name}={text}")
    return out


def parse_help(text: str) -> frozenset[str]:
    """Option names (underscored) from `mariadbd --help --verbose` output.

    The option list has one `  --name[=...]` line per option; the variables table at the end
    has `name   value` lines. Both are read, so a build whose help lacks one still works.
    """
    names: set[str] = set()
    in_vars = False
    for line in text.splitlines():
        m = re.match(r"^\s{1,4}--([a-z0-9][a-z0-9_-]*)", line)
        if m:
            names.add(normalise(m.group(1)))
            continue
        if line.startswith("-" * 20):
            in_vars = True  # the rule under the variables table's header
            continue
        if in_vars:
            m = re.match(r"^([a-z0-9][a-z0-9_.-]*)\s+\S", line)
            if m:
                names.add(normalise(m.group(1)))
    return frozenset(names)


def unknown_options(options: Iterable[str], accepted: frozenset[str]) -> list[str]:
    """The option names (as given) that the binary does not accept, prefixes considered.

    Abbreviations are refused on purpose: my_getopt would take `key_buffer` for
    `key_buffer_size`, and an abbreviation could reach an option refused by its full name.
    """
    bad = []
    for name in options:
        try:
            base, _ = server_allowed.canonical(name, None)
        except NotAllowed:
            bad.append(name)
            continue
        if base not in accepted:
            bad.append(name)
    return bad


#: The switch that makes a server take exact option names only (a build has it when its
#: `--help --verbose` lists getopt-prefix-matching, as Debian 12's MariaDB 10.11 does).
EXACT_NAMES_FLAG = "--skip-getopt-prefix-matching"


def exact_names_args(accepted: frozenset[str]) -> list[str]:
    """[EXACT_NAMES_FLAG] when a build with the ``accepted`` options has it, else []."""
    return [EXACT_NAMES_FLAG] if "getopt_prefix_matching" in accepted else []


def suggestion(name: str, accepted: frozenset[str]) -> str | None:
    """The closest accepted name, for "did you mean" in error messages."""
    import difflib

    close = difflib.get_close_matches(normalise(name), sorted(accepted), n=1, cutoff=0.75)
    return close[0] if close else None


def parse_cpus(text: str | int) -> list[int]:
    """`0,2-3` -> [0, 2, 3]; raise ValueError naming the bad part."""
    text = str(text)
    if not re.fullmatch(CPU_LIST_PATTERN, text.replace(" ", "")):
        raise ValueError(f"{text!r} is not a CPU list like 1 or 0,2-3")
    cpus: list[int] = []
    for part in text.replace(" ", "").split(","):
        lo, _, hi = part.partition("-")
        if hi and int(hi) < int(lo):
            raise ValueError(f"{part!r}: range goes backwards")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return sorted(set(cpus))


def format_cpus(cpus: Iterable[int]) -> str:
    """[0, 2, 3] -> `0,2-3`."""
    out: list[str] = []
    run: list[int] = []
    for c in sorted(set(cpus)):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)



def cpus_apart(server: Iterable[int], client: Iterable[int]) -> bool:
    """Whether a server pinned to ``server`` leaves the ``client`` CPUs (a non-empty list) to the load."""
    client = set(client)
    return bool(client) and not set(server) & client


def split_cpus(available: Iterable[int], server: str | None = None, client: str | None = None,
               worker_client: Iterable[int] | None = None) -> tuple[list[int], list[int]]:
    """(server CPUs, client CPUs) for a managed target on a worker allowed ``available``.

    Given lists win; the worker's --client-cpus stands in for a missing client list. The
    default puts the server on the first half (at least one CPU) and the clients on the
    rest, as the thread pool study did with taskset; a single CPU is shared by both.
    """
    avail = sorted(set(available))
    s = parse_cpus(server) if server is not None else None
    c = parse_cpus(client) if client is not None else (sorted(set(worker_client)) if worker_client else None)
    for field, cpus in (("server_cpus", s), ("client_cpus", c)):
        if cpus is not None:
            missing = [x for x in cpus if x not in avail]
            if missing:
                raise CpuSplitError(field, f"CPU {format_cpus(missing)} not available on this worker "
                                           f"(available: {format_cpus(avail)})")
    if s is None and c is None:
        if len(avail) == 1:
            return avail, avail
        half = max(1, len(avail) // 2)
        return avail[:half], avail[half:]
    if s is None:
        s = [x for x in avail if x not in c] or avail
    if c is None:
        c = [x for x in avail if x not in s] or avail
    return s, c
