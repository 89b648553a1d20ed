"""A watch on the services every integration test shares (the local MariaDB and RabbitMQ): one that
stops during a test fails that test with what the server logged, and is started again through
deploy/ensure-services, so one crash is one red test that says why, not two hundred errors."""

from __future__ import annotations

import fcntl
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tests.missing import reachable

if TYPE_CHECKING:
    from services.common.config import Settings

ROOT = Path(__file__).resolve().parents[2]
#: Serialises the restart across the parallel pass's processes, which may all see the same stop.
LOCK = Path(f"/tmp/benchfleet-tests-shared-services-{os.getuid()}.lock")


@dataclass(frozen=True)
class SharedService:
    """A service the suite shares, where it listens, the ensure-services name that starts it and
    the log that says why it stopped."""

    name: str
    host: str
    port: int
    ensure: str
    log: Path | None

    def up(self) -> bool:
        # A local service is looked up in the kernel's socket table: a connection per test would
        # write a warning per test into the server's log (an unauthenticated connection).
        if self.host in ("127.0.0.1", "localhost"):
            return self.port in _local_listeners()
        return reachable(self.host, self.port)


def _local_listeners() -> set[int]:
    """Ports with a listening TCP socket on this host's loopback or every address."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            local, state = row.split()[1], row.split()[3]
            addr, _, port = local.partition(":")
            if state == "0A" and addr in ("0100007F", "00000000", "0" * 32, "0" * 24 + "01000000"):
                ports.add(int(port, 16))
    return ports


def shared_services(settings: "Settings") -> list[SharedService]:
    """The shared services that answer now, with their logs (MariaDB says where its is)."""
    from urllib.parse import urlsplit

    import mysql.connector

    found = []
    if reachable(settings.db_host, settings.db_port):
        log = None
        try:
            conn = mysql.connector.connect(host=settings.db_host, port=settings.db_port, user=settings.db_user,
                                           password=settings.db_password)
            cur = conn.cursor()
            cur.execute("SELECT @@log_error, @@datadir")
            name, datadir = cur.fetchone()
            conn.close()
            if name:
                log = Path(datadir) / name if not name.startswith("/") else Path(name)
        except mysql.connector.Error:
            pass
        found.append(SharedService("MariaDB", settings.db_host, settings.db_port, "mariadb", log))
    u = urlsplit(settings.amqp_url)
    if reachable(u.hostname or "127.0.0.1", u.port or 5672):
        logs = sorted((p for p in Path("/var/log/rabbitmq").glob("rabbit@*.log") if "_upgrade" not in p.name),
                      key=lambda p: p.stat().st_mtime)
        found.append(SharedService("RabbitMQ", u.hostname or "127.0.0.1", u.port or 5672, "rabbitmq",
                                   logs[-1] if logs else None))
    return found


def _tail(path: Path | None, lines: int = 40) -> str:
    if path is None:
        return "(it logs to no file here: see its service manager's journal)"
    if not path.is_file():
        return f"(no log at {path})"
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as e:
        return f"(cannot read {path}: {e})"


def _kernel_kills() -> str:
    """The kernel's last out-of-memory kills, if any (a service killed for memory logs nothing itself)."""
    try:
        r = subprocess.run(["dmesg"], capture_output=True, text=True, check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"(dmesg unreadable: {e})"
    if r.returncode != 0:
        return f"(dmesg unreadable: {r.stderr.strip()[:200]})"
    kills = [line for line in r.stdout.splitlines() if "Killed process" in line or "out of memory" in line.lower()]
    return "\n".join(kills[-5:]) or "(none in dmesg)"


def restart_after_stop(service: SharedService) -> str:
    """What the stopped ``service`` left (its log's tail, the kernel's OOM kills), after starting it
    again with deploy/ensure-services (once, whichever process of the suite gets here first)."""
    found = f"{service.name} at {service.host}:{service.port} stopped during this test.\n" \
            f"Its log ({service.log}):\n{_tail(service.log)}\nOOM kills: {_kernel_kills()}"
    with LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not service.up():
            r = subprocess.run([str(ROOT / "deploy" / "ensure-services"), service.ensure], capture_output=True,
                               text=True, timeout=300, check=False)
            found += f"\nensure-services {service.ensure}: exit {r.returncode}, {(r.stdout + r.stderr)[-500:]}"
    return found
