"""A RabbitMQ node of our own (own node name, ports, data, logs and cookie under one directory),
for tests and benchmarks that stop or restart the broker: the machine's shared broker is never
touched. It listens on 127.0.0.1 only, with the guest user and no plugins."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import string
import subprocess
import tempfile
import time
from pathlib import Path

from tests.integration.faults import broker_listening, free_port

#: The server and CLI scripts themselves: /usr/sbin's wrappers switch to the rabbitmq user
#: and its home (and so its cookie and the shared node's environment file).
SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
CTL = "/usr/lib/rabbitmq/bin/rabbitmqctl"


def _wait_unreaped(pid: int, timeout: float) -> None:
    """Wait up to ``timeout`` s for child ``pid`` to exit, leaving it unreaped (its id still taken)."""
    deadline = time.monotonic() + timeout
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None and time.monotonic() < deadline:
        time.sleep(0.1)


class PrivateRabbit:
    """Start, stop and restart a private RabbitMQ node; ``url`` is its AMQP URL."""

    def __init__(self, base: Path | None = None) -> None:
        self.dir = Path(base) if base else Path(tempfile.mkdtemp(prefix="bf-rabbit-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.dist_port = free_port()
        self.node = f"bfpriv{secrets.token_hex(3)}@localhost"
        self.proc: subprocess.Popen | None = None
        cookie = self.dir / ".erlang.cookie"
        if not cookie.exists():
            cookie.write_text("".join(secrets.choice(string.ascii_uppercase) for _ in range(20)))
            cookie.chmod(0o400)
        (self.dir / "enabled_plugins").write_text("[].\n")
        (self.dir / "rabbitmq-env.conf").write_text("")
        (self.dir / "rabbitmq.conf").write_text(
            f"listeners.tcp.local = 127.0.0.1:{self.port}\nconsumer_timeout = 10800000\n")

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"

    def env(self) -> dict[str, str]:
        d = self.dir
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))}
        env.update({
            "HOME": str(d), "RABBITMQ_NODENAME": self.node, "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port), "RABBITMQ_MNESIA_BASE": str(d / "mnesia"),
            "RABBITMQ_LOG_BASE": str(d / "log"), "RABBITMQ_ENABLED_PLUGINS_FILE": str(d / "enabled_plugins"),
            "RABBITMQ_CONFIG_FILE": str(d / "rabbitmq.conf"), "RABBITMQ_CONF_ENV_FILE": str(d / "rabbitmq-env.conf"),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
        })
        return env

    def ctl(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([CTL, "-n", self.node, *args], env=self.env(), capture_output=True, text=True, timeout=timeout)

    def ctl_out(self, *args: str, timeout: float = 120) -> str:
        """rabbitmqctl's output, as faults.rabbitmqctl gives the machine's node's (an error when it fails)."""
        r = self.ctl(*args, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"rabbitmqctl {' '.join(args)} on {self.node}: {r.stderr.strip() or r.stdout.strip()}")
        return r.stdout

    def start(self, timeout: float = 120) -> "PrivateRabbit":
        log = open(self.dir / "server.out", "ab")
        self.proc = subprocess.Popen([SERVER], env=self.env(), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"private RabbitMQ exited: {(self.dir / 'server.out').read_text()[-2000:]}")
            if broker_listening(self.port) and self.ctl("await_startup", "--timeout", "60").returncode == 0:
                return self
            time.sleep(1)
        raise RuntimeError("private RabbitMQ did not start")

    def stop(self) -> None:
        """Stop the node cleanly (as an operator's restart does), killing it if that fails, and what
        else of its process group still runs."""
        if self.proc is None or self.proc.returncode is not None:
            return
        try:
            self.ctl("stop", timeout=60)
        except subprocess.TimeoutExpired:
            pass
        _wait_unreaped(self.proc.pid, 60)
        # The group is killed before its leader is reaped: until then no other process can be given
        # its id, so the signal reaches the node's own leftovers and nothing else.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)

    def restart(self, down_s: float = 3.0) -> None:
        self.stop()
        time.sleep(down_s)
        self.start()

    def cleanup(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
