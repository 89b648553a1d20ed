"""Least privilege on the broker: deploy/ensure-services makes one user per role, and each may do
its job and no more (the worker cannot publish runs or cancels, the scheduler cannot publish
results or cancels, the collector publishes only cancels and dead letters). Runs the real script, twice, on a vhost of its own."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pika.exceptions
import pytest

from services.common.bus.rabbitmq import RabbitBus, Role, _quorum_args
from services.common.config import Settings, with_password
from services.common.bus.control import ControlMessage
from services.common.errors import BusError, TopologyMissing
from services.common.messages.events import RunEvent
from services.common.messages.runs import TargetDefinition
from services.common.spec.loading import parse_spec

from tests.integration.broker_admin import BrokerAdmin
from tests.missing import missing

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
POOL = "perm"


@pytest.fixture(scope="module")
def deployed(rabbitmq, tmp_path_factory):
    """ensure-services rabbitmq, run twice, for a vhost, users and namespace of this module's own
    (the first test finds it fresh: the file's order is kept)."""
    tmp_path = tmp_path_factory.mktemp("deployed")
    if os.geteuid() != 0 or shutil.which("rabbitmqctl") is None:
        missing("needs root and rabbitmqctl (the broker's users are made with it)")
    tag = f"bftest-{secrets.token_hex(3)}"
    # rabbitmqctl through a shim that records its command lines (what `ps` would show).
    shim = tmp_path / "bin" / "rabbitmqctl"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {tmp_path / "rabbitmqctl.argv"}\n'
                    f'exec {shutil.which("rabbitmqctl")} "$@"\n')
    shim.chmod(0o755)
    try:
        runs, log, seen = [], tmp_path / "rabbitmqctl.argv", 0
        for i in range(2):
            runs.append(_ensure_services(tag, tmp_path))
            # What each run gave rabbitmqctl, apart.
            argv = log.read_text() if log.exists() else ""
            (tmp_path / f"rabbitmqctl.argv.{i}").write_text(argv[seen:])
            seen = len(argv)
        passwords = [(tmp_path / "secrets" / f"amqp_password_{r}").read_text() for r in ("scheduler", "worker", "collector")]
        yield tag, tmp_path, runs, passwords
    finally:
        admin = BrokerAdmin(rabbitmq)
        admin.delete_vhost(tag)
        for role in ("scheduler", "worker", "collector"):
            admin.delete_user(f"{tag}-{role}")


def _ensure_services(tag: str, tmp_path: Path, worker_hosts: str = "") -> subprocess.CompletedProcess:
    """deploy/ensure-services rabbitmq for the vhost, users and namespace ``tag`` (rabbitmqctl
    through the shim in ``tmp_path``), with a broker user for each of ``worker_hosts``."""
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}", BENCHFLEET_AMQP_VHOST=tag,
               BENCHFLEET_AMQP_USER_PREFIX=tag, BENCHFLEET_NAMESPACE=tag,
               BENCHFLEET_SECRETS=str(tmp_path / "secrets"), BENCHFLEET_VAR=str(tmp_path / "var"),
               BENCHFLEET_CONFIG=str(tmp_path / "settings.env"), BENCHFLEET_WORKER_HOSTS=worker_hosts)
    return subprocess.run([str(ROOT / "deploy" / "ensure-services"), "rabbitmq"], env=env, capture_output=True,
                          text=True, timeout=300)


def _settings(tmp_path: Path, tag: str, role: str) -> Settings:
    env = dict(line.split("=", 1) for line in (tmp_path / "var" / "fleet.env").read_text().splitlines()
               if line and not line.startswith("#"))
    prefix = "BENCHFLEET_" if role == "scheduler" else f"BENCHFLEET_{role.upper()}_"
    password = Path(env[f"{prefix}AMQP_PASSWORD_FILE"]).read_text().strip()
    return Settings(amqp_url=with_password(env[f"{prefix}AMQP_URL"], password), namespace=tag)


def _amqp(fn) -> None:
    """Run ``fn`` on a raw channel; the broker's refusal as a BusError."""
    try:
        fn()
    except pika.exceptions.ChannelClosedByBroker as e:
        raise BusError(f"{e.reply_code} {e.reply_text}") from None


def _refused(fn) -> str:
    """Run ``fn`` (a publish); return the broker's refusal, or fail if it was accepted."""
    try:
        fn()
    except BusError as e:
        assert "ACCESS_REFUSED" in str(e), e
        return str(e)
    raise AssertionError("the broker accepted what this role may not do")


def _bus(settings: Settings, role: Role) -> RabbitBus:
    return RabbitBus(settings, name=f"perm {role.value}", role=role)


def test_each_role_does_its_job_and_no_more(deployed):
    """Scheduler publishes runs; the worker takes runs, publishes results and reads the control
    log; the collector takes results and publishes cancels. Each is refused the others' publishes:
    the scheduler's user, which every submitter holds, cannot publish a cancel."""
    tag, tmp_path, runs, passwords = deployed
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    # Idempotent: the second run kept the passwords and wrote the same fleet.env.
    again = [(tmp_path / "secrets" / f"amqp_password_{r}").read_text() for r in ("scheduler", "worker", "collector")]
    assert again == passwords and len(set(passwords)) == 3
    sched, work, coll = (_settings(tmp_path, tag, r) for r in ("scheduler", "worker", "collector"))
    users = [urlsplit(s.amqp_url).username for s in (sched, work, coll)]
    assert users == [f"{tag}-scheduler", f"{tag}-worker", f"{tag}-collector"]

    with _bus(work, Role.WORKER) as w:  # a worker that comes first may declare nothing shared: it waits
        with pytest.raises(BusError, match="has no .* yet, and this worker's broker user may not declare it"):
            w.declare((POOL,))
    with _bus(coll, Role.COLLECTOR) as c:
        c.declare((POOL,))
    cancels: list[ControlMessage] = []
    with _bus(sched, Role.SCHEDULER) as s:
        s.declare((POOL,))
    with _bus(work, Role.WORKER) as w:
        w.declare((POOL,))
        w.subscribe_control(cancels.append)
        assert w.replay_control_log("perm", cancels.append, should_stop=lambda: False, timeout_s=30) == 0
    with _bus(sched, Role.SCHEDULER) as s:
        s.declare((POOL,))
        s.publish_runs(POOL, [b'{"run": 1}'])
    with _bus(sched, Role.SCHEDULER) as s:
        _refused(lambda: s.publish_control(ControlMessage(action="cancel", campaign_id="forged")))
    with _bus(coll, Role.COLLECTOR) as c:
        c.publish_control(ControlMessage(action="cancel", campaign_id="c"))
    with _bus(sched, Role.SCHEDULER) as s:
        _refused(lambda: s.publish_result(b"{}"))

    event = RunEvent(run_id="r", campaign_id="c", state="running", worker="w", at=0.0).encode()
    with _bus(work, Role.WORKER) as w:
        w.declare((POOL,))
        assert w.replay_control_log("perm", cancels.append, should_stop=lambda: False, timeout_s=30) == 1
        assert cancels[-1].campaign_id == "c"
        d = w.get(w.names.runs_queue(POOL))
        assert d is not None and d.body == b'{"run": 1}'
        w.ack(d.delivery_tag)
        w.publish_result(event)
        w.dead_letter(b"x", "test", w.names.results)
    for exchange in ("runs_exchange", "control"):
        with _bus(work, Role.WORKER) as w:
            _refused(lambda: w.publish(getattr(w.names, exchange), POOL, b"{}"))
    with _bus(work, Role.WORKER) as w:
        _refused(lambda: w.publish_runs(POOL, [b"{}"]))

    with _bus(coll, Role.COLLECTOR) as c:
        c.declare((POOL,))
        d = c.get(c.names.results)
        assert d is not None and d.body == event
        c.ack(d.delivery_tag)
        assert c.queue_depth(c.names.dead) >= 1
    for exchange in ("results_exchange", "runs_exchange"):
        with _bus(coll, Role.COLLECTOR) as c:
            _refused(lambda: c.publish(getattr(c.names, exchange), POOL, b"{}"))


def test_no_password_on_rabbitmqctls_command_line(deployed):
    """ensure-services gives rabbitmqctl the roles' passwords as hashes on stdin, never as an argument
    that `ps` shows to every user of the host; run again on a broker as wanted, it imports nothing
    (and starts two Erlang VMs, not one per user and grant)."""
    tag, tmp_path, runs, passwords = deployed
    first, second = ((tmp_path / f"rabbitmqctl.argv.{i}").read_text() for i in range(2))
    assert "import_definitions" in first, first
    assert "import_definitions" not in second and len(second.splitlines()) <= 2, second
    assert not any(pw.strip() in first + second for pw in passwords)


def test_a_worker_cannot_forge_a_cancel_for_the_others(deployed):
    """The worker's user may append sync markers to the control log, and the broker takes a cancel
    it sends through the sync exchange (or the dead-letter exchange): no other worker obeys it,
    neither live nor when it replays the log."""
    tag, tmp_path, runs, _ = deployed
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    sched, work = (_settings(tmp_path, tag, r) for r in ("scheduler", "worker"))
    with _bus(sched, Role.SCHEDULER) as s:
        s.declare((POOL,))
        s.declare_control_log()
    forged = ControlMessage(action="cancel", campaign_id="victim").encode()
    heard: list[ControlMessage] = []
    with _bus(work, Role.WORKER) as victim:
        victim.declare((POOL,))
        victim.subscribe_control(heard.append)
        with _bus(work, Role.WORKER) as rogue:
            rogue.declare((POOL,))
            rogue.publish(rogue.names.control_sync, "", forged)
            rogue.dead_letter(forged, "forged", rogue.names.control)
        victim.replay_control_log("victim", heard.append, should_stop=lambda: False, timeout_s=30)
    with _bus(work, Role.WORKER) as later:
        later.declare((POOL,))
        later.replay_control_log("later", heard.append, should_stop=lambda: False, timeout_s=30)
    # The log may hold the scheduler's own cancels of the tests before; the forged one is obeyed nowhere.
    assert "victim" not in {m.campaign_id for m in heard}, heard


def test_only_the_scheduler_defines_targets_and_every_worker_hears_them(deployed):
    """A target goes out once per campaign, on the control log: the scheduler's definition reaches a
    connected worker live and a later one by replay; a worker's user cannot publish one to the
    definitions exchange, and one it slips through the sync exchange is no definition."""
    tag, tmp_path, runs, _ = deployed
    sched, work, coll = (_settings(tmp_path, tag, r) for r in ("scheduler", "worker", "collector"))
    with _bus(coll, Role.COLLECTOR) as c:
        c.declare((POOL,))
    spec = parse_spec("name: t\ntargets: [{name: a, user: bench, database: sb}, {name: b, host: 203.0.113.9, "
                      "user: bench, database: sb}]\nworkloads: [oltp_point_select]\nthreads: [1]\nduration: 1s\n",
                      "spec.yaml")
    real, forged = (TargetDefinition.of(t) for t in spec.targets)
    live: list[bytes] = []
    with _bus(work, Role.WORKER) as victim:
        victim.declare((POOL,))
        victim.subscribe_control(lambda m: None, live.append)
        with _bus(sched, Role.SCHEDULER) as s:
            s.declare((POOL,))
            s.publish_definitions([real.encode()])
        with _bus(work, Role.WORKER) as rogue:
            rogue.declare((POOL,))
            _refused(lambda: rogue.publish(rogue.names.definitions, "", forged.encode()))
        with _bus(work, Role.WORKER) as rogue:
            rogue.publish(rogue.names.control_sync, "", forged.encode())
        victim.replay_control_log("victim", lambda m: None, on_definition=live.append, should_stop=lambda: False,
                                  timeout_s=30)
    replayed: list[bytes] = []
    with _bus(work, Role.WORKER) as later:
        later.declare((POOL,))
        later.replay_control_log("later", lambda m: None, on_definition=replayed.append, should_stop=lambda: False,
                                 timeout_s=30)
    assert real.encode() in live and real.encode() in replayed
    assert forged.encode() not in live + replayed


def test_a_worker_cannot_delete_or_redefine_the_fleets_queues(deployed):
    """The worker's user configures only its private control queues: deleting the runs, results
    or dead-letter queues, the control log or any shared exchange, or declaring one anew with
    other arguments, is refused, and the queued run is still there."""
    tag, tmp_path, runs, _ = deployed
    sched, work, coll = (_settings(tmp_path, tag, r) for r in ("scheduler", "worker", "collector"))
    with _bus(coll, Role.COLLECTOR) as c:
        c.declare((POOL,))
    with _bus(sched, Role.SCHEDULER) as s:
        s.declare((POOL,))
        s.publish_runs(POOL, [b'{"run": 2}'])
        depth = s.queue_depth(s.names.runs_queue(POOL))
    n = RabbitBus(work).names
    for queue in (n.runs_queue(POOL), n.results, n.dead, n.control_log):
        with _bus(work, Role.WORKER) as w:
            _refused(lambda: w.delete_queue(queue))
        with _bus(work, Role.WORKER) as w:
            _refused(lambda: _amqp(lambda: w.channel.queue_declare(queue, durable=False)))
    for exchange in (n.runs_exchange, n.results_exchange, n.dead, n.control, n.control_sync):
        with _bus(work, Role.WORKER) as w:
            _refused(lambda: _amqp(lambda: w.channel.exchange_delete(exchange)))
    with _bus(work, Role.WORKER) as w:  # and it still does its job
        w.declare((POOL,))
        assert w.queue_depth(n.runs_queue(POOL)) == depth >= 1


def test_settings_file_gives_each_cli_its_broker_user(deployed):
    """ensure-services writes the settings file the CLIs read in a fresh shell: the scheduler reaches the
    broker as its own user from it alone, and the worker and collector find their users there too."""
    from services.common.config import file_settings, parse_settings_file, settings_from

    tag, tmp_path, runs, passwords = deployed
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    path = tmp_path / "settings.env"
    values = parse_settings_file(path.read_text(), str(path))
    assert not any(pw.strip() in path.read_text() for pw in passwords)  # paths to secrets, never secrets
    users = {}
    for role in ("", "worker", "collector"):
        env = dict(file_settings(values, {}, role), BENCHFLEET_NAMESPACE=tag)
        users[role or "scheduler"] = urlsplit(settings_from(None, env).amqp_url).username
    assert users == {r: f"{tag}-{r}" for r in ("scheduler", "worker", "collector")}
    with _bus(settings_from(None, dict(file_settings(values, {}), BENCHFLEET_NAMESPACE=tag)), Role.SCHEDULER) as s:
        s.declare((POOL,))


def test_the_parts_of_a_run_meet_on_the_parts_exchange(deployed):
    """The scheduler declares the parts exchange at a submit; two workers' parts links bind their
    private queues to it under a run id and hear each other's signals (spec load_hosts); the
    collector may not publish there, and a worker may not delete it."""
    from services.common.bus.rabbit_parts import RabbitPartsLink

    tag, tmp_path, runs, passwords = deployed
    sched, work, coll = (_settings(tmp_path, tag, r) for r in ("scheduler", "worker", "collector"))
    with _bus(sched, Role.SCHEDULER) as s:
        s.declare((POOL,))
    a, b = (RabbitPartsLink(_bus(work, Role.WORKER)) for _ in range(2))
    try:
        a.open("c.run1")
        b.open("c.run1")
        a.send("c.run1", b'{"hello": 1}')
        heard: list[bytes] = []
        for _ in range(20):
            heard += b.receive(0.2)
            if heard:
                break
        assert heard == [b'{"hello": 1}']
    finally:
        a.close()
        b.close()
    with _bus(coll, Role.COLLECTOR) as c:
        _refused(lambda: c.publish(c.names.parts, "c.run1", b"{}"))
    with _bus(work, Role.WORKER) as w:
        _refused(lambda: _amqp(lambda: w.channel.exchange_delete(w.names.parts)))


def test_the_scheduler_can_neither_delete_nor_rebind_the_control_exchange_or_log(deployed):
    """Every submitter holds the scheduler's user: it may not delete the control exchange, the
    sync exchange or the control log (workers would hear no cancel, and the log of past cancels
    would be gone), nor bind the log to an exchange it publishes to; `scheduler cancel`'s replay
    of the log still works, and a scheduler that comes before any collector still declares what
    a submit needs."""
    tag, tmp_path, runs, _ = deployed
    sched, coll = (_settings(tmp_path, tag, r) for r in ("scheduler", "collector"))
    with _bus(sched, Role.SCHEDULER) as s:
        s.declare((POOL,))
    with _bus(coll, Role.COLLECTOR) as c:
        c.declare((POOL,))
    n = RabbitBus(sched).names
    for exchange in (n.control, n.control_sync):
        with _bus(sched, Role.SCHEDULER) as s:
            _refused(lambda: _amqp(lambda: s.channel.exchange_delete(exchange)))
    with _bus(sched, Role.SCHEDULER) as s:
        _refused(lambda: s.delete_queue(n.control_log))
    with _bus(sched, Role.SCHEDULER) as s:
        _refused(lambda: _amqp(lambda: s.channel.queue_bind(n.control_log, n.runs_exchange, "x")))
    with _bus(coll, Role.COLLECTOR) as c:
        c.publish_control(ControlMessage(action="cancel", campaign_id="sched-replay"))
    seen: list[ControlMessage] = []
    with _bus(sched, Role.SCHEDULER) as s:
        s.declare((POOL,))
        s.replay_control_log("perm-sched", seen.append, should_stop=lambda: False, timeout_s=30)
    assert "sched-replay" in [m.campaign_id for m in seen]


def _refused_on_channel(settings: Settings, role: Role, op) -> str:
    """Run ``op(channel)`` on a fresh connection of ``role``'s user; the broker's refusal (the
    channel or, for what a queue type does not implement, the connection is closed)."""
    with _bus(settings, role) as b:
        try:
            op(b.channel)
        except (pika.exceptions.ChannelClosedByBroker, pika.exceptions.ConnectionClosedByBroker) as e:
            return f"{e.reply_code} {e.reply_text}"
    raise AssertionError("the broker accepted what this role may not do")


def test_a_worker_publishes_results_but_can_neither_take_nor_purge_any(deployed):
    """The worker's user may publish results (they reach the collector's queue) but may not get,
    consume or purge the results queue, the dead letters or the collector's copy of them, and a
    purge of the control log (a stream) empties nothing: a cancel is still replayed after it."""
    tag, tmp_path, runs, _ = deployed
    sched, work, coll = (_settings(tmp_path, tag, r) for r in ("scheduler", "worker", "collector"))
    with _bus(coll, Role.COLLECTOR) as c:
        c.declare((POOL,))
    with _bus(sched, Role.SCHEDULER) as s:
        s.declare((POOL,))
    with _bus(coll, Role.COLLECTOR) as c:
        c.publish_control(ControlMessage(action="cancel", campaign_id="kept"))
    event = RunEvent(run_id="r2", campaign_id="c2", state="running", worker="w", at=0.0).encode()
    with _bus(work, Role.WORKER) as w:
        w.declare((POOL,))
        w.publish_result(event)
        w.dead_letter(b"parked", "test", w.names.runs_queue(POOL))
    n = RabbitBus(work).names
    ops = {"get": lambda q: lambda ch: ch.basic_get(q), "purge": lambda q: lambda ch: ch.queue_purge(q),
           "consume": lambda q: lambda ch: ch.basic_consume(q, lambda *a: None)}
    for queue in (n.results, n.dead, n.dead_watch):
        for what, op in ops.items():
            reason = _refused_on_channel(work, Role.WORKER, op(queue))
            assert reason.startswith("403 ACCESS_REFUSED"), (what, queue, reason)
    # A worker cannot bind the results queue to an exchange of its own either (no write on it).
    assert "ACCESS_REFUSED" in _refused_on_channel(work, Role.WORKER, lambda ch: ch.queue_bind(n.results, n.control))
    assert "not supported by stream queues" in _refused_on_channel(work, Role.WORKER, ops["purge"](n.control_log))
    cancels: list[ControlMessage] = []
    with _bus(work, Role.WORKER) as w:
        w.declare((POOL,))
        w.replay_control_log("after-purge", cancels.append, should_stop=lambda: False, timeout_s=30)
    assert "kept" in {m.campaign_id for m in cancels}

    with _bus(coll, Role.COLLECTOR) as c:  # everything the worker sent is still there for the collector
        bodies = []
        while (d := c.get(c.names.results)) is not None:
            bodies.append(d.body)
            c.ack(d.delivery_tag)
        assert event in bodies
        assert c.queue_depth(c.names.dead_watch) >= 1
    # Nor may the scheduler or the collector publish results in the workers' name.
    with _bus(sched, Role.SCHEDULER) as s:
        _refused(lambda: s.publish_result(b"{}"))
    with _bus(coll, Role.COLLECTOR) as c:
        _refused(lambda: c.publish_result(b"{}"))
    assert "ACCESS_REFUSED" in _refused_on_channel(sched, Role.SCHEDULER, ops["get"](n.results))


def test_the_collector_reports_the_runs_queues_but_cannot_take_or_purge_runs(deployed):
    """The collector exports the depth of each pool's runs queue by looking at it (a missing one
    reads 0, and its connection goes on); its user may not get, purge or delete runs."""
    tag, tmp_path, runs, _ = deployed
    sched, coll = (_settings(tmp_path, tag, r) for r in ("scheduler", "collector"))
    with _bus(sched, Role.SCHEDULER) as s:
        s.declare((POOL,))
        s.publish_runs(POOL, [b'{"run": 3}'])
        depth = s.queue_depth(s.names.runs_queue(POOL))
    n = RabbitBus(coll).names
    with _bus(coll, Role.COLLECTOR) as c:
        c.declare((POOL, "nobody"))
        assert c.queue_depth(n.runs_queue("nobody")) == 0 and c.consumer_count(n.runs_queue("nobody")) == 0
        assert c.queue_depth(n.runs_queue(POOL)) == depth >= 1
        assert c.queue_depth(n.results) >= 0  # the same connection still answers
    for op in (lambda ch: ch.basic_get(n.runs_queue(POOL)), lambda ch: ch.queue_purge(n.runs_queue(POOL)),
               lambda ch: ch.queue_delete(n.runs_queue(POOL))):
        assert _refused_on_channel(coll, Role.COLLECTOR, op).startswith("403 ACCESS_REFUSED")
    with _bus(sched, Role.SCHEDULER) as s:
        assert s.queue_depth(s.names.runs_queue(POOL)) == depth


def test_a_worker_before_the_first_submit_to_its_pool_is_told_to_wait(deployed):
    """A worker of a pool no campaign was sent to yet declares (checks) what the collector made,
    so it can announce itself, and consuming says the runs queue is not there yet."""
    tag, tmp_path, runs, _ = deployed
    work, coll = (_settings(tmp_path, tag, r) for r in ("worker", "collector"))
    with _bus(coll, Role.COLLECTOR) as c:
        c.declare(("later",))
    with _bus(work, Role.WORKER) as w:
        w.declare(("later",))
        w.publish_result(b'{"announced": true}')
        with pytest.raises(TopologyMissing, match="no queue .*runs.later.* yet"):
            w.consume(w.names.runs_queue("later"), 1, lambda d: None, should_stop=lambda: True)
    with _bus(coll, Role.COLLECTOR) as c:
        while (d := c.get(c.names.results)) is not None:
            c.ack(d.delivery_tag)


def _drain(coll: Settings, queue: str) -> list[bytes]:
    with _bus(coll, Role.COLLECTOR) as c:
        got = []
        while (d := c.get(queue)) is not None:
            got.append(d.body)
            c.ack(d.delivery_tag)
    return got


def test_upgrading_keeps_old_workers_results_until_the_old_exchange_is_retired(deployed):
    """A deployment of an earlier version has one exchange and queue both named <ns>.results, with
    results queued. Upgraded in the documented order (ensure-services, the collector, then the
    workers), a worker not yet upgraded still publishes to <ns>.results and its results reach the
    queue beside the queued ones and the upgraded workers'; `collector retire-old-exchange` then
    deletes the old exchange, and ensure-services run again takes back the workers' grant on it."""
    tag, tmp_path, runs, _ = deployed
    work, coll = (_settings(tmp_path, tag, r) for r in ("worker", "collector"))
    n = RabbitBus(coll).names
    queued = b'{"queued": "before the upgrade"}'
    with _bus(coll, Role.COLLECTOR) as c:  # the earlier version's topology, as its collector had it
        c.delete_queue(n.results)
        _amqp(lambda: c.channel.exchange_delete(n.results_exchange))
        c.channel.exchange_declare(n.results, exchange_type="fanout", durable=True)
        c.channel.queue_declare(n.results, durable=True, arguments=_quorum_args(n.dead))
        c.channel.queue_bind(n.results, n.results)
        c.publish(n.results, "", queued)
    upgrade = _ensure_services(tag, tmp_path)
    assert upgrade.returncode == 0 and "upgrade in progress" in upgrade.stderr, upgrade.stderr
    for _ in range(2):  # idempotent: the second declare finds the new topology
        with _bus(coll, Role.COLLECTOR) as c:
            c.declare((POOL,))
    old_worker = b'{"from": "a worker not upgraded yet"}'
    with _bus(work, Role.WORKER) as w:  # as a worker of the earlier version publishes its results
        w.publish(n.results, "", old_worker)
    new = RunEvent(run_id="r3", campaign_id="c3", state="running", worker="w", at=0.0).encode()
    with _bus(work, Role.WORKER) as w:
        w.declare((POOL,))
        w.publish_result(new)
    assert _drain(coll, n.results) == [queued, old_worker, new]

    env = dict(os.environ, BENCHFLEET_CONFIG="", BENCHFLEET_AMQP_URL=coll.amqp_url, BENCHFLEET_NAMESPACE=tag)
    retire = subprocess.run([sys.executable, "-m", "services.collector.cli", "retire-old-exchange"], env=env,
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert retire.returncode == 0 and f"exchange {n.results}" in retire.stdout, retire.stderr
    reason = _refused_on_channel(coll, Role.COLLECTOR, lambda ch: ch.exchange_declare(n.results, passive=True))
    assert reason.startswith("404 NOT_FOUND"), reason
    after = _ensure_services(tag, tmp_path)
    assert after.returncode == 0 and "upgrade in progress" not in after.stderr, after.stderr
    # The worker's user may no longer write that name: it cannot bind the results queue either.
    assert "ACCESS_REFUSED" in _refused_on_channel(work, Role.WORKER, lambda ch: ch.queue_bind(n.results, n.parts))
    with _bus(work, Role.WORKER) as w:
        w.declare((POOL,))
        w.publish_result(new)
    assert _drain(coll, n.results) == [new]


def test_each_worker_host_has_its_own_broker_user_and_no_other_speaks_for_its_runs(deployed, results_db):
    """BENCHFLEET_WORKER_HOSTS="h1 h2" gives each load host a broker user with the worker's grants.
    RabbitMQ refuses a message whose user_id names another user, and the collector, bound to h1's
    user by h1's claim, refuses h2's result for the run even when it names worker h1; h1's is stored."""
    import threading
    import time
    from dataclasses import replace

    from services.collector.consumer import Collector
    from services.common.messages.announcements import WorkerAnnouncement
    from services.common.messages.results import RunResult, Totals
    from services.common.spec.loading import parse_spec
    from services.common.store import Store
    from services.scheduler import plan

    from tests.integration.fleet import wait_for

    tag, tmp_path, _, _ = deployed
    hosts = ("h1", "h2")
    try:
        r = _ensure_services(tag, tmp_path, worker_hosts="h1,h2")
        assert r.returncode == 0, r.stderr
        h1, h2 = (_settings_of(tmp_path, tag, f"{tag}-worker-{h}", f"amqp_password_worker-{h}") for h in hosts)
        db = replace(results_db, amqp_url=_settings(tmp_path, tag, "collector").amqp_url, namespace=tag)
        spec = parse_spec(f"name: hosts\npool: {POOL}\ntargets: [{{name: A, user: bench, database: sb_hosts}}]\n"
                          "workloads: [oltp_point_select]\nthreads: [1]\nduration: 1s\n")
        run, = plan.run_specs(spec, "hosts-1")
        with Store(db) as store:
            store.campaigns.record("hosts-1", spec, [run], publisher=f"{tag}-scheduler")
        collector = Collector(connect=lambda name: _bus(db, Role.COLLECTOR), open_store=lambda: Store(db).open(),
                              pools=(POOL,), backoff_s=0.1)
        t = threading.Thread(target=collector.run_forever, daemon=True)
        t.start()
        try:
            wait_for(lambda: _collector_consuming(h1), 30, "the collector to consume the results")

            def result(worker: str, transactions: int) -> RunResult:
                return RunResult(run_id=run.run_id, campaign_id="hosts-1", cell=run.cell, repetition=1, status="ok",
                                 worker=worker, host=worker, started_at=time.time() - 1, ended_at=time.time(),
                                 measured_s=1.0, totals=Totals(transactions=transactions, reads=10 * transactions))

            with _bus(h1, Role.WORKER) as w1, _bus(h2, Role.WORKER) as w2:
                w1.publish_result(RunEvent(run_id=run.run_id, campaign_id="hosts-1", state="running", worker="h1",
                                           at=time.time()).encode())
                # h2 names h1's user: the broker itself refuses it (PRECONDITION_FAILED, channel closed).
                with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
                    w2.channel.basic_publish(w2.names.results_exchange, "", result("h1", 1).encode(),
                                             properties=pika.BasicProperties(user_id=h1_user(tag)))
                assert e.value.reply_code == 406
            with _bus(h2, Role.WORKER) as w2:
                w2.publish_result(result("h1", 1).encode())  # as itself, naming worker h1
                # Handled in order: once this announcement is stored, so was (or was not) h2's result.
                w2.publish_result(WorkerAnnouncement(worker="marker", pool=POOL, state="down", address="127.0.0.1:9",
                                                     at=time.time()).encode())
            with Store(db) as store:
                wait_for(lambda: any(a.worker == "marker" for a in store.workers.announcements()), 30,
                         "the collector to handle h2's result")
                assert store.results.count(run.run_id) == 0, "h2's result was stored for h1's run"
            with _bus(h1, Role.WORKER) as w1:
                w1.publish_result(result("h1", 500).encode())
            with Store(db) as store:
                wait_for(lambda: store.results.count(run.run_id) == 1, 30, "h1's result")
                assert store.results.get(run.run_id).totals.transactions == 500, "h2's result was stored"
        finally:
            collector.stop()
            t.join(15)
    finally:
        for h in hosts:
            BrokerAdmin(results_db).delete_user(f"{tag}-worker-{h}")


def h1_user(tag: str) -> str:
    return f"{tag}-worker-h1"


def _settings_of(tmp_path: Path, tag: str, user: str, password_file: str) -> Settings:
    """Settings for broker user ``user`` of the module's vhost, its password from the secrets directory."""
    password = (tmp_path / "secrets" / password_file).read_text().strip()
    return Settings(amqp_url=with_password(f"amqp://{user}@127.0.0.1:5672/{tag}", password), namespace=tag)


def _collector_consuming(worker: Settings) -> bool:
    """Whether a collector consumes the results queue (so it declared and bound it), as a worker sees."""
    try:
        with _bus(worker, Role.WORKER) as w:
            return w.consumer_count(w.names.results) > 0
    except BusError:
        return False


def test_the_collector_sees_who_consumes_the_runs_queues_and_a_worker_does_not(deployed):
    """ensure-services enables the management API and tags the collector's user monitoring: it sees a
    worker's connection consuming a runs queue (what a takeover is judged by); a worker's user may not
    read the API at all."""
    from services.common.bus.management import ManagementApi

    from tests.integration.fleet import wait_for

    tag, tmp_path, _, _ = deployed
    sched, work, coll = (_settings(tmp_path, tag, r) for r in ("scheduler", "worker", "collector"))
    with _bus(sched, Role.SCHEDULER) as s:
        s.declare((POOL,))
    api = ManagementApi(coll)
    with _bus(work, Role.WORKER) as w:
        w.declare((POOL,))
        w.channel.basic_consume(w.names.runs_queue(POOL), lambda *a: None)

        def seen() -> bool:
            return any(c.user == f"{tag}-worker" and c.queue == w.names.runs_queue(POOL) and c.connected_at > 0
                       for c in api.runs_consumers().consumers)

        wait_for(seen, 30, "the management API to list the worker's consumer")
        with pytest.raises(BusError, match="HTTP 401"):
            ManagementApi(work).runs_consumers()
