"""A fleet of real processes for integration tests: collector and workers on an isolated
namespace (own exchanges and queues) and an own results DB, removed afterwards."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import mysql.connector

from services.common.bus.rabbitmq import RabbitBus
from services.common.config import Settings
from services.common.messages.events import RunEvent
from services.common.store import Store

ROOT = Path(__file__).resolve().parents[2]
#: The variable naming which variables specs may name for passwords (services/worker/target/secret_policy.py).
TARGET_PASSWORD_ENV = "BENCHFLEET_TARGET_PASSWORD_ENV"
#: Test workers accept passwords from variables with this prefix ...
TEST_PASSWORD_PREFIX = "BF_"
#: ... and hold the local server's password for target_yaml's targets in this one.
TEST_TARGET_PASSWORD = "BF_TEST_TARGET_PW"


@dataclass
class Fleet:
    settings: Settings
    pool: str
    workdir: Path
    procs: list[subprocess.Popen] = field(default_factory=list)
    extra_env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def create(cls, base: Settings, workdir: Path) -> "Fleet":
        tag = secrets.token_hex(3)
        s = replace(base, namespace=f"bftest-{tag}", db_name=f"benchfleet_test_{tag}")
        return cls(settings=s, pool="itest", workdir=workdir)

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        s = self.settings
        env.update({
            "BENCHFLEET_NAMESPACE": s.namespace, "BENCHFLEET_DB_NAME": s.db_name, "BENCHFLEET_DB_HOST": s.db_host,
            "BENCHFLEET_DB_PORT": str(s.db_port), "BENCHFLEET_DB_USER": s.db_user, "BENCHFLEET_AMQP_URL": s.amqp_url,
            "PYTHONPATH": str(ROOT),
        })
        if s.db_password and "BENCHFLEET_DB_PASSWORD_FILE" not in env:
            env["BENCHFLEET_DB_PASSWORD"] = s.db_password
        # The workers' secret policy: specs of these tests name their targets' passwords in
        # BF_* variables (target_yaml), which a worker accepts only when its operator says so.
        env[TARGET_PASSWORD_ENV] = TEST_PASSWORD_PREFIX + "*"
        env[TEST_TARGET_PASSWORD] = s.db_password
        env.update(self.extra_env)
        return env

    def start(self, service: str, *args: str) -> subprocess.Popen:
        log = open(self.workdir / f"{service}-{len(self.procs)}.log", "ab")
        p = subprocess.Popen([sys.executable, "-m", f"services.{service}.cli", *args], env=self.env(), cwd=ROOT,
                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(p)
        return p

    def start_worker(self, worker_id: str = "w1", *extra: str) -> subprocess.Popen:
        return self.start("worker", "--pool", self.pool, "--id", worker_id, *extra)

    def start_collector(self) -> subprocess.Popen:
        return self.start("collector", "serve")

    def cli(self, service: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", f"services.{service}.cli", *args], env=self.env(), cwd=ROOT,
                              capture_output=True, text=True, timeout=timeout)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}" for p in sorted(self.workdir.glob("*.log")))

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.time() + 15
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    def teardown(self) -> None:
        self.stop()
        bus = RabbitBus(self.settings).connect(attempts=2)
        # "default" too: a spec that names no pool, or a worker started without --pool, uses it.
        bus.delete_topology((self.pool, "default"))
        bus.close()
        conn = mysql.connector.connect(**{k: v for k, v in self.settings.db_params().items() if k != "database"})
        conn.cursor().execute(f"DROP DATABASE IF EXISTS `{self.settings.db_name}`")
        conn.close()


def target_yaml(settings: Settings, name: str, database: str) -> str:
    """A dsn target on the local server with the test's own credentials (never a literal
    password): the workers of a Fleet hold them in TEST_TARGET_PASSWORD, a variable their
    secret policy allows (the fleet's own BENCHFLEET_* variables never are)."""
    lines = [f"  - name: {name}", f"    host: {settings.db_host}", f"    port: {settings.db_port}",
             f"    user: {settings.db_user}", f"    database: {database}"]
    if settings.db_password:
        lines.append(f"    password_env: {TEST_TARGET_PASSWORD}")
    return "\n".join(lines) + "\n"


def claim(bus: RabbitBus, result_body: bytes) -> None:
    """Publish the run-started event a worker sends before the result ``result_body``: the
    collector takes a run's result only from the worker that claimed the run."""
    doc = json.loads(result_body)
    bus.publish_result(RunEvent(run_id=doc["run_id"], campaign_id=doc["campaign_id"], state="running",
                                worker=str(doc.get("worker", "w"))[:128], attempt=int(doc.get("attempt", 1)),
                                at=time.time()).encode())


def wait_for(predicate, timeout: float, what: str, interval: float = 0.5) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def assert_exactly_once(fleet: Fleet, campaign_id: str, total: int) -> None:
    """Every planned run has one stored result, ok, and the runs queue holds nothing."""
    with Store(fleet.settings) as store:
        results = store.results.rows(campaign_id)
        planned = [r[0] for r in store.db.rows("SELECT run_id FROM runs WHERE campaign_id=%s", (campaign_id,))]
    assert len(planned) == total
    assert sorted(r.run_id for r in results) == sorted(planned), "a run has no result, or a result no run"
    assert all(r.status == "ok" and r.qps > 0 for r in results), [(r.run_id, r.status, r.error) for r in results]
    with RabbitBus(fleet.settings) as bus:
        assert bus.queue_depth(bus.names.runs_queue(fleet.pool)) == 0
        assert bus.queue_depth(bus.names.results) == 0
