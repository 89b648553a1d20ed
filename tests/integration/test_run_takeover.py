"""A run changes hands only when the broker says its taker is gone: a second worker's broker user
cannot take over a run that a live worker holds, and takes it over once its taker's connection died
and RabbitMQ delivered the run again (real RabbitMQ with its management API, MariaDB, collector and
worker processes; docs/security.md)."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from services.common.bus.management import ManagementApi
from services.common.bus.rabbitmq import RabbitBus
from services.common.errors import BusError
from services.common.messages.events import RunEvent
from services.common.spec.loading import parse_spec
from services.common.store import Store
from services.common.store.takers import Binding
from services.scheduler import plan

from tests.integration.broker_admin import BrokerAdmin
from tests.integration.fleet import Fleet, wait_for
from tests.integration.test_forged_results import _spec_text
from tests.missing import missing

pytestmark = pytest.mark.integration


@pytest.fixture
def worker_urls(fleet: Fleet) -> Iterator[dict[str, str]]:
    """Two broker users of their own (``a``, ``b``), each with a worker's reach on the fleet's names
    only; their AMQP URLs. The collector keeps the fleet's user, which may read the management API."""
    try:
        ManagementApi(fleet.settings).runs_consumers()
    except BusError as e:
        missing(f"RabbitMQ's management API does not answer (deploy/ensure-services rabbitmq enables it): {e}")
    ns = fleet.settings.namespace.replace(".", r"\.")
    names = f"^{ns}\\..*$|^amq\\.gen-.*$"
    urls = {}
    admin = BrokerAdmin(fleet.settings)
    try:
        for who in ("a", "b"):
            user, password = f"{fleet.settings.namespace}-{who}", secrets.token_hex(12)
            admin.add_user(user, password)
            admin.set_permissions("/", user, names, names, names)
            urls[who] = f"amqp://{user}:{password}@127.0.0.1:5672/%2F"
        yield urls
    finally:
        for who in ("a", "b"):
            admin.delete_user(f"{fleet.settings.namespace}-{who}")


def _start_worker(fleet: Fleet, worker_id: str, url: str) -> subprocess.Popen:
    fleet.extra_env["BENCHFLEET_AMQP_URL"] = url
    try:
        return fleet.start_worker(worker_id)
    finally:
        del fleet.extra_env["BENCHFLEET_AMQP_URL"]  # the scheduler's and the collector's stay the fleet's


def _queue_run(fleet: Fleet, campaign_id: str, duration: str):
    """Record a campaign of one run of ``duration`` and publish its run, as a submit does."""
    spec = parse_spec(_spec_text(fleet, campaign_id).replace("duration: 2s", f"duration: {duration}"))
    run, = plan.run_specs(spec, campaign_id)
    with Store(fleet.settings) as store:
        store.campaigns.record(campaign_id, spec, [run])
    with RabbitBus(fleet.settings) as bus:
        bus.declare((fleet.pool,))
        bus.publish_runs(fleet.pool, [run.encode()])
    return run


def _binding(fleet: Fleet, run_id: str) -> Binding:
    with Store(fleet.settings) as store:
        b = store.runs.binding(run_id)
    assert b is not None
    return b


def _taken_by(fleet: Fleet, run_id: str, user: str, timeout: float) -> None:
    wait_for(lambda: (b := _binding(fleet, run_id)).taker is not None and b.taker.user == user and b.state == "running",
             timeout, f"broker user {user} to claim run {run_id}")


def _result_of(fleet: Fleet, run_id: str, timeout: float):
    def stored():
        with Store(fleet.settings) as store:
            return store.results.get(run_id)

    wait_for(lambda: stored() is not None, timeout, f"the result of {run_id}\n" + fleet.logs()[-4000:])
    return stored()


def test_a_second_worker_user_cannot_take_over_a_run_a_live_worker_holds(fleet, worker_urls):
    """Worker w1 (user a) runs the run; user b claims its next attempt as w2, as a hostile worker of
    the pool would: refused, since the broker still shows a's connection, and w1's result is stored."""
    fleet.start_collector()
    _start_worker(fleet, "w1", worker_urls["a"])
    run = _queue_run(fleet, "held-1", "20s")
    user_a = f"{fleet.settings.namespace}-a"
    _taken_by(fleet, run.run_id, user_a, 120)
    with RabbitBus(replace(fleet.settings, amqp_url=worker_urls["b"])) as bus:
        bus.publish_result(RunEvent(run_id=run.run_id, campaign_id="held-1", state="running", worker="w2",
                                    attempt=2, at=time.time()).encode())
    # The claim waits for the broker's listing while the collector goes on: its verdict is in the log.
    wait_for(lambda: "run_claim_refused" in fleet.logs(), 30, "the collector to judge user b's claim")
    b = _binding(fleet, run.run_id)
    assert b.taker is not None and (b.taker.user, b.taker.worker, b.attempt) == (user_a, "w1", 1), \
        "user b took over a run its live taker holds"
    assert "still consumes" in fleet.logs()
    result = _result_of(fleet, run.run_id, 120)
    assert (result.status, result.worker) == ("ok", "w1") and result.totals.transactions > 0


def test_a_run_whose_takers_connection_died_is_taken_over_by_the_worker_it_went_to(fleet, worker_urls):
    """w1 (user a) takes the run and is killed mid-run; the broker delivers the run again to w2 (user
    b), whose claim of attempt 2 takes the run over: w2's result is the one stored."""
    fleet.start_collector()
    w1 = _start_worker(fleet, "w1", worker_urls["a"])
    run = _queue_run(fleet, "handed-1", "20s")
    _taken_by(fleet, run.run_id, f"{fleet.settings.namespace}-a", 120)
    _start_worker(fleet, "w2", worker_urls["b"])
    with RabbitBus(fleet.settings) as bus:
        queue = bus.names.runs_queue(fleet.pool)
        wait_for(lambda: bus.consumer_count(queue) == 2, 60, "w2 to consume the runs queue beside w1")
    os.killpg(w1.pid, signal.SIGKILL)
    w1.wait(30)
    _taken_by(fleet, run.run_id, f"{fleet.settings.namespace}-b", 60)
    # The collector logs the takeover just after it commits the new taker, which the wait above reads.
    wait_for(lambda: "run_taken_over" in fleet.logs(), 10, "the collector to log the takeover")
    result = _result_of(fleet, run.run_id, 180)
    assert (result.status, result.worker, result.attempt) == ("ok", "w2", 2)
