"""Every run ends in a final state, through real RabbitMQ, MariaDB and collector processes: a run
whose result is dead-lettered fails with the reason, a run whose worker froze is reaped, and
`scheduler submit --wait` ends both times with a non-zero exit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from services.common.bus.rabbitmq import RabbitBus
from services.common.messages.results import RunResult
from services.common.messages.runs import RunOrder
from services.common.messages.codec import decode
from services.common.store import Store

from tests.integration.fleet import ROOT, Fleet, claim, target_yaml, wait_for

pytestmark = pytest.mark.integration


def spec_file(fleet: Fleet, tmp_path) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: finality\npool: {fleet.pool}\ntargets:\n" + target_yaml(fleet.settings, "A", "bf_it_final") +
                    "workloads: [oltp_point_select]\ndata: {tables: 1, table_size: 1000}\nthreads: [1]\n"
                    "duration: 3s\nwarmup: 0\nrepeat: 1\nrate: 200\n")  # open loop: final states, not speed
    return str(path)


def submit_and_wait(fleet: Fleet, spec: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "services.scheduler.cli", "submit", spec, "--wait", "--poll", "0.3"],
                            env=fleet.env(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finished(p: subprocess.Popen, fleet: Fleet, timeout: float = 120) -> tuple[int, str, str]:
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise AssertionError(f"submit --wait did not end: {err}\n{fleet.logs()}") from None
    return p.returncode, out, err


def test_a_run_whose_result_is_dead_lettered_fails_with_the_reason(fleet, tmp_path):
    """The collector cannot store a run's result (the DB refuses a value): the result is
    dead-lettered, the run is failed with the DB's reason, the campaign finishes, and --wait
    ends with exit 1 naming the run and the reason."""
    fleet.start_collector()
    waiting = submit_and_wait(fleet, spec_file(fleet, tmp_path))
    with RabbitBus(fleet.settings) as bus:
        bus.declare((fleet.pool,))
        deliveries = []
        wait_for(lambda: deliveries.append(bus.get(bus.names.runs_queue(fleet.pool))) or deliveries[-1], 60, "the run spec")
        run = decode(deliveries[-1].body, expect=(RunOrder,))
        # A worker name longer than the results DB's column: the collector refuses the result.
        good = RunResult(run_id=run.run_id, campaign_id=run.campaign_id, cell=run.cell, repetition=run.repetition,
                         status="ok", worker="w", host="h", started_at=time.time() - 3, ended_at=time.time(),
                         measured_s=3.0)
        body = json.dumps({**json.loads(good.encode()), "worker": "w" * 200}).encode()
        claim(bus, body)  # the worker's run-started event: its result is taken from it alone
        bus.publish_result(body)
        bus.ack(deliveries[-1].delivery_tag)
    code, out, err = finished(waiting, fleet)
    assert code == 1, err + fleet.logs()
    # Refused by the DB (1406) or, where messages bound their names, by the collector's decoding.
    assert f"failed: {run.run_id}: its result was dead-lettered: " in err and "worker" in err, err
    with Store(fleet.settings) as store:
        c = store.campaigns.get(run.campaign_id)
        assert c is not None and c.state == "finished_with_failures"
        assert store.runs.counts(run.campaign_id)["failed"] == 1
        assert store.results.count(run.run_id) == 0
    with RabbitBus(fleet.settings) as bus:
        assert bus.queue_depth(bus.names.dead) == 1, "the dead letter stays for people to look at"


def test_a_run_whose_worker_froze_is_reaped(fleet, tmp_path):
    """The only worker is SIGSTOPped mid-run, after it said the warm-up began (its connection
    lingers, nobody takes the run again): past warm-up + duration + the grace from then the
    collector fails the run, naming the worker, and --wait ends with exit 1."""
    fleet.extra_env["BENCHFLEET_REAP_GRACE_S"] = "2"
    fleet.start_collector()
    worker = fleet.start_worker("frozen")
    waiting = submit_and_wait(fleet, spec_file(fleet, tmp_path))
    store = Store(fleet.settings).open()
    try:
        cid = []

        def measuring() -> bool:
            # updated_at passes started_at when the worker's "measuring" event is stored.
            rows = store.db.rows("SELECT campaign_id FROM runs WHERE state='running' AND updated_at > started_at")
            cid[:] = [r[0] for r in rows]
            return bool(rows)

        wait_for(measuring, 120, "the run's warm-up to start", interval=0.05)
        os.killpg(worker.pid, signal.SIGSTOP)
        try:
            code, out, err = finished(waiting, fleet)
            assert code == 1, err + fleet.logs()
            assert "its worker is gone" in err and "on frozen" in err, err
            c = store.campaigns.get(cid[0])
            assert c is not None and c.state == "finished_with_failures"
        finally:
            os.killpg(worker.pid, signal.SIGKILL)
    finally:
        store.close()


def test_the_reaper_allows_a_runs_start_and_counts_warm_up_from_the_measuring_event(mariadb_params, settings):
    """A run whose worker took it 100 s ago and is still starting, quiescing or preparing (warm-up
    + duration + grace long past) is not reaped; once the worker said its warm-up began, the run
    gets warm-up + duration + grace from that moment, and is reaped only past it."""
    import secrets
    from dataclasses import replace

    import mysql.connector

    from services.common.messages.events import RunEvent

    from tests.unit.consumer_fixtures import SPEC, runs

    s = replace(settings, db_name=f"benchfleet_test_{secrets.token_hex(3)}")
    store = Store(s).open()
    now = time.time()
    try:
        store.campaigns.record("c1", SPEC, runs("c1"))  # 10 s runs, no warm-up, dsn targets
        starting, measured, late = (r.run_id for r in runs("c1")[:3])

        def event(run_id: str, state: str, at: float) -> RunEvent:
            return RunEvent(run_id=run_id, campaign_id="c1", state=state, worker="w1", at=at)

        store.runs.mark_running(event(starting, "running", now - 100))
        store.runs.mark_running(event(measured, "running", now - 400))
        store.runs.mark_running(event(measured, "measuring", now - 10))
        store.runs.mark_running(event(late, "running", now - 400))
        store.runs.mark_running(event(late, "measuring", now - 30))
        overdue = {o.run_id: o for o in store.runs.overdue(now, 5)}
        assert starting not in overdue and measured not in overdue
        assert list(overdue) == [late]
        assert overdue[late].allowed_s == pytest.approx(400 - 30 + 10 + 5)
    finally:
        store.close()
        with mysql.connector.connect(use_pure=False, **mariadb_params) as c:
            c.cursor().execute(f"DROP DATABASE IF EXISTS `{s.db_name}`")
