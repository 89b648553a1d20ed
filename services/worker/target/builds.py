"""The worker's build registry: server trees the operator installed, by name (`worker builds`).

Layout under the registry directory (``--builds-dir`` / BENCHFLEET_BUILDS_DIR, default
/var/lib/benchfleet/builds as root, else ~/.cache/benchfleet/builds):

  <name>/build.json   the BuildRecord (services/common/messages/builds.py)
  <name>/tree/        the extracted packages or tarball (a ``dir`` build stays where it is)

A build is checked before it is registered: its server must run `--version`. It is written
under a temporary name and renamed into place, so a half-extracted tree is never a build.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import time
from pathlib import Path
from typing import Callable, Iterator

from services.common.spec import server_binary
from services.common.messages.builds import SYSTEM_BUILD, BuildInfo, BuildRecord, BuildSource
from services.common.errors import BuildError
from services.common.spec.fields import NAME_PATTERN
from services.worker.target import safe_tar

#: The Debian packages a build is made of: the server (mariadbd, mariadb-install-db, share/mysql
#: with the system tables' SQL and error messages) and the client tools the install script runs
#: (my_print_defaults, resolveip ship in the server package; mariadb in the client one).
#: mariadb-common holds only /etc configuration, which a managed server never reads
#: (--no-defaults), so it is not needed.
DEBIAN_PACKAGES = ("mariadb-server-core", "mariadb-client-core")
#: Where a server binary lies in a build tree, relative to its basedir.
SERVER_PATHS = ("sbin/mariadbd", "bin/mariadbd", "libexec/mariadbd", "sbin/mysqld", "bin/mysqld", "libexec/mysqld")
#: Seconds apt-get download, an extraction or `--version` may take.
APT_TIMEOUT_S = 300.0
VERSION_TIMEOUT_S = 30.0
RECORD = "build.json"
_VERSION = re.compile(r"\bVer\s+(\S+)")


def default_dir() -> Path:
    env = os.environ.get("BENCHFLEET_BUILDS_DIR")
    if env:
        return Path(env)
    if os.geteuid() == 0:
        return Path("/var/lib/benchfleet/builds")
    return Path.home() / ".cache" / "benchfleet" / "builds"


def sha256_of(path: Path) -> str:
    """The sha256 of a file, cached by path, size and mtime (a server binary is 50+ MB)."""
    st = path.stat()
    return _sha256(str(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def parse_version(text: str) -> str | None:
    """The version of `mariadbd --version` output ("... Ver 10.11.18-MariaDB-0+deb12u1 for ...")."""
    m = _VERSION.search(text)
    return m.group(1) if m else None


def server_version(binary: Path, basedir: Path | None = None) -> str:
    """The version the server prints with `--version`; BuildError when it does not run."""
    argv = [*server_binary.server_argv(binary, basedir), "--version"]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=VERSION_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as e:
        raise BuildError(f"{binary} --version did not run: {e}") from None
    version = parse_version(p.stdout)
    if p.returncode != 0 or version is None:
        raise BuildError(f"{binary} --version failed (exit {p.returncode}): {(p.stderr or p.stdout).strip()[-500:]}")
    return version


def find_server(basedir: Path) -> Path:
    """The server binary under ``basedir``; BuildError naming what was tried."""
    for rel in SERVER_PATHS:
        c = basedir / rel
        if c.is_file() and os.access(c, os.X_OK):
            return c
    raise BuildError(f"no server binary under {basedir} (tried {', '.join(SERVER_PATHS)})")


def find_basedir(tree: Path) -> Path:
    """The directory of ``tree`` (itself, usr/, or one top-level directory) holding a server."""
    candidates = [tree, tree / "usr", *sorted(p for p in tree.iterdir() if p.is_dir())]
    candidates += [c / "usr" for c in candidates[2:]]
    for c in candidates:
        if any((c / rel).is_file() for rel in SERVER_PATHS):
            return c
    raise BuildError(f"no server binary in {tree} or its top-level directories (looked for {', '.join(SERVER_PATHS)})")


def system_info() -> BuildInfo | None:
    """The worker's system server as a build (``system``), or None when there is none. Cached by
    the binary's path, size and mtime, so an apt upgrade is announced with its new version."""
    try:
        binary = server_binary.system_binary()
        st = binary.stat()
    except (server_binary.BinaryNotFound, OSError):
        return None
    return _system_info(str(binary), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _system_info(binary: str, size: int, mtime_ns: int) -> BuildInfo | None:
    try:
        return BuildInfo(name=SYSTEM_BUILD, version=server_version(Path(binary)), server_sha256=sha256_of(Path(binary)),
                         source="system")
    except (BuildError, OSError):
        return None


def _current_info(record: BuildRecord) -> BuildInfo:
    """``record`` as announced: its binary's digest and version now (the registered ones when
    the binary cannot be read or run; the run then fails naming the build)."""
    try:
        sha = sha256_of(Path(record.binary))
        return BuildInfo(name=record.name, version=current_version(record, sha), server_sha256=sha,
                         source=record.source)
    except (BuildError, OSError):
        return record.info()


def current_version(record: BuildRecord, sha256: str) -> str:
    """The version of ``record``'s server as it is now: the registered one while the binary is the
    registered one (``sha256``), else what the binary prints now (a ``dir`` build rebuilt in place).
    BuildError when the changed binary no longer runs."""
    if sha256 == record.server_sha256:
        return record.version
    return _version_of(record.binary, record.basedir, sha256)


@functools.lru_cache(maxsize=16)
def _version_of(binary: str, basedir: str, sha256: str) -> str:
    # Keyed on the digest: one `--version` per rebuilt binary, not one per run.
    return server_version(Path(binary), Path(basedir))


# --------------------------------------------------------------------------- Debian versions


def debian_version(requested: str, available: list[str]) -> str:
    """The one Debian version of ``available`` that ``requested`` names: a full version
    ("1:10.11.18-0+deb12u1") or an upstream one ("10.11.18"). BuildError otherwise."""
    if requested in available:
        return requested
    matches = [v for v in available if v.split(":", 1)[-1].split("-", 1)[0] == requested]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise BuildError(f"--debian: no version {requested} of {DEBIAN_PACKAGES[0]} in this host's package index "
                         f"(available: {', '.join(available) or 'none'}; run apt-get update?)")
    raise BuildError(f"--debian: {requested} matches {', '.join(matches)}; give the full Debian version")


def parse_madison(text: str) -> list[str]:
    """Versions of `apt-cache madison PACKAGE` output, in its order, without repeats."""
    out: list[str] = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) >= 3 and parts[1] and parts[1] not in out:
            out.append(parts[1])
    return out


def _run(argv: list[str], cwd: Path | None = None, what: str = "") -> str:
    try:
        p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=APT_TIMEOUT_S,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as e:
        raise BuildError(f"{what or argv[0]}: {e}") from None
    if p.returncode != 0:
        raise BuildError(f"{what or ' '.join(argv)} failed (exit {p.returncode}): {(p.stderr or p.stdout).strip()[-800:]}")
    return p.stdout


# --------------------------------------------------------------------------- the registry


class Registry:
    """The builds registered on this host."""

    def __init__(self, root: Path | None = None):
        self.root = Path(root or default_dir())

    def list(self) -> list[BuildRecord]:
        """Every registered build, by name (a directory without a readable record is skipped)."""
        if not self.root.is_dir():
            return []
        out = []
        for d in sorted(self.root.iterdir()):
            if d.name.startswith(".") or not (d / RECORD).is_file():
                continue
            try:
                out.append(BuildRecord.model_validate_json((d / RECORD).read_text()))
            except (OSError, ValueError):
                continue
        return out

    def infos(self) -> list[BuildInfo]:
        """What this host announces: its registered builds (and the system server, when there is one)."""
        system = system_info()
        return ([system] if system is not None else []) + [_current_info(b) for b in self.list()]

    def get(self, name: str) -> BuildRecord:
        """The build ``name``; BuildError listing the registered ones when there is none."""
        path = self.root / name / RECORD
        if re.fullmatch(NAME_PATTERN, name) and path.is_file():
            try:
                return BuildRecord.model_validate_json(path.read_text())
            except (OSError, ValueError) as e:
                raise BuildError(f"build {name}: its record {path} cannot be read: {e}") from None
        known = ", ".join(b.name for b in self.list()) or "none"
        raise BuildError(f"build {name!r} is not registered on this worker (registered: {known}); "
                         f"register it with: worker builds add {name} --debian VERSION | --tarball FILE | --dir PATH")

    def remove(self, name: str) -> BuildRecord:
        """Unregister ``name`` and delete its tree (a ``dir`` build's directory is left alone)."""
        record = self.get(name)
        with self._lock():
            gone = self.root / f".{name}.removed-{os.getpid()}"
            os.rename(self.root / name, gone)
            shutil.rmtree(gone, ignore_errors=True)
        return record

    def add_debian(self, name: str, version: str) -> BuildRecord:
        """Register ``name`` from Debian's packages at ``version`` (apt-get download + dpkg -x)."""
        available = parse_madison(_run(["apt-cache", "madison", DEBIAN_PACKAGES[0]], what="apt-cache madison"))
        exact = debian_version(version, available)

        def fill(work: Path) -> tuple[str, Path]:
            dl = work / "debs"
            dl.mkdir()
            # apt drops privileges to _apt for downloads when it can write the directory as _apt.
            dl.chmod(0o777)
            _run(["apt-get", "download", "-q", *(f"{p}={exact}" for p in DEBIAN_PACKAGES)], cwd=dl,
                 what=f"apt-get download {' '.join(DEBIAN_PACKAGES)} at {exact}")
            tree = work / "tree"
            tree.mkdir()
            debs = sorted(dl.glob("*.deb"))
            if len(debs) != len(DEBIAN_PACKAGES):
                raise BuildError(f"apt-get download left {len(debs)} packages, expected {len(DEBIAN_PACKAGES)}")
            for deb in debs:
                _run(["dpkg-deb", "-x", str(deb), str(tree)], what=f"dpkg -x {deb.name}")
            shutil.rmtree(dl)
            return " ".join(f"{p}={exact}" for p in DEBIAN_PACKAGES), tree / "usr"

        return self._add(name, "debian", fill)

    def add_tarball(self, name: str, tarball: Path) -> BuildRecord:
        """Register ``name`` from a binary tarball (extracted without links leaving the tree)."""
        if not tarball.is_file():
            raise BuildError(f"--tarball: {tarball} is not a file")

        def fill(work: Path) -> tuple[str, Path]:
            tree = work / "tree"
            tree.mkdir()
            try:
                safe_tar.extract(tarball, tree)
            except (tarfile.TarError, OSError) as e:
                raise BuildError(f"--tarball: {tarball}: {e}") from None
            return tarball.name, find_basedir(tree)

        return self._add(name, "tarball", fill)

    def add_dir(self, name: str, directory: Path) -> BuildRecord:
        """Register ``name`` as a directory left where it is (a build the operator compiled)."""
        if not directory.is_dir():
            raise BuildError(f"--dir: {directory} is not a directory")
        base = find_basedir(directory.resolve())
        return self._add(name, "dir", lambda work: (str(directory.resolve()), base))

    def _add(self, name: str, source: BuildSource, fill: Callable[[Path], tuple[str, Path]]) -> BuildRecord:
        if not re.fullmatch(NAME_PATTERN, name):
            raise BuildError(f"build name {name!r}: letters, digits, '_', '.' and '-' only (at most 64)")
        if name == SYSTEM_BUILD:
            raise BuildError(f"build name {SYSTEM_BUILD!r} is the worker's own server; choose another name")
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)  # the managed server's user reads the trees
        if (self.root / name / RECORD).exists():
            raise BuildError(f"build {name!r} is already registered; remove it first (worker builds remove {name})")
        work = self.root / f".{name}.tmp-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(mode=0o755)
        try:
            origin, basedir = fill(work)
            binary = find_server(basedir)
            version = server_version(binary, basedir)
            final_base = Path(str(basedir).replace(str(work), str(self.root / name), 1))
            record = BuildRecord(name=name, source=source, origin=origin, basedir=str(final_base),
                                 binary=str(final_base / binary.relative_to(basedir)), version=version,
                                 server_sha256=sha256_of(binary), added_at=time.time())
            (work / RECORD).write_text(record.encode())
            with self._lock():
                if (self.root / name).exists():
                    raise BuildError(f"build {name!r} is already registered; remove it first")
                os.rename(work, self.root / name)
            return record
        finally:
            shutil.rmtree(work, ignore_errors=True)

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        """Serialise renames with other `worker builds` commands on this host."""
        with open(self.root / ".lock", "w") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            yield
