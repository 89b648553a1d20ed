"""Managed targets: the worker starts, reuses and stops its own mariadbd.

Layout under the managed directory (``--managed-dir``, default /var/lib/benchfleet/managed
as root, else ~/.cache/benchfleet/managed):

  templates/<build>/data     an initialised datadir (mariadb-install-db + a client user),
                             made once per server build and copied for each target
  run/<worker pid>/<target>/ one datadir, socket, pid file and error log per target, for
                             the life of the worker (removed at exit unless --keep-datadirs)

A target's datadir outlives a stop: when the campaign comes back to a target (A1 B1 A2 B2),
its server restarts on its own data, so the sbtest tables are prepared once per target and
table shape, and a start costs the server's start-up time only.

A worker never leaves a server behind: the server runs in its own process group, and its
parent-death signal (prctl PR_SET_PDEATHSIG, SIGKILL) is set after the switch to the server's
user (a credential change clears it). That signal fires when the *thread* that forked the
server ends, so every server is forked from one long-lived thread of this module, never from
the short-lived thread of a run.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.common import logs, server_binary, server_options
from services.common.builds import ALLOCATOR_LIBRARIES, ALLOCATOR_PACKAGES, SYSTEM_BUILD
from services.common.errors import BuildError
from services.common.spec import DataShape, ManagedTarget
from services.worker.target import builds as build_registry
from services.worker.target import flavours
from services.worker.target.dsn import TargetError, connect

log = logs.get(__name__)

#: The unix user a server runs as when the worker is root (mariadbd refuses to run as root): a
#: user of its own that owns nothing but the scratch datadirs, not `mysql`, which owns the
#: system server's datadir. deploy/ensure-services worker creates it.
SERVER_USER = "benchfleet-mysqld"
#: How to create SERVER_USER by hand (said when it is missing).
SERVER_USER_HINT = (f"create it with deploy/ensure-services worker, or: useradd --system --user-group "
                    f"--no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin {SERVER_USER}")
#: The account the load processes use on a managed server (created in the template).
CLIENT_USER = "benchfleet"
#: Lines of the server's error log quoted in a failed run's error message.
LOG_TAIL_LINES = 25
#: Seconds the template's mariadb-install-db may take.
INSTALL_TIMEOUT_S = 300.0
#: Options that fix the on-disk format: a template is initialised with them, so targets that
#: set them get a template of their own (other options only matter at start-up).
INIT_OPTIONS = frozenset({"innodb_page_size", "lower_case_table_names", "innodb_data_file_path",
                          "innodb_undo_tablespaces", "innodb_checksum_algorithm", "aria_block_size"})

#: Where a preloaded allocator may come from: the system's library directories only (a spec
#: names the allocator, never a file).
LIBRARY_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib")

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def default_dir() -> Path:
    env = os.environ.get("BENCHFLEET_MANAGED_DIR")
    if env:
        return Path(env)
    if os.geteuid() == 0:
        return Path("/var/lib/benchfleet/managed")
    return Path.home() / ".cache" / "benchfleet" / "managed"


def _server_ids() -> tuple[int, int] | None:
    """(uid, gid) to run servers as: SERVER_USER when root, else None (run as ourselves)."""
    if os.geteuid() != 0:
        return None
    try:
        pw = pwd.getpwnam(SERVER_USER)
    except KeyError:
        raise TargetError("kind", f"the worker runs as root and there is no {SERVER_USER!r} user to run "
                                  f"mariadbd as (mariadbd refuses to run as root); {SERVER_USER_HINT}") from None
    return pw.pw_uid, pw.pw_gid


def _chown_tree(path: Path, ids: tuple[int, int] | None) -> None:
    if ids is None:
        return
    for root, dirs, files in os.walk(path):
        os.chown(root, *ids)
        for n in dirs + files:
            os.lchown(os.path.join(root, n), *ids)


def _child_setup(ids: tuple[int, int] | None, cpus: list[int] | None, parent: int):
    """The server's pre-exec: own session, drop to SERVER_USER, then the parent-death
    signal (after the uid change, which would clear it), then pin to the server CPUs."""

    def setup() -> None:
        os.setsid()
        if ids is not None:
            os.setgroups([])
            os.setgid(ids[1])
            os.setuid(ids[0])
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the worker died between fork and prctl
            os._exit(1)
        if cpus:
            os.sched_setaffinity(0, cpus)

    return setup


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tail(path: Path, offset: int = 0, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:10]


# ----------------------------------------------------------------------------- templates


@dataclass(frozen=True)
class ServerBuild:
    """The build a managed target runs, as found on this worker."""

    name: str
    binary: Path
    #: The registered build's directory; None for the system server.
    basedir: str | None
    version: str
    server_sha256: str


def ensure_template(base: Path, target: ManagedTarget, build: ServerBuild, ids: tuple[int, int] | None) -> Path:
    """The initialised template of ``build``, made once (under a lock, so workers sharing a
    host build it once) and kept across workers."""
    binary = build.binary
    st = binary.stat()
    init = _init_args(target)
    key = _short_hash(f"{binary.resolve()}:{st.st_size}:{st.st_mtime}:{build.basedir or ''}:{' '.join(init)}")
    tdir = base / "templates" / key
    if (tdir / "ready").exists():
        return tdir
    (base / "templates").mkdir(parents=True, exist_ok=True)
    with open(base / "templates" / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (tdir / "ready").exists():
            return tdir
        work = base / "templates" / f"{key}.tmp-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(mode=0o755)
        _chown_tree(work, ids)
        started = time.monotonic()
        _install(target, build, work, ids)
        (work / "binary").write_text(f"{binary}\n")
        if tdir.exists():
            shutil.rmtree(tdir)
        os.rename(work, tdir)
        (tdir / "ready").write_text(f"{time.time()}\n")
        log.info("managed_template_ready", binary=str(binary), template=str(tdir),
                 seconds=round(time.monotonic() - started, 2))
    return tdir


def _init_args(target: ManagedTarget) -> list[str]:
    return server_options.argv({k: v for k, v in target.options.items() if server_options.normalise(k) in INIT_OPTIONS})


def _install(target: ManagedTarget, build: ServerBuild, work: Path, ids: tuple[int, int] | None) -> None:
    """Initialise ``work``/data with the build's flavour of initialisation and a client account."""
    flavour = flavours.flavour_of(build.version)
    script = None if flavour.initialize_in_server else server_binary.install_script(build.binary, build.basedir)
    # A password-protected client account for the load processes.
    password = secrets.token_urlsafe(18)
    pw_file = work / "client_password"
    pw_file.touch(mode=0o600)
    pw_file.write_text(password)
    sql = flavours.client_user_sql(flavour, CLIENT_USER, password, ("localhost", "127.0.0.1"))
    sql_file = work / "client.sql"
    sql_file.touch(mode=0o600)
    sql_file.write_text(sql)
    if ids is not None:
        os.chown(sql_file, *ids)  # MySQL's server reads it as the server's user
    commands = flavours.init_commands(flavour, binary=build.binary, script=script, datadir=work / "data",
                                      basedir=build.basedir, user=SERVER_USER if ids is not None else None,
                                      init_args=_init_args(target), sql_file=sql_file, error_log=work / "bootstrap.err")
    try:
        for i, argv in enumerate(commands):
            last = i == len(commands) - 1
            # MariaDB's bootstrap (the last of its two commands) reads the SQL on stdin.
            stdin = sql if last and not flavour.initialize_in_server else None
            p = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
                               stdin=None if stdin is not None else subprocess.DEVNULL)
            if p.returncode != 0:
                tail = _tail(work / "bootstrap.err") if last else ""
                what = "creating the client user" if stdin is not None else argv[0]
                raise TargetError(f"targets.{target.name}.build", f"{what} failed (exit {p.returncode}): "
                                  f"{tail or (p.stdout + p.stderr).strip()[-1500:]}")
    finally:
        sql_file.unlink(missing_ok=True)  # it holds the password


# ----------------------------------------------------------------------------- one server


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
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def connect_params(self) -> dict[str, Any]:
        return {"unix_socket": str(self.socket), "user": CLIENT_USER, "password": self.password,
                "database": self.target.database}

    def argv(self) -> list[str]:
        t = self.target
        return [
            str(self.binary), "--no-defaults",
            *([f"--basedir={self.build.basedir}"] if self.build.basedir else []),
            f"--datadir={self.datadir}", f"--port={self.port}", "--bind-address=127.0.0.1",
            f"--socket={self.socket}", f"--pid-file={self.dir / 'mysqld.pid'}", f"--log-error={self.error_log}",
            *flavours.start_args(flavours.flavour_of(self.build.version)),
            *server_options.argv(t.options),
        ]

    def start(self, ids: tuple[int, int] | None) -> None:
        """Start the server and wait until it answers; raise TargetError with its log tail."""
        offsets = {p: (p.stat().st_size if p.exists() else 0) for p in (self.error_log, self.dir / "stderr.log")}
        self.port = free_port()
        t0 = time.monotonic()
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        if self.preload:
            env["LD_PRELOAD"] = self.preload
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
        parts = [_tail(p, off) for p, off in offsets.items()]
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


def find_build(target: ManagedTarget, registry: "build_registry.Registry | None") -> ServerBuild:
    """The build ``target`` names, as registered on this worker (the system server when it names
    none); TargetError naming targets.NAME.build before anything starts."""
    where = f"targets.{target.name}.build"
    if target.build in (None, SYSTEM_BUILD):
        try:
            binary = server_binary.system_binary()
            return ServerBuild(SYSTEM_BUILD, binary, None, build_registry.server_version(binary),
                               build_registry.sha256_of(binary))
        except (server_binary.BinaryNotFound, BuildError, OSError) as e:
            raise TargetError(where, str(e)) from None
    try:
        record = (registry or build_registry.Registry()).get(target.build)
        binary = Path(record.binary)
        sha = build_registry.sha256_of(binary)
        return ServerBuild(record.name, binary, record.basedir, build_registry.current_version(record, sha), sha)
    except (BuildError, OSError) as e:
        raise TargetError(where, str(e)) from None


# ----------------------------------------------------------------------------- the manager


class ServerManager:
    """At most one managed server per worker: reused while runs stay on its target and table
    shape, stopped before any other target runs."""

    def __init__(self, *, base_dir: Path | None = None, keep_datadirs: bool = False,
                 builds: "build_registry.Registry | None" = None):
        self.base = Path(base_dir or default_dir())
        #: The builds registered on this host (`worker builds`), read at each start.
        self.builds = builds or build_registry.Registry()
        self.keep_datadirs = keep_datadirs
        self.run_dir = self.base / "run" / str(os.getpid())
        self.current: ManagedServer | None = None
        self._servers: dict[str, ManagedServer] = {}
        # One long-lived thread forks every server: see the module docstring (PDEATHSIG).
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="managed-servers")
        self._closed = False

    def ensure(self, target: ManagedTarget, data: DataShape, worker_client_cpus: list[int] | None = None) -> ManagedServer:
        """A running server for ``target`` (started, or reused from the previous run)."""
        return self._thread.submit(self._ensure, target, data, worker_client_cpus).result()

    def release(self) -> None:
        """Stop the running server (a dsn run comes next and must have the machine alone)."""
        if self.current is not None:
            self._thread.submit(self._stop_current).result()

    def restart(self) -> bool:
        """Stop the running server and start it again on its own datadir (a target that did not
        settle); False when there was none or it did not come back (the next run starts one)."""
        return self._thread.submit(self._restart).result()

    def close(self) -> None:
        """Stop the server and remove this worker's datadirs (unless --keep-datadirs)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._thread.submit(self._stop_current).result()
        finally:
            self._thread.shutdown(wait=True)
        if self.keep_datadirs:
            if self.run_dir.exists():
                log.info("managed_datadirs_kept", path=str(self.run_dir))
        else:
            shutil.rmtree(self.run_dir, ignore_errors=True)

    def _stop_current(self) -> None:
        if self.current is not None:
            self.current.stop()
            self.current = None

    def _restart(self) -> bool:
        cur = self.current
        if cur is None or self._closed:
            return False
        cur.stop()
        try:
            cur.start(_server_ids())
        except TargetError as e:
            log.warning("managed_server_restart_failed", target=cur.target.name, error=str(e))
            self.current = None
            return False
        cur.reused = False
        cur.restart_before_reuse = False
        log.info("managed_server_restarted", target=cur.target.name, pid=cur.pid)
        return True

    def _ensure(self, target: ManagedTarget, data: DataShape, worker_client_cpus: list[int] | None) -> ManagedServer:
        if self._closed:
            raise TargetError("kind", "the worker is shutting down")
        key = f"{target.model_dump_json()}|{data.marker()}"
        cur = self.current
        if cur is not None and cur.key == key and cur.alive() and not cur.restart_before_reuse:
            cur.reused = True
            return cur
        # A reserved option, an unregistered build or a missing allocator fails the run before
        # anything is stopped, run or started.
        for name, value in target.options.items():
            problem = server_options.name_problem(name) or server_options.value_problem(value)
            if problem:
                raise TargetError(f"targets.{target.name}.options.{name}", problem)
        build = find_build(target, self.builds)
        try:
            preload = allocator_library(target.malloc)
        except TargetError as e:
            raise TargetError(f"targets.{target.name}.malloc", e.message) from None
        if cur is not None:
            if not cur.alive():
                log.warning("managed_server_died", target=cur.target.name, log_tail=_tail(cur.error_log, 0, 5))
            self._stop_current()
        server = self._prepare(target, key, build, preload, worker_client_cpus)
        server.start(_server_ids())
        server.reused = False
        self.current = server
        return server

    def _prepare(self, target: ManagedTarget, key: str, build: ServerBuild, preload: str,
                 worker_client_cpus: list[int] | None) -> ManagedServer:
        where = f"targets.{target.name}"
        binary = build.binary
        try:
            errors = server_binary.option_errors(target, binary, build.basedir)
        except (server_binary.BinaryNotFound, OSError, subprocess.SubprocessError) as e:
            raise TargetError(f"{where}.build", f"cannot list the options of {binary}: {e}") from None
        if errors:
            raise TargetError(f"{where}.options.{errors[0][0]}", "; ".join(m if n == errors[0][0] else f"{n}: {m}"
                                                                            for n, m in errors))
        try:
            server_cpus, client_cpus = server_options.split_cpus(
                os.sched_getaffinity(0), target.server_cpus, target.client_cpus, worker_client_cpus)
        except server_options.CpuSplitError as e:
            raise TargetError(f"{where}.{e.field}", str(e).split(": ", 1)[1]) from None
        except ValueError as e:
            raise TargetError(where, str(e)) from None
        ids = _server_ids()
        self._sweep_dead_workers()
        template = ensure_template(self.base, target, build, ids)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.run_dir.chmod(0o755)
        # One datadir per target: same name and same server build and options (pinning and
        # settling between runs change nothing on disk).
        tdir = self.run_dir / _short_hash(target.model_dump_json(exclude={"server_cpus", "client_cpus", "quiesce"}))
        if not (tdir / "data").exists():
            shutil.rmtree(tdir, ignore_errors=True)
            tdir.mkdir(mode=0o750)
            subprocess.run(["cp", "-a", "--reflink=auto", str(template / "data"), str(tdir / "data")], check=True)
            (tdir / "target").write_text(target.model_dump_json(indent=1) + "\n")
            _chown_tree(tdir, ids)
        password = (template / "client_password").read_text().strip()
        server = ManagedServer(target=target, key=key, build=build, dir=tdir, port=0, password=password,
                               server_cpus=server_cpus, client_cpus=client_cpus, preload=preload)
        server.extra["template"] = str(template)
        return server

    def _sweep_dead_workers(self) -> None:
        """Remove run directories of workers that died without cleaning up (their servers died
        with them by the parent-death signal)."""
        runs = self.base / "run"
        if not runs.is_dir():
            return
        for d in runs.iterdir():
            if not d.name.isdigit() or d == self.run_dir:
                continue
            if not Path(f"/proc/{d.name}").exists():
                shutil.rmtree(d, ignore_errors=True)
