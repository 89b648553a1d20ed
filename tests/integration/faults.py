"""Fault injection for integration tests and bench/faults: kill workers, restart RabbitMQ, lower
its consumer timeout, and run a throwaway mariadbd that can be killed mid-run.

Everything here that changes the shared broker restores it in a ``finally``: other test runs
use the same RabbitMQ.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

if TYPE_CHECKING:
    from services.common.config import Settings


def rabbitmqctl(*args: str, timeout: float = 120) -> str:
    return subprocess.run(["rabbitmqctl", *args], capture_output=True, text=True, timeout=timeout, check=True).stdout


def broker_listening(port: int = 5672) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


Ctl = Callable[..., str]


@contextlib.contextmanager
def broker_stopped(ctl: Ctl = rabbitmqctl) -> Iterator[None]:
    """RabbitMQ's application stopped for the duration of the block, and started again after,
    whatever happens inside (``ctl``: rabbitmqctl of the node, the machine's by default)."""
    ctl("stop_app")
    try:
        yield
    finally:
        ctl("start_app")
        ctl("await_startup", timeout=120)


def restart_broker(down_s: float = 3.0, ctl: Ctl = rabbitmqctl) -> None:
    with broker_stopped(ctl):
        time.sleep(down_s)


@contextlib.contextmanager
def broker_env(ctl: Ctl = rabbitmqctl, **values: int) -> Iterator[None]:
    """Set rabbit application variables (consumer_timeout, channel_tick_interval ...) for the
    block, restoring the previous values (or unsetting them) afterwards. New channels see them."""
    previous = {k: ctl("eval", f"application:get_env(rabbit, {k}).").strip() for k in values}
    try:
        for k, v in values.items():
            ctl("eval", f"application:set_env(rabbit, {k}, {int(v)}).")
        yield
    finally:
        for k, old in previous.items():
            if old.startswith("{ok,"):
                ctl("eval", f"application:set_env(rabbit, {k}, {old[4:-1]}).")
            else:
                ctl("eval", f"application:unset_env(rabbit, {k}).")


def group_pids(pgid: int) -> list[int]:
    """Live processes of a process group (zombies excluded)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            out.append(int(d.name))
    return out


def wait_orphans_gone(pgid: int, timeout: float = 20.0) -> list[int]:
    """Wait until no process of the group remains; return those still alive at the deadline."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        left = group_pids(pgid)
        if not left:
            return []
        time.sleep(0.2)
    return group_pids(pgid)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ThrowawayMariadb:
    """A mariadbd of our own (own datadir, port and socket under a temp dir), killable at will.
    Grant tables are skipped: it listens on 127.0.0.1 only and lives for one test."""

    def __init__(self, *options: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="bf-target-"))
        self.port = free_port()
        self.socket = str(self.dir / "mysqld.sock")
        #: Extra server options (``--wait-timeout=3``, ``--max-allowed-packet=64K`` ...).
        self.options = options
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> "ThrowawayMariadb":
        datadir = self.dir / "data"
        os.chmod(self.dir, 0o755)
        shutil.chown(self.dir, "mysql", "mysql")
        # Its temporary tables in its own folder (TMPDIR for the install, --tmpdir below): in /tmp their
        # files, named by pid, can meet those a killed server left under a pid now reused.
        if not datadir.exists():
            subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={datadir}", "--user=mysql",
                            "--skip-test-db", "--auth-root-authentication-method=normal"],
                           check=True, capture_output=True, timeout=120, env={**os.environ, "TMPDIR": str(self.dir)})
        self.proc = subprocess.Popen(
            ["mariadbd", "--no-defaults", f"--datadir={datadir}", f"--port={self.port}", f"--socket={self.socket}",
             "--bind-address=127.0.0.1", "--user=mysql", "--skip-grant-tables", "--skip-log-bin",
             "--innodb-buffer-pool-size=32M", f"--pid-file={self.dir}/mysqld.pid", f"--log-error={self.dir}/error.log",
             f"--tmpdir={self.dir}", *self.options],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"throwaway mariadbd exited: {(self.dir / 'error.log').read_text()[-2000:]}")
            if broker_listening(self.port):
                return self
            time.sleep(0.3)
        raise RuntimeError("throwaway mariadbd did not start listening")

    def restart(self, down_s: float = 0.0) -> None:
        """Killed (SIGKILL, as a crash), down for ``down_s`` seconds, and started again on the
        same port with the same data."""
        self.kill()
        time.sleep(down_s)
        self.start()

    def settings(self, base: "Settings") -> "Settings":
        """``base`` with this server as the results DB (as root: grant tables are skipped)."""
        return replace(base, db_host="127.0.0.1", db_port=self.port, db_user="root", db_password="", db_socket="")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def cleanup(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)
