"""A local fleet as deploy/local/up starts it, with the broker users deploy/ensure-services makes:
each worker connects as a broker user of its own; a submitter who publishes a cancel by hand
with the scheduler's broker credentials is refused, and the campaign's runs finish; a cancel the
results DB took reaches the workers through the collector."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from services.common.bus.control import ControlMessage
from services.common.bus.rabbitmq import RabbitBus, Role
from services.common.config import Settings, with_password
from services.common.errors import BusError
from services.common.store import Store

from tests.integration.broker_admin import BrokerAdmin
from tests.integration.fleet import ROOT, TEST_PASSWORD_PREFIX, TEST_TARGET_PASSWORD, target_yaml, wait_for
from tests.missing import missing

pytestmark = pytest.mark.integration


def _rabbitmqctl(*args: str) -> str:
    return subprocess.run(["rabbitmqctl", "-q", *args], capture_output=True, text=True, timeout=60).stdout


class LocalFleet:
    """deploy/local/up's collector and two workers on a vhost, broker users, namespace and results
    DB of their own (only `ensure-services rabbitmq` runs: the local MariaDB's accounts are left alone)."""

    def __init__(self, settings: Settings, tmp: Path):
        self.tag = f"bftest-{secrets.token_hex(3)}"
        self.tmp, self.var = tmp, tmp / "var"
        self.db = replace(settings, namespace=self.tag, db_name=f"benchfleet_test_{self.tag[7:]}")
        self.var.mkdir()
        (self.var / "local.env").write_text(
            f"BENCHFLEET_DB_HOST={settings.db_host}\nBENCHFLEET_DB_PORT={settings.db_port}\n"
            f"BENCHFLEET_DB_USER={settings.db_user}\nBENCHFLEET_DB_NAME={self.db.db_name}\n")
        self.env = dict(os.environ, BENCHFLEET_VAR=str(self.var), BENCHFLEET_SECRETS=str(tmp / "secrets"),
                        BENCHFLEET_CONFIG=str(tmp / "settings.env"), BENCHFLEET_NAMESPACE=self.tag,
                        BENCHFLEET_AMQP_VHOST=self.tag, BENCHFLEET_AMQP_USER_PREFIX=self.tag,
                        BENCHFLEET_DB_NAME=self.db.db_name, BENCHFLEET_ENSURE_SERVICES="rabbitmq",
                        BENCHFLEET_LOCAL_WORKERS="2", BENCHFLEET_LOCAL_MONITORING="0",
                        BENCHFLEET_SD_DIR=str(tmp / "targets"), BENCHFLEET_BIN=str(Path(sys.executable).parent),
                        BENCHFLEET_TARGET_PASSWORD_ENV=TEST_PASSWORD_PREFIX + "*",
                        PYTHONPATH=str(ROOT), **{TEST_TARGET_PASSWORD: settings.db_password or ""})
        if settings.db_password:
            self.env["BENCHFLEET_DB_PASSWORD"] = settings.db_password

    def fleet_env(self) -> dict[str, str]:
        return dict(line.split("=", 1) for line in (self.var / "fleet.env").read_text().splitlines()
                    if line and not line.startswith("#"))

    def scheduler(self) -> Settings:
        """The scheduler's broker user, which every submitter holds."""
        f = self.fleet_env()
        password = Path(f["BENCHFLEET_AMQP_PASSWORD_FILE"]).read_text().strip()
        return Settings(amqp_url=with_password(f["BENCHFLEET_AMQP_URL"], password), namespace=self.tag)

    def cli(self, *args: str, wait: bool = True):
        env = dict(self.env, **{k: v for k, v in self.fleet_env().items() if k in (
            "BENCHFLEET_AMQP_URL", "BENCHFLEET_AMQP_PASSWORD_FILE")})
        cmd = [sys.executable, "-m", "services.scheduler.cli", *args]
        if not wait:
            return subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)

    def spec(self, name: str, duration: str, repeat: int) -> Path:
        path = self.tmp / f"{name}.yaml"
        path.write_text(f"name: {name}\ntargets:\n{target_yaml(self.db, 'A', 'bf_users_' + self.tag[7:])}"
                        f"workloads: [oltp_point_select]\ndata: {{tables: 1, table_size: 500}}\nthreads: [1]\n"
                        f"duration: {duration}\nwarmup: 0s\nrepeat: {repeat}\nrate: 200\n")  # open loop: users, not speed
        return path

    def counts(self, campaign_id: str) -> dict[str, int]:
        with Store(self.db) as store:
            return store.runs.counts(campaign_id)

    def campaign(self, name: str) -> str:
        def found() -> bool:
            with Store(self.db) as store:
                return store.campaigns.get(name) is not None
        wait_for(found, 60, f"campaign {name} recorded")
        with Store(self.db) as store:
            return store.campaigns.get(name).campaign_id

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in (self.var / "log").glob("*.log"))


@pytest.fixture(scope="module")
def local_fleet(rabbitmq, settings, tmp_path_factory):
    if os.geteuid() != 0 or shutil.which("rabbitmqctl") is None:
        missing("needs root and rabbitmqctl (the broker's users are made with it)")
    fleet = LocalFleet(settings, tmp_path_factory.mktemp("local-fleet"))
    try:
        up = subprocess.run([str(ROOT / "deploy" / "local" / "up"), "collector", "worker"], env=fleet.env, cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
        assert up.returncode == 0, up.stdout + up.stderr
        yield fleet
    finally:
        subprocess.run([str(ROOT / "deploy" / "local" / "down")], env=fleet.env, cwd=ROOT, capture_output=True,
                       timeout=120)
        admin = BrokerAdmin(rabbitmq)
        admin.delete_vhost(fleet.tag)
        for user in ("scheduler", "worker", "collector", "worker-local-1", "worker-local-2"):
            admin.delete_user(f"{fleet.tag}-{user}")
        import mysql.connector
        conn = mysql.connector.connect(**{k: v for k, v in fleet.db.db_params().items() if k != "database"})
        conn.cursor().execute(f"DROP DATABASE IF EXISTS `{fleet.db.db_name}`")
        conn.cursor().execute(f"DROP DATABASE IF EXISTS `bf_users_{fleet.tag[7:]}`")
        conn.close()


def test_each_local_worker_connects_as_a_broker_user_of_its_own(local_fleet):
    """BENCHFLEET_LOCAL_WORKERS=2: two workers, each connected as <prefix>-worker-local-N, neither
    as the user workers of earlier versions shared."""
    tag = local_fleet.tag
    wanted = {f"{tag}-worker-local-1", f"{tag}-worker-local-2"}

    def users() -> set[str]:
        return set(_rabbitmqctl("list_connections", "-p", tag, "user").split())
    wait_for(lambda: wanted <= users(), 60, "both workers to connect")
    assert f"{tag}-worker" not in users(), users()
    assert (local_fleet.var / "run" / "worker-2.pid").exists()


def test_a_submitter_cannot_cancel_a_running_campaign_through_the_broker(local_fleet):
    """A submitter publishes a cancel of a running campaign by hand, with the scheduler's broker
    credentials: the broker refuses it, and every run of the campaign finishes ok."""
    waiting = local_fleet.cli("submit", str(local_fleet.spec("victim", "3s", 4)), "--wait", "--poll", "0.5", wait=False)
    try:
        cid = local_fleet.campaign("victim")
        wait_for(lambda: local_fleet.counts(cid)["running"] > 0, 120, "a run of the campaign in progress")
        with pytest.raises(BusError, match="ACCESS_REFUSED"):
            with RabbitBus(local_fleet.scheduler(), name="hostile submitter", role=Role.SCHEDULER) as bus:
                bus.publish_control(ControlMessage(action="cancel", campaign_id=cid))
        out, err = waiting.communicate(timeout=240)
    finally:
        if waiting.poll() is None:
            waiting.kill()
    assert waiting.returncode == 0, out + err + local_fleet.logs()
    assert local_fleet.counts(cid)["done"] == 4, (local_fleet.counts(cid), local_fleet.logs())


def test_a_cancel_the_results_db_took_reaches_the_workers_through_the_collector(local_fleet):
    """`scheduler cancel` writes only to the results DB; the collector tells the workers, and the
    active run stops within seconds."""
    cid_done = local_fleet.cli("submit", str(local_fleet.spec("stopme", "30s", 4)), "--json")
    assert cid_done.returncode == 0, cid_done.stderr
    cid = local_fleet.campaign("stopme")
    wait_for(lambda: local_fleet.counts(cid)["running"] > 0, 120, "a run of the campaign in progress")
    t0 = time.time()
    r = local_fleet.cli("cancel", cid)
    # It returns once the collector's cancel is in the control log: the workers were told.
    assert r.returncode == 0 and "active runs stop within seconds" in r.stdout, r.stdout + r.stderr
    wait_for(lambda: local_fleet.counts(cid)["running"] == 0, 30, "the active runs to stop")
    assert time.time() - t0 < 20
    with Store(local_fleet.db) as store:
        assert store.campaigns.get(cid).state == "cancelled"
        assert all(r.status == "cancelled" for r in store.results.rows(cid))
    log = (local_fleet.var / "log" / "collector.log").read_text()
    assert '"cancel_relayed"' in log and cid in log, log[-3000:]
