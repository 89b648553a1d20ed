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

import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from services.common import logs
from services.common.spec import server_binary
from services.common.spec import server_allowed, server_options
from services.common.spec.targets import ManagedTarget
from services.common.spec.workloads import DataShape
from services.worker.target import builds as build_registry
from services.worker.target.dsn import TargetError
from services.worker.target.managed_server import ManagedServer, allocator_library
from services.worker.target.managed_template import (
    ServerBuild,
    chown_tree,
    ensure_template,
    find_build,
    log_tail,
    server_ids,
    short_hash,
)

log = logs.get(__name__)


def host_memory(meminfo: str = "/proc/meminfo") -> int:
    """Bytes of memory this host has (MemTotal); 0 when it cannot be read, so that every size
    counts as too big rather than none."""
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def free_disk(path: Path) -> int:
    """Bytes an unprivileged writer may still use on the file system of ``path`` (or of its
    nearest existing parent); 0 when none can be read."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        st = os.statvfs(p)
    except OSError:
        return 0
    return st.f_bavail * st.f_frsize


def default_dir() -> Path:
    env = os.environ.get("BENCHFLEET_MANAGED_DIR")
    if env:
        return Path(env)
    if os.geteuid() == 0:
        return Path("/var/lib/benchfleet/managed")
    return Path.home() / ".cache" / "benchfleet" / "managed"


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
            cur.start(server_ids())
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
            problem = server_options.option_problem(name, value)
            if problem:
                raise TargetError(f"targets.{target.name}.options.{name}", problem)
        too_big = server_allowed.host_problems(server_options.canonical(target.options),
                                               memory=host_memory(), disk_free=free_disk(self.base))
        if too_big:
            raise TargetError(f"targets.{target.name}.options.{too_big[0][0]}", too_big[0][1])
        build = find_build(target, self.builds)
        try:
            preload = allocator_library(target.malloc)
        except TargetError as e:
            raise TargetError(f"targets.{target.name}.malloc", e.message) from None
        if cur is not None:
            if not cur.alive():
                log.warning("managed_server_died", target=cur.target.name, log_tail=log_tail(cur.error_log, 0, 5))
            self._stop_current()
        server = self._prepare(target, key, build, preload, worker_client_cpus)
        server.start(server_ids())
        server.reused = False
        self.current = server
        return server

    def _prepare(self, target: ManagedTarget, key: str, build: ServerBuild, preload: str,
                 worker_client_cpus: list[int] | None) -> ManagedServer:
        where = f"targets.{target.name}"
        binary = build.binary
        try:
            errors = server_binary.option_errors(target, binary, build.basedir)
            # Exact option names where the build can be told so (its help was read just now, and cached).
            exact = bool(server_options.exact_names_args(server_binary.accepted_options(binary, build.basedir)))
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
        ids = server_ids()
        self._sweep_dead_workers()
        template = ensure_template(self.base, target, build, ids)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.run_dir.chmod(0o755)
        # One datadir per target: same name and same server build and options (pinning and
        # settling between runs change nothing on disk).
        tdir = self.run_dir / short_hash(target.model_dump_json(exclude={"server_cpus", "client_cpus", "quiesce"}))
        if not (tdir / "data").exists():
            shutil.rmtree(tdir, ignore_errors=True)
            tdir.mkdir(mode=0o750)
            subprocess.run(["cp", "-a", "--reflink=auto", str(template / "data"), str(tdir / "data")], check=True)
            (tdir / "target").write_text(target.model_dump_json(indent=1) + "\n")
            chown_tree(tdir, ids)
        password = (template / "client_password").read_text().strip()
        server = ManagedServer(target=target, key=key, build=build, dir=tdir, port=0, password=password,
                               server_cpus=server_cpus, client_cpus=client_cpus, preload=preload, exact_names=exact)
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
