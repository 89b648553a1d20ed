"""A throwaway mariadbd for measurements that must not share a server: own datadir, port and
socket, started with --no-defaults, optionally pinned to CPUs, removed afterwards.

Other engineers' tests share the system MariaDB, so its global Com_* counters and its CPU are
noisy; the fidelity test and the benchmarks use one of these instead. Not a managed target:
this exists only for benchfleet's own tests and benchmarks.

    with ScratchServer(cpus=[0], options=["--max-connections=5000"]) as srv:
        srv.params  # mysql.connector kwargs (root, no password, TCP)
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Any

import mysql.connector

from services.common.spec import server_options
from services.worker.target.local_server import LocalServer

#: Options every scratch server gets: small, fast to start, nothing we do not measure.
BASE_OPTIONS = (
    "--skip-grant-tables",  # root without a password, no user setup: the server lives minutes
    "--skip-name-resolve",
    "--skip-log-bin",
    "--performance-schema=off",
    "--innodb-buffer-pool-size=512M",
    "--innodb-log-file-size=256M",
    "--innodb-flush-log-at-trx-commit=2",
    "--max-prepared-stmt-count=1000000",
)


def cpu_arg(text: str) -> tuple[int, ...]:
    """A benchmark's ``--server-cpus``/``--client-cpus``: ``0,2-3`` -> (0, 2, 3), as a spec's
    ``server_cpus`` reads; argparse turns the ValueError into a usage error."""
    return tuple(server_options.parse_cpus(text))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ScratchServer:
    """Start on enter, stop and delete on exit."""

    def __init__(self, *, cpus: list[int] | None = None, options: list[str] | None = None,
                 binary: str = "/usr/sbin/mariadbd"):
        self.cpus = cpus
        self.options = list(options or [])
        self.binary = binary
        self.port = _free_port()
        self.root = tempfile.mkdtemp(prefix="benchfleet-scratch-")
        self.datadir = os.path.join(self.root, "data")
        self.socket = os.path.join(self.root, "mysqld.sock")
        self.proc: subprocess.Popen | None = None

    @property
    def params(self) -> dict[str, Any]:
        return {"host": "127.0.0.1", "port": self.port, "user": "root", "password": ""}

    def __enter__(self) -> "ScratchServer":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        shutil.chown(self.root, "mysql", "mysql")
        subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={self.datadir}", "--user=mysql",
                        "--skip-test-db", "--auth-root-authentication-method=normal"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        argv = [self.binary, "--no-defaults", f"--datadir={self.datadir}", f"--port={self.port}",
                "--bind-address=127.0.0.1", f"--socket={self.socket}", "--user=mysql",
                f"--pid-file={os.path.join(self.root, 'mysqld.pid')}",
                f"--log-error={os.path.join(self.root, 'error.log')}", *BASE_OPTIONS, *self.options]
        if self.cpus:
            argv = ["taskset", "-c", ",".join(map(str, self.cpus)), *argv]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        give_up = time.monotonic() + 60
        while True:
            try:
                mysql.connector.connect(**self.params, use_pure=False).close()
                return
            except mysql.connector.Error:
                if self.proc.poll() is not None or time.monotonic() > give_up:
                    raise RuntimeError(f"scratch mariadbd did not start: {self.error_log()[-2000:]}") from None
                time.sleep(0.2)

    def error_log(self) -> str:
        try:
            with open(os.path.join(self.root, "error.log")) as f:
                return f.read()
        except OSError:
            return ""

    def pid(self) -> int:
        """The mariadbd process id (not taskset's, which execs into it)."""
        assert self.proc is not None
        return self.proc.pid

    def placement(self, client_cpus: tuple[int, ...] | None) -> tuple[bool, LocalServer | None]:
        """(server apart, the server beside the clients), as the worker tells its driver of a
        managed server: apart when pinned off the client CPUs, else its CPU time on them is not
        another process's."""
        everywhere = tuple(sorted(os.sched_getaffinity(0)))
        server = tuple(self.cpus) if self.cpus else everywhere
        apart = bool(self.cpus) and server_options.cpus_apart(server, client_cpus or everywhere)
        return apart, (None if apart else LocalServer(self.pid(), server))

    def query(self, sql: str) -> list[tuple]:
        conn = mysql.connector.connect(**self.params, use_pure=False, autocommit=True)
        try:
            cur = conn.cursor()
            cur.execute(sql)
            return cur.fetchall() if cur.with_rows else []
        finally:
            conn.close()

    def status(self, like: str = "Com\\_%") -> dict[str, int]:
        """Global status counters matching ``like``, as integers."""
        return {k: int(v) for k, v in self.query(f"SHOW GLOBAL STATUS LIKE '{like}'") if str(v).isdigit()}

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)
