"""One managed mariadbd: its command line, its start (as the server user, pinned, with its
allocator preloaded and tied to the worker's life by the parent-death signal) and its stop."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.common import logs
from services.common.spec import server_binary, server_options
from services.common.spec.targets import ManagedTarget
from services.worker.target import flavours, parent_death
from services.worker.target.connect_params import ConnectParams
from services.worker.target.dsn import TargetError, connect
from services.worker.target.managed_template import CLIENT_USER, ServerBuild, chown_tree, log_tail
from services.worker.target.server_env import server_environment

log = logs.get(__name__)

#: The shared-library name of each preloaded allocator (spec ``malloc``), as it appears in /proc/PID/maps.
ALLOCATOR_LIBRARIES = {"jemalloc": "libjemalloc.so.2", "tcmalloc": "libtcmalloc_minimal.so.4"}
#: Debian packages that ship them (deploy/ensure-services worker installs them).
ALLOCATOR_PACKAGES = {"jemalloc": "libjemalloc2", "tcmalloc": "libtcmalloc-minimal4"}
#: Where a preloaded allocator may come from: the system's library directories only (a spec
#: names the allocator, never a file).
LIBRARY_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib")


def _child_setup(ids: tuple[int, int] | None, cpus: list[int] | None, parent: int):
    """The server's pre-exec: own session, drop to SERVER_USER, then the parent-death
    signal (after the uid change, which would clear it), then pin to the server CPUs."""

    def setup() -> None:
        os.setsid()
        if ids is not None:
            os.setgroups([])
            os.setgid(ids[1])
            os.setuid(ids[0])
        parent_death.die_with(parent)
        if cpus:
            os.sched_setaffinity(0, cpus)

    return setup


#: Connections extra_port admits: the status monitor and the identity query, and one spare.
EXTRA_MAX_CONNECTIONS = 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ManagedServer:
    """One running mariadbd of one target."""

    target: ManagedTarget
    key: str
    build: ServerBuild
    dir: Path
    port: int
    password: str
    server_cpus: list[int]
    client_cpus: list[int]
    proc: subprocess.Popen | None = None
    start_s: float = 0.0
    starts: int = 0
    reused: bool = False
    #: Its settings may differ from its options (quiesce could not restore them): start anew, not reuse.
    restart_before_reuse: bool = False
    #: The allocator found in the running server's /proc/PID/maps.
    malloc_loaded: str | None = None
    #: LD_PRELOAD for the server (the target's allocator), empty for glibc.
    preload: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    #: The monitor's port past the thread pool (monitored_past_pool), chosen at each start.
    extra_port: int | None = None
    #: Whether the build takes --skip-getopt-prefix-matching (server_options.exact_names_args).
    exact_names: bool = False

    @property
    def binary(self) -> Path:
        return self.build.binary

    @property
    def datadir(self) -> Path:
        return self.dir / "data"

    @property
    def socket(self) -> Path:
        return self.dir / "mysqld.sock"

    @property
    def error_log(self) -> Path:
        return self.dir / "error.log"

    @property
    def files_dir(self) -> Path:
        """secure_file_priv: an empty directory the server's user may not write, so LOAD DATA
        INFILE, SELECT ... INTO OUTFILE and LOAD_FILE() reach no file on the worker."""
        return self.dir / "no-files"

    @property
    def tmp_dir(self) -> Path:
        """tmpdir: the server's temporary tables beside its data, not in the host's /tmp, where their
        pid-named files meet those a killed server left (and other servers' and users' files)."""
        return self.dir / "tmp"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def connect_params(self) -> ConnectParams:
        return ConnectParams(unix_socket=str(self.socket), user=CLIENT_USER, password=self.password,
                             database=self.target.database)

    @property
    def monitored_past_pool(self) -> bool:
        """Whether the server gets an extra_port for the monitor: a MariaDB with a thread pool,
        whose queue would hold the monitor's SHOW GLOBAL STATUS behind the load."""
        return (server_options.thread_pool(self.target.options)
                and flavours.flavour_of(self.build.version).name == "mariadb")

    def monitor_params(self) -> ConnectParams:
        """How the status monitor reaches the server: through extra_port (its own threads, outside
        the pool) when the server has one, else as the clients do."""
        if self.monitored_past_pool and self.extra_port:
            return ConnectParams(host="127.0.0.1", port=self.extra_port, user=CLIENT_USER, password=self.password,
                                 database=self.target.database)
        return self.connect_params()

    def argv(self) -> list[str]:
        """The server's command line: exact option names only (where the build can be told so),
        the spec's options by their full names, then the worker's own, which win any repeat."""
        # extra_max_connections: the monitor and the identity query, with room for one more.
        extra = ([f"--extra-port={self.extra_port}", f"--extra-max-connections={EXTRA_MAX_CONNECTIONS}"]
                 if self.monitored_past_pool and self.extra_port else [])
        return [
            *server_binary.server_argv(self.binary, self.build.basedir),
            *([server_options.EXACT_NAMES_FLAG] if self.exact_names else []),
            *server_options.argv(self.target.options),
            f"--datadir={self.datadir}", f"--port={self.port}", "--bind-address=127.0.0.1",
            f"--socket={self.socket}", f"--pid-file={self.dir / 'mysqld.pid'}", f"--log-error={self.error_log}",
            f"--secure-file-priv={self.files_dir}", f"--tmpdir={self.tmp_dir}",
            *extra,
            *flavours.start_args(flavours.flavour_of(self.build.version)),
        ]

    def start(self, ids: tuple[int, int] | None) -> None:
        """Start the server and wait until it answers; raise TargetError with its log tail."""
        offsets = {p: (p.stat().st_size if p.exists() else 0) for p in (self.error_log, self.dir / "stderr.log")}
        self.port = free_port()
        self.extra_port = free_port() if self.monitored_past_pool else None
        t0 = time.monotonic()
        self.files_dir.mkdir(mode=0o555, exist_ok=True)  # read-only, so no OUTFILE lands in it either
        # Emptied at each start: what a server killed before left there is no later server's.
        shutil.rmtree(self.tmp_dir, ignore_errors=True)
        self.tmp_dir.mkdir(mode=0o700)
        chown_tree(self.tmp_dir, ids)
        env = server_environment(self.preload)
        with open(self.dir / "stderr.log", "ab") as err:
            self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=err, stderr=err, env=env,
                                         preexec_fn=_child_setup(ids, self.server_cpus, os.getpid()))
        deadline = t0 + self.target.start_timeout
        while True:
            code = self.proc.poll()
            if code is not None:
                self.proc = None
                raise TargetError(f"targets.{self.target.name}",
                                  f"mariadbd exited with code {code} while starting; its error log ends:\n"
                                  + self._log_tail(offsets))
            if time.monotonic() > deadline:
                self.kill()
                raise TargetError(f"targets.{self.target.name}",
                                  f"mariadbd did not accept connections within {self.target.start_timeout:g} s "
                                  "(start_timeout); its error log ends:\n" + self._log_tail(offsets))
            if self.socket.exists():
                try:
                    conn = connect(self.connect_params(), database=False)
                    conn.close()
                    break
                except Exception:
                    pass
            time.sleep(0.05)
        self.start_s = time.monotonic() - t0
        self.starts += 1
        self.malloc_loaded = loaded_allocator(_read_maps(self.proc.pid))
        if self.malloc_loaded != self.target.malloc:
            self.kill()
            raise TargetError(f"targets.{self.target.name}.malloc",
                              f"asked for {self.target.malloc}, but the server's memory map shows "
                              f"{self.malloc_loaded} loaded")
        log.info("managed_server_ready", target=self.target.name, pid=self.proc.pid, port=self.port,
                 seconds=round(self.start_s, 2), server_cpus=server_options.format_cpus(self.server_cpus))

    def _log_tail(self, offsets: dict[Path, int]) -> str:
        parts = [log_tail(p, off) for p, off in offsets.items()]
        return "\n".join(p for p in parts if p) or "(the error log is empty)"

    def stop(self) -> None:
        """Clean shutdown (SIGTERM), then SIGKILL to the process group after stop_timeout."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            t0 = time.monotonic()
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(self.target.stop_timeout)
                log.info("managed_server_stopped", target=self.target.name, seconds=round(time.monotonic() - t0, 2))
            except subprocess.TimeoutExpired:
                log.warning("managed_server_killed", target=self.target.name, after_s=self.target.stop_timeout)
                self.kill()
        self.proc = None

    def kill(self) -> None:
        if self.proc is None:
            return
        # Only while the server is not reaped is its pid still its group's: once reaped, the id may be
        # another process group's.
        if self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        self.proc = None


def loaded_allocator(maps: str) -> str:
    """The allocator a process has mapped, from its /proc/PID/maps text: jemalloc, tcmalloc or
    glibc (neither library mapped)."""
    for name, lib in ALLOCATOR_LIBRARIES.items():
        if f"/{lib.split('.so')[0]}.so" in maps:
            return name
    return "glibc"


def _read_maps(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return ""


def allocator_library(malloc: str, dirs: tuple[str, ...] = LIBRARY_DIRS) -> str:
    """The path to preload for ``malloc`` ("" for glibc); TargetError naming the package when
    the library is not installed."""
    if malloc == "glibc":
        return ""
    lib = ALLOCATOR_LIBRARIES[malloc]
    for d in dirs:
        p = Path(d) / lib
        if p.is_file():
            return str(p)
    raise TargetError("malloc", f"{malloc}: {lib} is not installed on this worker (Debian package "
                                f"{ALLOCATOR_PACKAGES[malloc]}; deploy/ensure-services worker installs it)")
