"""Faults during a campaign, with real RabbitMQ, MariaDB, worker and collector processes: every
run ends with exactly one stored result (or is failed or cancelled on purpose), nothing is lost,
nothing is counted twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from typing import Iterator

import pytest

from services.common.bus.rabbitmq import RabbitBus
from services.common.store import Store

from tests.integration.faults import ThrowawayMariadb, broker_env, broker_listening, restart_broker, wait_orphans_gone
from tests.integration.fleet import ROOT, Fleet, assert_exactly_once, target_yaml, wait_for
from tests.integration.private_rabbit import PrivateRabbit

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def own_broker(fleet: Fleet) -> Iterator[PrivateRabbit]:
    """A RabbitMQ node of the test's own that the fleet's processes use: restarting it or lowering
    its timeouts touches no other test, so these tests run beside the others."""
    rabbit = PrivateRabbit(fleet.workdir / "rabbit").start()
    shared = fleet.settings
    fleet.settings = replace(shared, amqp_url=rabbit.url)
    try:
        yield rabbit
    finally:
        fleet.stop()
        fleet.settings = shared  # the fleet's own teardown goes on with the shared services
        rabbit.cleanup()


def spec_text(fleet: Fleet, *, name: str = "faults", targets: str | None = None, threads: str = "[1, 2]",
              duration: str = "3s", repeat: int = 3) -> str:
    s = fleet.settings
    return (
        f"name: {name}\n"
        f"pool: {fleet.pool}\n"
        "targets:\n" + (targets or target_yaml(s, "A", "bf_it_faults")) +
        "workloads: [oltp_point_select]\n"
        "data: {tables: 1, table_size: 1000}\n"
        f"threads: {threads}\n"
        f"duration: {duration}\n"
        "warmup: 0\n"
        f"repeat: {repeat}\n"
        # Open loop at 200 tx/s: these tests are about faults, not throughput. A closed loop kept both
        # cores busy for every window, in a suite whose parallel pass waits on the CPU.
        "rate: 200\n"
    )


def submit(fleet: Fleet, text: str, *extra: str) -> str:
    path = fleet.workdir / f"spec-{time.monotonic_ns()}.yaml"
    path.write_text(text)
    r = fleet.cli("scheduler", "submit", str(path), "--json", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["campaign_id"]


def submit_waiting(fleet: Fleet, text: str) -> subprocess.Popen:
    path = fleet.workdir / "spec-wait.yaml"
    path.write_text(text)
    return subprocess.Popen([sys.executable, "-m", "services.scheduler.cli", "submit", str(path), "--wait", "--poll", "0.5"],
                            env=fleet.env(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def campaign_of(fleet: Fleet, name: str) -> str:
    def found() -> bool:
        with Store(fleet.settings) as store:
            return store.campaigns.get(name) is not None
    wait_for(found, 60, f"campaign {name} recorded")
    with Store(fleet.settings) as store:
        return store.campaigns.get(name).campaign_id


def counts(fleet: Fleet, campaign_id: str) -> dict[str, int]:
    with Store(fleet.settings) as store:
        return store.runs.counts(campaign_id)


def campaign_state(fleet: Fleet, campaign_id: str) -> str:
    with Store(fleet.settings) as store:
        return store.campaigns.get(campaign_id).state


def finished(fleet: Fleet, campaign_id: str, total: int) -> bool:
    c = counts(fleet, campaign_id)
    return c["done"] + c["failed"] + c["cancelled"] >= total


def running_on(fleet: Fleet, campaign_id: str, min_age_s: float = 1.0) -> list[str]:
    """Workers with a run of the campaign in progress for at least ``min_age_s``."""
    with Store(fleet.settings) as store:
        return [w for *_, w, started in store.runs.active(campaign_id) if started and time.time() - started >= min_age_s]


def test_worker_sigkilled_three_times(fleet):
    """Two workers; three times a worker measuring a run is SIGKILLed and replaced: every run
    is finished by some worker, stored exactly once, and no load process outlives its worker."""
    fleet.start_collector()
    workers = {f"w{i}": fleet.start_worker(f"w{i}") for i in (1, 2)}
    cid = submit(fleet, spec_text(fleet, name="killed", threads="[1, 2]", duration="4s", repeat=3))
    total = 6
    kills = 0
    next_id = 3
    while kills < 3:
        # The killed worker's run still shows as running on it until redelivered: only live workers count.
        live = lambda: [w for w in running_on(fleet, cid, 1.5) if w in workers]  # noqa: E731
        wait_for(lambda: live() or finished(fleet, cid, total), 120, "a run in progress")
        victims = live()
        assert victims, f"the campaign ended after {kills} kills: make it longer\n" + fleet.logs()
        victim = workers.pop(victims[0])
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(10)
        kills += 1
        left = wait_orphans_gone(victim.pid)
        assert not left, f"load processes {left} outlived SIGKILLed worker {victims[0]}"
        workers[f"w{next_id}"] = fleet.start_worker(f"w{next_id}")
        next_id += 1
    wait_for(lambda: finished(fleet, cid, total), 240, "the campaign to finish")
    assert_exactly_once(fleet, cid, total)
    with Store(fleet.settings) as store:
        again = store.db.rows("SELECT SUM(attempts - 1) FROM runs WHERE campaign_id=%s", (cid,))[0][0]
    assert again >= 3, "each interrupted run should have been delivered again"


def test_broker_restart_mid_campaign(own_broker, fleet):
    """RabbitMQ restarted mid-campaign: scheduler --wait, the worker and the collector carry on
    and the campaign completes with every result stored once."""
    fleet.start_collector()
    fleet.start_worker("w1")
    # Four runs: one stored before the restart, one in progress across it, two after it.
    waiter = submit_waiting(fleet, spec_text(fleet, name="restart", repeat=2))
    try:
        cid = campaign_of(fleet, "restart")
        wait_for(lambda: counts(fleet, cid)["done"] >= 1 and running_on(fleet, cid, 0.5), 120, "a run in progress")
        restart_broker(down_s=3, ctl=own_broker.ctl_out)
        out, err = waiter.communicate(timeout=300)
    finally:
        if waiter.poll() is None:
            waiter.kill()
        assert broker_listening(own_broker.port), "RabbitMQ must be running again"
    assert waiter.returncode == 0, err + fleet.logs()
    assert "Traceback" not in err, err  # pika's own traceback of the reset connection stays quiet
    assert_exactly_once(fleet, cid, 4)


def test_collector_stopped_for_part_of_a_campaign(fleet):
    """With the collector down, results wait in the durable queue; all are stored once it returns."""
    collector = fleet.start_collector()
    fleet.start_worker("w1")
    cid = submit(fleet, spec_text(fleet, name="nocollector", repeat=2))
    wait_for(lambda: counts(fleet, cid)["done"] >= 1, 120, "a first stored result")
    os.killpg(collector.pid, signal.SIGTERM)
    collector.wait(20)

    def waiting() -> int:
        with RabbitBus(fleet.settings) as bus:
            return bus.queue_depth(bus.names.results)
    wait_for(lambda: waiting() >= 2, 120, "results waiting in the queue")
    assert counts(fleet, cid)["done"] < 4
    fleet.start_collector()
    wait_for(lambda: finished(fleet, cid, 4), 120, "every result stored")
    assert_exactly_once(fleet, cid, 4)


def test_target_killed_mid_run(fleet):
    """The target's server is killed mid-run: the run fails with the MySQL error, is tried
    BENCHFLEET_RUN_ATTEMPTS times, is stored failed and dead-lettered with the reason; the other
    target's runs go on; status and report show the failure."""
    target = ThrowawayMariadb().start()
    try:
        fleet.extra_env["BENCHFLEET_RUN_ATTEMPTS"] = "2"
        fleet.start_collector()
        fleet.start_worker("w1")
        targets = target_yaml(fleet.settings, "A", "bf_it_faults") + (
            f"  - {{name: K, host: 127.0.0.1, port: {target.port}, user: root, database: sbtest}}\n")
        cid = submit(fleet, spec_text(fleet, name="targetdies", targets=targets, threads="[2]", duration="6s", repeat=2))

        def k_running() -> bool:
            with Store(fleet.settings) as store:
                return any(t == "K" and s and time.time() - s > 2 for t, _, _, _, _, s in store.runs.active(cid))
        wait_for(k_running, 120, "a run on target K in progress")
        target.kill()
        wait_for(lambda: finished(fleet, cid, 4), 240, "the campaign to finish")
        wait_for(lambda: campaign_state(fleet, cid) != "running", 10, "the campaign's final state")
    finally:
        target.cleanup()
    with Store(fleet.settings) as store:
        results = {(r.target, r.repetition): r for r in store.results.rows(cid)}
        attempts = dict(store.db.rows("SELECT run_id, attempts FROM runs WHERE campaign_id=%s", (cid,)))
        state = store.campaigns.get(cid).state
    assert results[("A", 1)].status == results[("A", 2)].status == "ok"
    killed = results[("K", 1)]
    assert killed.status == "failed" and "MySQL error" in killed.error, killed.error
    assert results[("K", 2)].status == "failed" and "MySQL error 2003" in results[("K", 2)].error
    assert attempts[killed.run_id] == 2
    assert state == "finished_with_failures", state
    reasons = []
    with RabbitBus(fleet.settings) as bus:
        while (d := bus.get(bus.names.dead)) is not None:
            reasons.append(str(d.headers.get("x-benchfleet-reason")))
            bus.ack(d.delivery_tag)
    assert len(reasons) == 2 and all("run failed after 2 attempt(s): MySQL error" in r for r in reasons), reasons
    status = fleet.cli("scheduler", "status", cid)
    assert "failed 2" in status.stdout and "MySQL error" in status.stdout, status.stdout
    report = fleet.cli("collector", "report", cid)
    assert report.returncode == 0, report.stderr
    assert "fail" in report.stdout.lower(), report.stdout


def test_run_longer_than_consumer_timeout_and_heartbeats(own_broker, fleet):
    """A run lasting longer than the broker's delivery-ack timeout and several heartbeats is
    measured once and stored once, and its delivery does not stay unacked or come back."""
    fleet.extra_env["BENCHFLEET_HEARTBEAT"] = "2"
    with broker_env(own_broker.ctl_out, consumer_timeout=4000, channel_tick_interval=1000):
        fleet.start_collector()
        fleet.start_worker("w1")
        cid = submit(fleet, spec_text(fleet, name="longrun", threads="[1]", duration="12s", repeat=1))
        wait_for(lambda: finished(fleet, cid, 1), 120, "the long run to finish")
        time.sleep(5)  # give a wrongly redelivered run the chance to start again
    assert_exactly_once(fleet, cid, 1)
    logs = fleet.logs()
    assert logs.count('"run_started"') == 1, logs


def test_scheduler_refuses_runs_longer_than_the_ack_timeout(fleet, tmp_path):
    """A spec whose run outlasts BENCHFLEET_MAX_RUN_S is refused naming duration; nothing is recorded."""
    fleet.extra_env["BENCHFLEET_MAX_RUN_S"] = "60"
    spec = tmp_path / "long.yaml"
    spec.write_text(spec_text(fleet, name="toolong", duration="2m"))
    r = fleet.cli("scheduler", "submit", str(spec))
    assert r.returncode == 2 and "duration" in r.stderr and "longest allowed run" in r.stderr, r.stderr


def test_cancel_drops_pending_and_stops_the_active_run(fleet):
    """`scheduler cancel` stops the active run within seconds (stored as a cancelled partial
    result) and drops the pending runs; the worker then takes other campaigns' runs."""
    fleet.start_collector()
    fleet.start_worker("w1")
    cid = submit(fleet, spec_text(fleet, name="cancelme", threads="[1, 2]", duration="20s", repeat=2))
    wait_for(lambda: running_on(fleet, cid, 2.0), 120, "a run in progress")
    t0 = time.time()
    r = fleet.cli("scheduler", "cancel", cid)
    assert r.returncode == 0 and "3 pending runs dropped" in r.stdout, r.stdout + r.stderr
    wait_for(lambda: counts(fleet, cid)["running"] == 0, 30, "the active run to stop")
    assert time.time() - t0 < 15
    with Store(fleet.settings) as store:
        results = store.results.rows(cid)
        assert store.campaigns.get(cid).state == "cancelled"
    assert len(results) == 1 and results[0].status == "cancelled" and 0 < results[0].measured_s < 20
    assert counts(fleet, cid)["cancelled"] == 4
    other = submit(fleet, spec_text(fleet, name="after", threads="[1]", duration="1s", repeat=1))
    wait_for(lambda: finished(fleet, other, 1), 60, "the next campaign's run")
    assert counts(fleet, other)["done"] == 1
    with RabbitBus(fleet.settings) as bus:
        assert bus.queue_depth(bus.names.runs_queue(fleet.pool)) == 0
    assert "cancelled" in fleet.cli("scheduler", "status", cid).stdout


def test_worker_started_after_a_cancel_drops_the_campaigns_runs(fleet):
    """A campaign cancelled while no worker runs: a worker started afterwards replays the cancel
    from the control log before its first run, acks the campaign's queued runs unmeasured
    (nothing done, state stays cancelled) and still measures the next campaign."""
    fleet.start_collector()
    cid = submit(fleet, spec_text(fleet, name="cancelledearly", threads="[1, 2]", duration="2s", repeat=2))
    r = fleet.cli("scheduler", "cancel", cid)
    assert r.returncode == 0 and "4 pending runs dropped" in r.stdout, r.stdout + r.stderr
    with RabbitBus(fleet.settings) as bus:
        assert bus.queue_depth(bus.names.runs_queue(fleet.pool)) == 4, "the cancelled runs should still be queued"
    fleet.start_worker("w1")
    other = submit(fleet, spec_text(fleet, name="afterearly", threads="[1]", duration="1s", repeat=1))
    wait_for(lambda: finished(fleet, other, 1), 120, "the next campaign's run")
    assert counts(fleet, other)["done"] == 1
    time.sleep(1)  # give a wrongly measured result of the cancelled campaign the time to be stored
    with Store(fleet.settings) as store:
        assert store.results.rows(cid) == []
        assert store.campaigns.get(cid).state == "cancelled"
    c = counts(fleet, cid)
    assert c["cancelled"] == 4 and c["done"] == c["failed"] == c["running"] == 0, c
    with RabbitBus(fleet.settings) as bus:
        assert bus.queue_depth(bus.names.runs_queue(fleet.pool)) == 0
    logs = "".join(p.read_text(errors="replace") for p in fleet.workdir.glob("worker-*.log"))
    assert logs.count('"run_dropped_cancelled"') == 4, logs
    assert logs.count('"run_started"') == 1, logs
    assert "cancelled" in fleet.cli("scheduler", "status", cid).stdout


def test_duplicate_submission_is_refused_unless_forced(fleet):
    """The same spec submitted twice while its campaign runs publishes once; --force twice;
    an explicit --idempotency-key refuses even a changed spec."""
    text = spec_text(fleet, name="twice", threads="[1]", repeat=1)
    first = submit(fleet, text)
    path = fleet.workdir / "twice.yaml"
    path.write_text(text)
    again = fleet.cli("scheduler", "submit", str(path))
    assert again.returncode == 0 and f"campaign {first}" in again.stderr and "already submitted" in again.stderr
    with RabbitBus(fleet.settings) as bus:
        assert bus.queue_depth(bus.names.runs_queue(fleet.pool)) == 1
    forced = submit(fleet, text, "--force")
    assert forced != first
    keyed = submit(fleet, text, "--idempotency-key", "nightly-42", "--force")
    path.write_text(text.replace("repeat: 1", "repeat: 2"))
    dup = fleet.cli("scheduler", "submit", str(path), "--idempotency-key", "nightly-42", "--json")
    assert json.loads(dup.stdout) == {"campaign_id": keyed, "duplicate": True}
    with RabbitBus(fleet.settings) as bus:
        assert bus.queue_depth(bus.names.runs_queue(fleet.pool)) == 3
    with Store(fleet.settings) as store:
        assert len(store.campaigns.latest()) == 3


def test_bad_messages_on_every_queue_are_dead_lettered(fleet):
    """Undecodable and wrong-version messages on the runs and results queues are dead-lettered
    with the reason, a bad control message is ignored, and the consumers keep going."""
    with RabbitBus(fleet.settings) as bus:
        bus.declare((fleet.pool,))
        bus.declare_control_log()
        n = bus.names
        bus.publish(n.runs_exchange, fleet.pool, b"\xff not json")
        bus.publish(n.runs_exchange, fleet.pool, b'{"schema": "benchfleet.run/2", "run_id": "x"}')
        bus.publish(n.runs_exchange, fleet.pool, b'{"schema": "benchfleet.result/1"}')
        bus.publish(n.results_exchange, "", b"[1, 2]")
        bus.publish(n.results_exchange, "", b'{"schema": "benchfleet.result/9"}')
        bus.publish(n.results_exchange, "", b'{"schema": "benchfleet.result/1", "run_id": 5}')
    fleet.start_collector()
    fleet.start_worker("w1")
    time.sleep(2)
    with RabbitBus(fleet.settings) as bus:
        bus.publish(bus.names.control, "", b"garbage")
    cid = submit(fleet, spec_text(fleet, name="afterbad", threads="[1]", duration="1s", repeat=1))
    wait_for(lambda: finished(fleet, cid, 1), 60, "a good run after the bad messages")
    reasons = []
    with RabbitBus(fleet.settings) as bus:
        while (d := bus.get(bus.names.dead)) is not None:
            reasons.append((d.headers.get("x-benchfleet-queue"), str(d.headers.get("x-benchfleet-reason"))))
            bus.ack(d.delivery_tag)
    runs_q, results_q = fleet.settings.namespace + ".runs." + fleet.pool, fleet.settings.namespace + ".results"
    assert sorted(q for q, _ in reasons) == sorted([runs_q] * 3 + [results_q] * 3), reasons
    assert any("not JSON" in r for _, r in reasons)
    assert any("benchfleet.run/2" in r for _, r in reasons)
    assert any("not expected on this queue" in r for _, r in reasons)
    assert counts(fleet, cid)["done"] == 1
    assert "control_message_undecodable" in fleet.logs()
