"""A worker's broker credentials cannot rewrite or fail other runs: attacks on a running fleet (real
RabbitMQ, MariaDB, collector and worker processes) with a forged publish, as a hostile worker would
make them. docs/security.md lists what they close."""

from __future__ import annotations

import time

import pytest

from services.common.bus.rabbitmq import RabbitBus
from services.common.messages.announcements import WorkerAnnouncement
from services.common.messages.events import RunEvent
from services.common.messages.results import RunResult, Totals
from services.common.spec.loading import parse_spec
from services.common.store import Store
from services.scheduler import plan

from tests.integration.fleet import Fleet, target_yaml, wait_for

pytestmark = pytest.mark.integration


def _spec_text(fleet: Fleet, name: str) -> str:
    return (f"name: {name}\npool: {fleet.pool}\ntargets:\n" + target_yaml(fleet.settings, "A", "bf_it_forged") +
            "workloads: [oltp_point_select]\ndata: {tables: 1, table_size: 1000}\nthreads: [1]\n"
            "duration: 2s\nwarmup: 0\nrepeat: 1\nrate: 200\n")  # open loop: who stores a result, not how fast


def _read_up_to_here(fleet: Fleet, bus: RabbitBus) -> None:
    """Wait until the collector has handled everything published so far on the results exchange:
    it handles messages in order, so once a marker announcement published now is stored, so are they
    (but for a takeover claim waiting for the broker's listing, and its run's later messages)."""
    marker = f"marker-{time.monotonic_ns()}"
    bus.publish_result(WorkerAnnouncement(worker=marker, pool=fleet.pool, state="down", address="127.0.0.1:9",
                                          at=time.time()).encode())

    def stored() -> bool:
        with Store(fleet.settings) as store:
            return any(a.worker == marker for a in store.workers.announcements())

    wait_for(stored, 60, "the collector to handle the forged messages")


def test_a_forged_edited_result_for_a_finished_run_changes_nothing(fleet, tmp_path):
    """A finished run's stored result, edited (transactions / 100) and published to the results
    exchange with the worker's credentials and name, is not stored: the stored result is the one
    measured. So is a copy claiming to be another worker's later attempt."""
    fleet.start_collector()
    fleet.start_worker("w1")
    spec = tmp_path / "spec.yaml"
    spec.write_text(_spec_text(fleet, "forged"))
    done = fleet.cli("scheduler", "submit", str(spec), "--wait", "--poll", "0.5", timeout=300)
    assert done.returncode == 0, done.stderr + fleet.logs()
    campaign_id = next(line.split()[1].rstrip(":") for line in done.stdout.splitlines() if line.startswith("campaign "))
    with Store(fleet.settings) as store:
        real, = store.results.whole(campaign_id)
    assert real.status == "ok" and real.totals.transactions > 100 and real.worker == "w1"
    edited = real.model_copy(update={"totals": real.totals.model_copy(
        update={"transactions": real.totals.transactions // 100})})
    other = edited.model_copy(update={"worker": "w9", "attempt": 2})
    with RabbitBus(fleet.settings) as bus:  # the worker's own broker user
        bus.declare((fleet.pool,))
        bus.publish_result(edited.encode())
        bus.publish_result(RunEvent(run_id=real.run_id, campaign_id=campaign_id, state="running", worker="w9",
                                    attempt=2, at=time.time()).encode())
        bus.publish_result(other.encode())
        _read_up_to_here(fleet, bus)
    with Store(fleet.settings) as store:
        assert store.results.whole(campaign_id) == [real], "a forged result replaced the measured one"
        assert store.runs.counts(campaign_id)["done"] == 1


def test_a_forged_dead_letter_or_result_cannot_fail_or_fill_someone_elses_run(fleet):
    """With the worker's credentials: a dead letter naming another campaign's pending run fails
    nothing; a result for a run that worker w1 claimed, sent as w9, is not stored; w1's own is."""
    spec = parse_spec(_spec_text(fleet, "victim").replace("repeat: 1", "repeat: 2"))
    runs = plan.run_specs(spec, "victim-1")
    with Store(fleet.settings) as store:
        store.campaigns.record("victim-1", spec, runs)
    fleet.start_collector()
    pending, taken = runs
    with RabbitBus(fleet.settings) as bus:
        bus.declare((fleet.pool,))
        bus.dead_letter(pending.encode(), "forged: given up", bus.names.runs_queue(fleet.pool))
        bus.publish_result(RunEvent(run_id=taken.run_id, campaign_id="victim-1", state="running", worker="w1",
                                    at=time.time()).encode())
        forged = RunResult(run_id=taken.run_id, campaign_id="victim-1", cell=taken.cell, repetition=taken.repetition,
                           status="ok", worker="w9", host="h9", started_at=time.time() - 2, ended_at=time.time(),
                           measured_s=2.0, totals=Totals(transactions=1, reads=10))
        bus.publish_result(forged.encode())
        _read_up_to_here(fleet, bus)
        with Store(fleet.settings) as store:
            assert store.results.count(taken.run_id) == 0, "another worker's result was stored for the run"
        bus.publish_result(forged.model_copy(update={"worker": "w1", "host": "h1"}).encode())
        _read_up_to_here(fleet, bus)
        # The dead letter is read on the collector's ticks (every half second), from dead.watch.
        wait_for(lambda: bus.queue_depth(bus.names.dead_watch) == 0, 60, "the collector to read the dead letter")
        time.sleep(1.0)
    with Store(fleet.settings) as store:
        assert [r.worker for r in store.results.whole("victim-1")] == ["w1"]
        states = dict(store.db.rows("SELECT run_id, state FROM runs WHERE campaign_id=%s", ("victim-1",)))
    assert states[pending.run_id] == "pending", "a forged dead letter failed a run nobody took"
