"""deploy/local/up keeps the worker and the collector running: SIGKILLed, each is started again
by its supervisor (and consumes again); deploy/local/down stops supervisors and processes alike,
restarting nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from services.common.bus.rabbitmq import RabbitBus
from services.common.store import Store

from tests.integration.fleet import ROOT, Fleet, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def fleet_pool() -> str:
    # The collector of `up` declares the "default" pool's queue (the fleet's teardown deletes it).
    return "default"


def local_env(fleet: Fleet, var: Path) -> dict[str, str]:
    """A var dir whose local.env points `up` at the test's namespace and results DB, and the
    environment that skips ensure-services and monitoring."""
    var.mkdir()
    env = fleet.env()
    lines = [f"{k}={v}" for k, v in env.items()
             if k.startswith("BENCHFLEET_") and k != "BENCHFLEET_DB_PASSWORD" and "\n" not in v]
    # No per-role results-DB user either: the collector writes with the test's own.
    (var / "secrets").mkdir()
    lines.append(f"BENCHFLEET_SECRETS={var / 'secrets'}")
    (var / "local.env").write_text("\n".join(lines) + "\n")
    env.update({"BENCHFLEET_VAR": str(var), "BENCHFLEET_ENSURE_SERVICES": "no", "BENCHFLEET_LOCAL_MONITORING": "0",
                "BENCHFLEET_SD_DIR": ""})
    return env


def child(var: Path, name: str) -> dict:
    path = var / "run" / f"{name}.child"
    return json.loads(path.read_text()) if path.exists() else {}


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def consumers(fleet: Fleet, queue: str) -> int:
    """How many consumers ``queue`` has (0 before anyone declared it)."""
    try:
        with RabbitBus(fleet.settings) as bus:
            return int(bus._ch.queue_declare(queue, passive=True).method.consumer_count)
    except Exception:  # NOT_FOUND closes the channel: nobody declared the queue yet
        return 0


def test_killed_worker_and_collector_come_back_and_down_stops_everything(fleet, tmp_path):
    """SIGKILL the worker and the collector that `up` started: each supervisor logs the exit,
    starts a new process that consumes again; `down` then leaves no process behind."""
    var = tmp_path / "var"
    env = local_env(fleet, var)
    with Store(fleet.settings):
        pass  # the results DB the collector writes to
    up = subprocess.run([str(ROOT / "deploy/local/up")], env=env, capture_output=True, text=True, timeout=60)
    assert up.returncode == 0, up.stdout + up.stderr
    supervisors = {n: int((var / "run" / f"{n}.pid").read_text()) for n in ("worker", "collector")}
    try:
        queues = {"collector": f"{fleet.settings.namespace}.results", "worker": f"{fleet.settings.namespace}.runs.default"}
        for name, queue in queues.items():
            wait_for(lambda: child(var, name).get("pid") and consumers(fleet, queue) == 1, 60, f"the {name} to consume")
            first = child(var, name)["pid"]
            os.kill(first, signal.SIGKILL)
            wait_for(lambda: child(var, name).get("pid") not in (None, first), 30, f"the {name} to be restarted")
            assert child(var, name)["restarts"] == 1
            wait_for(lambda: consumers(fleet, queue) == 1, 60, f"the restarted {name} to consume")
            assert alive(child(var, name)["pid"]) and alive(supervisors[name])
            log = (var / "log" / f"{name}.log").read_text()
            assert '"event": "supervised_exited_restarting"' in log and "signal SIGKILL" in log
    finally:
        last = {n: child(var, n).get("pid") for n in supervisors}
        down = subprocess.run([str(ROOT / "deploy/local/down")], env=env, capture_output=True, text=True, timeout=60)
    assert down.returncode == 0, down.stderr
    for name, pid in supervisors.items():
        assert not alive(pid), f"the {name} supervisor still runs"
        assert last[name] and not alive(last[name]), f"the {name} still runs after down"
    assert not (var / "run" / "worker.pid").exists()


@pytest.mark.parametrize(("command", "status"), [
    (["true"], 1),                      # a service that exits cleanly at once still did not start
    (["sh", "-c", "exit 3"], 3),        # its own failure status
    (["sh", "-c", "kill -KILL $$"], 137),  # 128 + the signal, as a shell reports it
])
def test_first_start_that_ends_at_once_is_reported_as_a_failure(command, status):
    """A process that ends within the grace of its first start makes supervise exit non-zero (so
    `up` reports it), with the child's status, or 1 when the child exited 0."""
    p = subprocess.run([str(ROOT / "deploy/local/supervise"), "svc", "--", *command],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == status, p.stderr
    assert "supervised_failed_at_start" in p.stderr


def test_a_supervisor_killed_outright_takes_its_child_with_it(tmp_path):
    """SIGKILL to the supervisor (what a user finding the worker's pid file does): the child it
    supervised stops too, so the next `up` does not run a second worker beside an orphan."""
    state = tmp_path / "svc.child"
    sup = subprocess.Popen([str(ROOT / "deploy/local/supervise"), "svc", "--state", str(state), "--",
                            "sleep", "600"], stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: state.exists() and alive(json.loads(state.read_text())["pid"]), 10, "the child")
        pid = json.loads(state.read_text())["pid"]
        os.kill(sup.pid, signal.SIGKILL)
        sup.wait(10)
        wait_for(lambda: not alive(pid), 10, "the orphaned child to stop")
    finally:
        if sup.poll() is None:
            sup.kill()
