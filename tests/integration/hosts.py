"""Separate hosts on one machine for integration tests: Linux network namespaces on a private
subnet joined by a bridge in a namespace of its own (nothing is attached to the machine's own
network), private RabbitMQ and MariaDB instances inside them, and the deploy/host units run the
way systemd runs them. ``Topology.destroy`` kills every process left in its namespaces and
deletes them, whatever happened.

The machine's shared RabbitMQ and MariaDB are out of reach from inside: a namespace has its own
loopback, so 127.0.0.1:5672 and :3306 there are the private instances, and the private node's
name (bf@localhost) is registered with the namespace's own epmd.
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

#: What systemd gives a service before its unit's Environment=: a plain PATH.
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def run(*cmd: str, check: bool = True, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"{shlex.join(cmd)} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


@dataclass
class Host:
    name: str  # its namespace, and its host name in unit expansions (%H)
    addr: str
    port: str  # its link's end on the bridge
    workdir: Path


@dataclass
class Topology:
    """A control host, worker hosts and a target host on 10.231.N.0/24."""

    workdir: Path
    tag: str = field(default_factory=lambda: secrets.token_hex(2))
    hosts: dict[str, Host] = field(default_factory=dict)
    procs: list[subprocess.Popen] = field(default_factory=list)

    @property
    def switch(self) -> str:
        return f"bf-{self.tag}-sw"

    def namespaces(self) -> list[str]:
        return [h.name for h in self.hosts.values()] + [self.switch]

    def create(self, roles: list[str]) -> "Topology":
        net = 1 + int(self.tag, 16) % 250
        run("ip", "netns", "add", self.switch)
        run("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
        run("ip", "-n", self.switch, "link", "set", "br0", "up")
        for i, role in enumerate(roles, 1):
            ns = f"bf-{self.tag}-{role}"
            host = Host(ns, f"10.231.{net}.{i}", f"p{i}", self.workdir / role)
            host.workdir.mkdir(parents=True, exist_ok=True)
            self.hosts[role] = host
            run("ip", "netns", "add", ns)
            run("ip", "-n", self.switch, "link", "add", host.port, "type", "veth", "peer", "name", "eth0", "netns", ns)
            run("ip", "-n", self.switch, "link", "set", host.port, "master", "br0", "up")
            run("ip", "-n", ns, "addr", "add", f"{host.addr}/24", "dev", "eth0")
            run("ip", "-n", ns, "link", "set", "eth0", "up")
            run("ip", "-n", ns, "link", "set", "lo", "up")
        return self

    @property
    def subnet_pattern(self) -> str:
        """The subnet as a MariaDB host pattern (10.231.N.%)."""
        return self.hosts["ctl"].addr.rsplit(".", 1)[0] + ".%"

    def cut(self, role: str) -> None:
        """Unplug a host: its link to the bridge goes down; packets are dropped, not refused."""
        run("ip", "-n", self.switch, "link", "set", self.hosts[role].port, "down")

    def exec(self, role: str, *cmd: str, env: dict[str, str] | None = None, check: bool = True,
             timeout: float = 300) -> subprocess.CompletedProcess:
        """Run a command on a host; the test's own BENCHFLEET_* settings (the shared services')
        are not passed on, only ``env``."""
        base = {k: v for k, v in os.environ.items() if not k.startswith("BENCHFLEET_")}
        return run("ip", "netns", "exec", self.hosts[role].name, *cmd, check=check, timeout=timeout,
                   env={**base, **(env or {})})

    def start(self, role: str, name: str, *cmd: str, env: dict[str, str] | None = None,
              clean_env: bool = False) -> subprocess.Popen:
        """A background process on a host, logging to ``<host workdir>/<name>.log``."""
        log = open(self.hosts[role].workdir / f"{name}.log", "ab")
        base = {k: v for k, v in os.environ.items() if not k.startswith("BENCHFLEET_")}
        full_env = dict(env or {}) if clean_env else {**base, **(env or {})}
        p = subprocess.Popen(["ip", "netns", "exec", self.hosts[role].name, *cmd], env=full_env,
                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(p)
        return p

    def start_unit(self, role: str, unit: Path, instance: str = "") -> subprocess.Popen:
        """Run an installed unit as systemd would: its Environment= and EnvironmentFile= (in
        order, a later one winning, ``-`` files optional) over a clean environment, then
        ExecStart, with %i and %H expanded (%H is the host's name)."""
        host = self.hosts[role]
        expand = lambda text: text.replace("%i", instance).replace("%H", host.name)  # noqa: E731
        env = {"PATH": SYSTEMD_PATH, "LANG": "C.UTF-8"}
        exec_start = ""
        for raw in unit.read_text().splitlines():
            key, _, value = raw.partition("=")
            if key == "Environment":
                k, _, v = expand(value).partition("=")
                env[k] = v
            elif key == "EnvironmentFile":
                optional, path = value.startswith("-"), Path(expand(value.lstrip("-")))
                if not path.exists() and optional:
                    continue
                for line in path.read_text().splitlines():
                    if line.strip() and not line.lstrip().startswith("#"):
                        k, _, v = line.partition("=")
                        env[k.strip()] = v.strip()
            elif key == "ExecStart":
                exec_start = expand(value)
        assert exec_start, f"{unit} has no ExecStart"
        return self.start(role, unit.name.replace("@", f"@{instance}"), *shlex.split(exec_start), env=env,
                          clean_env=True)

    def logs(self) -> str:
        out = []
        for p in sorted(self.workdir.rglob("*.log")):
            out.append(f"--- {p.relative_to(self.workdir)}\n{p.read_text(errors='replace')[-3000:]}")
        return "\n".join(out)

    def destroy(self) -> None:
        """Kill every process in the namespaces (the ones started here and their children:
        epmd, load processes, mariadbd), then delete the namespaces."""
        existing = set(run("ip", "netns", "list", check=False).stdout.split())
        for ns in self.namespaces():
            if ns not in existing:
                continue
            for _ in range(3):
                pids = run("ip", "netns", "pids", ns, check=False).stdout.split()
                if not pids:
                    break
                for pid in pids:
                    try:
                        os.kill(int(pid), 9)
                    except ProcessLookupError:
                        pass
                time.sleep(0.5)
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                pass
        for ns in self.namespaces():
            if ns in existing:
                run("ip", "netns", "del", ns, check=False)


def wait_until(what: str, check, timeout: float = 60.0, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except (OSError, AssertionError, ValueError) as e:
            last = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


@dataclass(frozen=True)
class Tls:
    """A throwaway CA and one server certificate signed by it (for an IP address and localhost)."""

    ca: Path
    cert: Path
    key: Path

    @classmethod
    def make(cls, directory: Path, ip: str) -> "Tls":
        directory.mkdir(parents=True, exist_ok=True)
        ca, ca_key = directory / "ca.pem", directory / "ca.key"
        cert, key, csr = directory / "server.pem", directory / "server.key", directory / "server.csr"
        run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=benchfleet test CA",
            "-keyout", str(ca_key), "-out", str(ca))
        run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={ip}", "-keyout", str(key), "-out", str(csr))
        ext = directory / "san.ext"
        ext.write_text(f"subjectAltName = IP:{ip}, DNS:localhost\n")
        run("openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
            "-days", "2", "-extfile", str(ext), "-out", str(cert))
        for f in (ca, cert, key):
            os.chmod(f, 0o644)  # read by the rabbitmq and mysql users; a throwaway key
        return cls(ca, cert, key)


class HostRabbit:
    """A RabbitMQ node of its own on one host of the topology (node bf@localhost, its own config, data and
    logs); tests/integration/private_rabbit.py's PrivateRabbit is one on this machine, for fault tests."""

    def __init__(self, topo: Topology, role: str, tls: Tls | None = None):
        self.topo, self.role = topo, role
        d = topo.hosts[role].workdir / "rabbitmq"
        (d / "mnesia").mkdir(parents=True)
        (d / "log").mkdir()
        if tls is None:
            # Every address of its namespace (the shared config pins 127.0.0.1).
            conf = "listeners.tcp.default = 5672\n"
        else:
            # Plain AMQP on the host itself only; other hosts must come over TLS.
            conf = ("listeners.tcp.local = 127.0.0.1:5672\nlisteners.ssl.default = 5671\n"
                    f"ssl_options.cacertfile = {tls.ca}\nssl_options.certfile = {tls.cert}\n"
                    f"ssl_options.keyfile = {tls.key}\nssl_options.verify = verify_none\n"
                    "ssl_options.fail_if_no_peer_cert = false\n")
        (d / "rabbitmq.conf").write_text(conf + "consumer_timeout = 10800000\n")
        (d / "env.conf").write_text("")
        (d / "enabled_plugins").write_text("[].\n")
        shutil.chown(d, "rabbitmq", "rabbitmq")
        for p in d.rglob("*"):
            shutil.chown(p, "rabbitmq", "rabbitmq")
        self.env = {
            "RABBITMQ_NODENAME": "bf@localhost", "RABBITMQ_CONF_ENV_FILE": str(d / "env.conf"),
            "RABBITMQ_CONFIG_FILE": str(d / "rabbitmq.conf"), "RABBITMQ_MNESIA_BASE": str(d / "mnesia"),
            "RABBITMQ_LOG_BASE": str(d / "log"), "RABBITMQ_ENABLED_PLUGINS_FILE": str(d / "enabled_plugins"),
            "RABBITMQ_PID_FILE": str(d / "pid"), "RABBITMQ_NODE_PORT": "5672", "RABBITMQ_DIST_PORT": "25672",
        }

    def start(self) -> "HostRabbit":
        self.topo.start(self.role, "rabbitmq", "rabbitmq-server", env=self.env)
        # await_startup gives up at once while the node is not registered with epmd yet.
        wait_until("the private RabbitMQ node", lambda: self.topo.exec(
            self.role, "rabbitmqctl", "await_startup", "--timeout", "60", env=self.env, check=False,
            timeout=90).returncode == 0, 180, 2)
        # Proof that the node configured below is the private one: only the default vhost.
        vhosts = self.topo.exec(self.role, "rabbitmqctl", "-q", "list_vhosts", env=self.env).stdout.split()
        assert vhosts == ["name", "/"], vhosts
        return self


class HostMariadb:
    """A mariadbd of its own on a host, listening on every address of its namespace on 3306,
    its socket in the host's workdir; root over that socket as the OS root (as Debian's)."""

    def __init__(self, topo: Topology, role: str, *, grants: bool = True, tls: Tls | None = None):
        self.topo, self.role, self.grants, self.tls = topo, role, grants, tls
        self.dir = topo.hosts[role].workdir / "mariadb"
        self.socket = str(self.dir / "mysqld.sock")

    def start(self) -> "HostMariadb":
        self.dir.mkdir()
        os.chmod(self.dir, 0o755)
        datadir = self.dir / "data"
        shutil.chown(self.dir, "mysql", "mysql")
        # Temporary tables in its own folder, as tests/integration/faults.py's throwaway server keeps them.
        run("mariadb-install-db", "--no-defaults", f"--datadir={datadir}", "--user=mysql", "--skip-test-db",
            "--auth-root-authentication-method=socket", timeout=180, env={**os.environ, "TMPDIR": str(self.dir)})
        args = ["mariadbd", "--no-defaults", f"--datadir={datadir}", "--port=3306", f"--socket={self.socket}",
                "--bind-address=0.0.0.0", "--user=mysql", "--skip-log-bin", "--innodb-buffer-pool-size=32M",
                "--skip-name-resolve", f"--pid-file={self.dir}/mysqld.pid", f"--log-error={self.dir}/error.log",
                f"--tmpdir={self.dir}"]
        if not self.grants:
            args.append("--skip-grant-tables")
        if self.tls is not None:
            args += [f"--ssl-ca={self.tls.ca}", f"--ssl-cert={self.tls.cert}", f"--ssl-key={self.tls.key}"]
        self.topo.start(self.role, "mariadbd", *args)
        wait_until("mariadbd accepting connections", lambda: self.topo.exec(
            self.role, "mariadb", f"--socket={self.socket}", "-uroot", "-e", "SELECT 1", check=False).returncode == 0)
        return self

    def root_sql(self, sql: str) -> str:
        """SQL as root over the socket (the OS root, as Debian's root account)."""
        return self.topo.exec(self.role, "mariadb", f"--socket={self.socket}", "-uroot", "-N", "-e", sql).stdout
