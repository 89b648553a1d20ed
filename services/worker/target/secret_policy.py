"""Which passwords a spec may make this worker use: the worker operator's choice, never the fleet's.

A spec comes from whoever may submit, and names where a worker finds a target's password
(``password_env``, ``password_file``); the worker then sends that password to the spec's host.
So the operator lists what specs may name, and the fleet's own secrets are never among them:

  BENCHFLEET_TARGET_PASSWORD_ENV    comma-separated variable names; ``NAME*`` allows a prefix,
                                    ``*`` any variable. Unset or empty: none.
  BENCHFLEET_TARGET_PASSWORD_DIRS   comma- or colon-separated directories whose files specs
                                    may name. Unset or empty: none.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from services.common.errors import SettingsError, TargetError

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
class SecretPolicy:
    """What specs may name for passwords on this worker (see the module docstring)."""

    env_names: frozenset[str] = frozenset()
    env_prefixes: tuple[str, ...] = ()
    dirs: tuple[str, ...] = ()
    forbidden_dirs: tuple[str, ...] = ()
    forbidden_files: frozenset[str] = frozenset()

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> "SecretPolicy":
        """The operator's policy; SettingsError for an entry that could only ever be refused."""
        names: set[str] = set()
        prefixes: list[str] = []
        for entry in filter(None, (e.strip() for e in environ.get(ENV_ALLOW, "").split(","))):
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\*?|\*", entry):
                raise SettingsError(f"{ENV_ALLOW}: {entry!r} is not a variable name (or NAME* / *)")
            if entry.upper().startswith(FLEET_PREFIX):
                raise SettingsError(f"{ENV_ALLOW}: {entry} is one of the fleet's own variables; specs may "
                                    "never name those")
            if entry.endswith("*"):
                prefixes.append(entry[:-1])
            else:
                names.add(entry)
        forbidden = [_real(fleet_secrets_dir(environ)), _real(managed_dir(environ))]
        files = {_real(environ[k]) for k in FLEET_SECRET_FILES if environ.get(k)}
        dirs: list[str] = []
        for entry in filter(None, (e.strip() for e in re.split(r"[,:]", environ.get(DIRS_ALLOW, "")))):
            if not entry.startswith(("/", "~")):
                raise SettingsError(f"{DIRS_ALLOW}: {entry!r} is not an absolute directory")
            real = _real(entry)
            clash = next((f for f in forbidden if _inside(real, f) or _inside(f, real)), None)
            if clash is not None:
                raise SettingsError(f"{DIRS_ALLOW}: {entry} overlaps the fleet's own secrets ({clash}); give "
                                    "target passwords a directory of their own")
            dirs.append(real)
        return cls(frozenset(names), tuple(prefixes), tuple(dirs), tuple(forbidden), frozenset(files))

    def env_problem(self, name: str) -> str | None:
        """Why a spec may not name variable ``name`` for a password here, or None."""
        if name.upper().startswith(FLEET_PREFIX):
            return f"{name} is one of the fleet's own variables; a spec may never name it"
        if name in self.env_names or any(name.startswith(p) for p in self.env_prefixes):
            return None
        allowed = sorted(self.env_names) + [p + "*" for p in self.env_prefixes]
        return (f"{name} is not a variable this worker lets specs name (the worker's {ENV_ALLOW}: "
                f"{', '.join(allowed) if allowed else 'none configured'})")

    def file_problem(self, real_path: str) -> str | None:
        """Why a spec may not name the file at ``real_path`` (symlinks resolved), or None."""
        if real_path in self.forbidden_files or any(_inside(real_path, d) for d in self.forbidden_dirs):
            return "it is one of the fleet's own secrets; a spec may never name it"
        if any(_inside(real_path, d) and real_path != d for d in self.dirs):
            return None
        return (f"it is not in a directory this worker lets specs name (the worker's {DIRS_ALLOW}: "
                f"{', '.join(self.dirs) if self.dirs else 'none configured'})")

    def describe(self) -> dict[str, object]:
        """The policy for the worker's start-up log line (names and directories, no secrets)."""
        return {"allowed_env": sorted(self.env_names) + [p + "*" for p in self.env_prefixes],
                "allowed_dirs": list(self.dirs)}


def expand(text: str, environ: Mapping[str, str]) -> str:
    """``${VAR}`` and a leading ``~`` of a password_file, as the worker sees them."""
    out = re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: environ.get(m.group(1), m.group(0)), text)
    return os.path.expanduser(out)


def resolve_password(field: str, password_env: str | None, password_file: str | None,
                     environ: Mapping[str, str], policy: SecretPolicy) -> str:
    """The password a spec names, if the policy allows it; TargetError naming the spec field
    otherwise. Messages quote the spec's text, never an expanded path (``${VAR}`` could hold a
    secret)."""
    if password_env is not None:
        problem = policy.env_problem(password_env)
        if problem:
            raise TargetError(f"{field}.password_env", problem)
        if password_env not in environ:
            raise TargetError(f"{field}.password_env", f"environment variable {password_env} is not set on this worker")
        return environ[password_env]
    if password_file is not None:
        real = os.path.realpath(expand(password_file, environ))
        problem = policy.file_problem(real)
        if problem:
            raise TargetError(f"{field}.password_file", f"{password_file}: {problem}")
        try:
            with open(real, "rb") as f:
                raw = f.read(MAX_PASSWORD_BYTES + 1)
        except OSError as e:
            raise TargetError(f"{field}.password_file", f"cannot read {password_file} on this worker: {e.strerror}") from None
        if len(raw) > MAX_PASSWORD_BYTES:
            raise TargetError(f"{field}.password_file", f"{password_file} is larger than {MAX_PASSWORD_BYTES} bytes")
        return raw.decode("utf-8", errors="replace").strip()
    return ""

