"""Which passwords a spec may make this worker use: the worker operator's choice, never the fleet's.

A spec comes from whoever may submit, and names where a worker finds a target's password
(``password_env``, ``password_file``); the worker then sends that password to the spec's host.
So the operator lists what specs may name, each with the server it may be sent to, and the
fleet's own secrets are never among them:

  BENCHFLEET_TARGET_PASSWORD_ENV    comma-separated ``NAME@HOST[:PORT]``: a variable and where its
                                    value may go; ``NAME*`` allows a prefix, ``*`` any variable.
  BENCHFLEET_TARGET_PASSWORD_DIRS   comma-separated ``DIRECTORY@HOST[:PORT]``: a directory whose
                                    files specs may name, and where they may go.

Unset or empty: none. The ``@`` part is destinations.py's (a socket path, ``:*`` for any port);
one name or directory may be listed once per destination. An entry without ``@`` (the form of
earlier versions) still works, for this worker's loopback only, and the worker logs a warning
at start naming it (``target_password_unbound``); the DIRS of that form may also be colon-separated.

Never allowed, whatever is configured: variables starting with ``BENCHFLEET_`` (broker and
results-DB passwords live there), files under the fleet's secrets directory
(``BENCHFLEET_SECRETS``, default /var/lib/benchfleet/secrets as root) or the managed-server
directory (which holds managed servers' client passwords), and the files the fleet's own
settings read (``BENCHFLEET_*_PASSWORD_FILE``, TLS keys).

The environment comes in as a mapping; the only file read is a password file the policy allows.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping

from services.common.errors import SettingsError, TargetError
from services.worker.target import destinations
from services.worker.target.destinations import LOOPBACK, Destination, Where

ENV_ALLOW = "BENCHFLEET_TARGET_PASSWORD_ENV"
DIRS_ALLOW = "BENCHFLEET_TARGET_PASSWORD_DIRS"
#: The fleet's own variables: never a target's password, whatever the operator configured.
FLEET_PREFIX = "BENCHFLEET_"
#: Settings whose values are files holding the fleet's own secrets.
FLEET_SECRET_FILES = ("BENCHFLEET_DB_PASSWORD_FILE", "BENCHFLEET_AMQP_PASSWORD_FILE", "BENCHFLEET_AMQP_TLS_KEY",
                      "BENCHFLEET_DB_TLS_KEY", "BENCHFLEET_GRAFANA_DB_PASSWORD_FILE")
#: The longest password file read: a password, not a file that happens to be allowed.
MAX_PASSWORD_BYTES = 4096


def fleet_secrets_dir(environ: Mapping[str, str]) -> Path:
    """Where deploy/ensure-services keeps the fleet's generated passwords."""
    if environ.get("BENCHFLEET_SECRETS"):
        return Path(environ["BENCHFLEET_SECRETS"])
    if os.geteuid() == 0:
        return Path("/var/lib/benchfleet/secrets")
    return Path.home() / ".config" / "benchfleet" / "secrets"


def managed_dir(environ: Mapping[str, str]) -> Path:
    """Where managed servers keep their templates and datadirs (see target/managed.py)."""
    if environ.get("BENCHFLEET_MANAGED_DIR"):
        return Path(environ["BENCHFLEET_MANAGED_DIR"])
    if os.geteuid() == 0:
        return Path("/var/lib/benchfleet/managed")
    return Path.home() / ".cache" / "benchfleet" / "managed"


def _real(path: str | Path) -> str:
    return os.path.realpath(os.path.expanduser(str(path)))


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


@dataclass(frozen=True)
class Rule:
    """One allow-list entry: a variable name (``prefix``: a ``NAME*``) or a directory, and
    where what it names may be sent."""

    source: str
    destination: Destination
    prefix: bool = False

    def names(self, variable: str) -> bool:
        return variable.startswith(self.source) if self.prefix else variable == self.source

    def holds(self, real_path: str) -> bool:
        return _inside(real_path, self.source) and real_path != self.source

    def __str__(self) -> str:
        source = self.source + ("*" if self.prefix else "")
        return source if self.destination.loopback else f"{source}@{self.destination}"


def _entries(text: str, *, colons: bool) -> list[tuple[str, Destination]]:
    """(source, destination) of each entry; ``colons``: colons separate entries too (the DIRS
    of earlier versions, when no entry has an ``@``)."""
    sep = r"[,:]" if colons and "@" not in text else ","
    out = []
    for entry in filter(None, (e.strip() for e in re.split(sep, text))):
        source, at, where = entry.rpartition("@") if "@" in entry else (entry, "", "")
        destination = destinations.parse(where) if at else LOOPBACK
        if destination.socket is not None:
            # Compared resolved, as the target's socket is (dsn.py) and the socket directory check
            # resolves it (account_policy.py): two spellings of one socket are one destination.
            destination = replace(destination, socket=os.path.realpath(destination.socket))
        out.append((source, destination))
    return out


def _setting_entries(environ: Mapping[str, str], setting: str, *, colons: bool) -> list[tuple[str, Destination]]:
    """The entries of allow-list ``setting``; SettingsError naming it for a destination that does not parse."""
    try:
        return _entries(environ.get(setting, ""), colons=colons)
    except ValueError as e:
        raise SettingsError(f"{setting}: {e}") from None


@dataclass(frozen=True)
class SecretPolicy:
    """What specs may name for passwords on this worker, and where each may go (see the module
    docstring)."""

    env_rules: tuple[Rule, ...] = ()
    dir_rules: tuple[Rule, ...] = ()
    forbidden_dirs: tuple[str, ...] = ()
    forbidden_files: frozenset[str] = frozenset()

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> "SecretPolicy":
        """The operator's policy; SettingsError for an entry that could only ever be refused."""
        env_rules: list[Rule] = []
        for entry, where in _setting_entries(environ, ENV_ALLOW, colons=False):
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\*?|\*", entry):
                raise SettingsError(f"{ENV_ALLOW}: {entry!r} is not a variable name (or NAME* / *)")
            if entry.upper().startswith(FLEET_PREFIX):
                raise SettingsError(f"{ENV_ALLOW}: {entry} is one of the fleet's own variables; specs may "
                                    "never name those")
            prefix = entry.endswith("*")
            env_rules.append(Rule(entry[:-1] if prefix else entry, where, prefix))
        forbidden = [_real(fleet_secrets_dir(environ)), _real(managed_dir(environ))]
        files = {_real(environ[k]) for k in FLEET_SECRET_FILES if environ.get(k)}
        dir_rules: list[Rule] = []
        for entry, where in _setting_entries(environ, DIRS_ALLOW, colons=True):
            if not entry.startswith(("/", "~")):
                raise SettingsError(f"{DIRS_ALLOW}: {entry!r} is not an absolute directory")
            real = _real(entry)
            clash = next((f for f in forbidden if _inside(real, f) or _inside(f, real)), None)
            if clash is not None:
                raise SettingsError(f"{DIRS_ALLOW}: {entry} overlaps the fleet's own secrets ({clash}); give "
                                    "target passwords a directory of their own")
            dir_rules.append(Rule(real, where))
        return cls(tuple(env_rules), tuple(dir_rules), tuple(forbidden), frozenset(files))

    @property
    def unbound(self) -> list[str]:
        """Entries naming no destination (the allow-list's earlier form): loopback only."""
        return [str(r) for r in (*self.env_rules, *self.dir_rules) if r.destination.loopback]

    def env_problem(self, name: str, where: Where | None = None) -> tuple[str, str] | None:
        """(the spec field at fault, why) a spec may not send variable ``name``'s value to
        ``where`` (None: anywhere it is allowed), or None."""
        if name.upper().startswith(FLEET_PREFIX):
            return "password_env", f"{name} is one of the fleet's own variables; a spec may never name it"
        rules = [r for r in self.env_rules if r.names(name)]
        if not rules:
            allowed = ", ".join(str(r) for r in self.env_rules) or "none configured"
            return "password_env", (f"{name} is not a variable this worker lets specs name (the worker's "
                                    f"{ENV_ALLOW}: {allowed})")
        return _bound(name, rules, where, ENV_ALLOW)

    def file_problem(self, real_path: str, where: Where | None = None, label: str = "it") -> tuple[str, str] | None:
        """(the spec field at fault, why) a spec may not send the file at ``real_path``
        (symlinks resolved; ``label`` as the spec names it) to ``where``, or None."""
        if real_path in self.forbidden_files or any(_inside(real_path, d) for d in self.forbidden_dirs):
            return "password_file", "it is one of the fleet's own secrets; a spec may never name it"
        rules = [r for r in self.dir_rules if r.holds(real_path)]
        if not rules:
            allowed = ", ".join(str(r) for r in self.dir_rules) or "none configured"
            return "password_file", (f"it is not in a directory this worker lets specs name (the worker's "
                                     f"{DIRS_ALLOW}: {allowed})")
        return _bound(label, rules, where, DIRS_ALLOW)

    def describe(self) -> dict[str, object]:
        """The policy for the worker's start-up log line (names, directories and their
        destinations, no secrets)."""
        return {"allowed_env": [str(r) for r in self.env_rules], "allowed_dirs": [str(r) for r in self.dir_rules]}


def _bound(what: str, rules: list[Rule], where: Where | None, setting: str) -> tuple[str, str] | None:
    """Why ``where`` is none of ``rules``' destinations, naming the target field that points
    elsewhere (socket, port when only the port differs, else host), or None."""
    if where is None or any(r.destination.admits(where) for r in rules):
        return None
    field = "socket" if where.socket else "port" if any(r.destination.same_host(where) for r in rules) else "host"
    bound = ", ".join(str(r.destination) for r in rules)
    return field, (f"{where} is not where {what} may be sent: the worker's {setting} binds it to {bound}; "
                   "the operator adds SOURCE@HOST:PORT for another server")


def expand(text: str, environ: Mapping[str, str]) -> str:
    """``${VAR}`` and a leading ``~`` of a password_file, as the worker sees them."""
    out = re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: environ.get(m.group(1), m.group(0)), text)
    return os.path.expanduser(out)


def resolve_password(field: str, password_env: str | None, password_file: str | None,
                     environ: Mapping[str, str], policy: SecretPolicy, where: Where | None = None) -> str:
    """The password a spec names, if the policy allows sending it to ``where`` (the target's
    address); TargetError naming the spec field otherwise. Messages quote the spec's text, never
    an expanded path (``${VAR}`` could hold a secret)."""
    if password_env is not None:
        problem = policy.env_problem(password_env, where)
        if problem:
            raise TargetError(f"{field}.{problem[0]}", problem[1])
        if password_env not in environ:
            raise TargetError(f"{field}.password_env", f"environment variable {password_env} is not set on this worker")
        return environ[password_env]
    if password_file is not None:
        real = os.path.realpath(expand(password_file, environ))
        problem = policy.file_problem(real, where, label=password_file)
        if problem:
            message = f"{password_file}: {problem[1]}" if problem[0] == "password_file" else problem[1]
            raise TargetError(f"{field}.{problem[0]}", message)
        try:
            with open(real, "rb") as f:
                raw = f.read(MAX_PASSWORD_BYTES + 1)
        except OSError as e:
            raise TargetError(f"{field}.password_file", f"cannot read {password_file} on this worker: {e.strerror}") from None
        if len(raw) > MAX_PASSWORD_BYTES:
            raise TargetError(f"{field}.password_file", f"{password_file} is larger than {MAX_PASSWORD_BYTES} bytes")
        return raw.decode("utf-8", errors="replace").strip()
    return ""
