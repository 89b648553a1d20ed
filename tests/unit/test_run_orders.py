"""Targets once per campaign: a run order (benchfleet.run/2) names its target by the digest of a
definition the scheduler put on the control log, and a worker runs it with that target, whether it
heard the definition live, replayed it at connect, or has to read the log again; one the log does
not hold is dead-lettered naming it. Against the in-memory bus."""

from __future__ import annotations

import pytest

from services.common.bus.stub import StubBroker
from services.common.messages.codec import decode
from services.common.messages.runs import RunOrder, RunSpec, TargetDefinition, target_digest
from services.common.errors import DecodeError
from services.common.config import Settings
from services.scheduler.submit import definitions
from services.worker.consumer import Worker
from services.worker.runner import WorkerIdentity

from tests.unit.consumer_fixtures import publish_runs, runs, wait_until
from tests.unit.test_worker_consumer import FakeRuns, dead, results, serving

POOL = "default"


@pytest.fixture
def broker() -> StubBroker:
    return StubBroker()


class SeenTargets(FakeRuns):
    """FakeRuns that also keeps the target each run was measured on."""

    def __init__(self) -> None:
        super().__init__()
        self.targets: dict[str, str] = {}

    def __call__(self, run: RunSpec, *args, **kwargs):
        self.targets[run.run_id] = run.target.model_dump_json()
        return super().__call__(run, *args, **kwargs)


def worker(broker: StubBroker, fake: FakeRuns, known_targets: int = 4096) -> Worker:
    return Worker(Settings(), pool=POOL, identity=WorkerIdentity("w1", host="h1"), connect=broker.bus,
                  run_executor=fake, retry_pause_s=0, backoff_s=0.01, known_targets=known_targets)


def define(broker: StubBroker, planned: list[RunSpec]) -> None:
    with broker.bus("scheduler") as bus:
        bus.declare((POOL,))
        bus.publish_definitions([d.encode() for d in definitions(planned).values()])


def test_an_order_round_trips_to_the_same_run_and_carries_no_target():
    run = runs()[0]
    order = run.order()
    body = order.encode()
    assert b'"target_digest"' in body and run.target.model_dump_json().encode() not in body
    assert decode(body, expect=(RunOrder,)).with_target(TargetDefinition.of(run.target)) == run
    other = next(r for r in runs() if r.target.name != run.target.name)
    with pytest.raises(ValueError, match="target_digest"):
        order.with_target(TargetDefinition.of(other.target))


def test_a_definition_whose_digest_is_not_its_target_s_is_refused():
    a, b = runs()[0].target, next(r.target for r in runs() if r.target.name != runs()[0].target.name)
    body = TargetDefinition.of(a).encode().replace(target_digest(a).encode(), target_digest(b).encode())
    with pytest.raises(DecodeError, match="digest"):
        decode(body, expect=(TargetDefinition,))


def test_the_scheduler_defines_each_target_once():
    planned = runs()
    assert len(planned) == 8 and len(definitions(planned)) == len({r.target.name for r in planned}) == 2


def test_orders_run_with_their_targets_heard_by_replay_and_live(broker):
    """Half the orders are queued with their definitions before the worker connects (it replays
    the log), the other half, of another campaign, while it serves (it hears them live)."""
    before, after = runs("c1"), runs("c2")
    define(broker, before)
    publish_runs(broker, [r.order().encode() for r in before])
    fake = SeenTargets()
    with serving(worker(broker, fake)):
        broker.join(broker.names.runs_queue(POOL))
        define(broker, after)
        publish_runs(broker, [r.order().encode() for r in after])
        broker.join(broker.names.runs_queue(POOL))
        wait_until(lambda: len(results(broker)) == 16, "16 results")
    assert fake.targets == {r.run_id: r.target.model_dump_json() for r in before + after}
    assert dead(broker) == []


def test_an_order_whose_target_the_log_does_not_hold_is_dead_lettered_naming_it(broker):
    lost, good = runs()[0], runs()[1]
    define(broker, [good])
    publish_runs(broker, [lost.order().encode(), good.order().encode()])
    fake = FakeRuns()
    with serving(worker(broker, fake)):
        broker.join(broker.names.runs_queue(POOL))
    if lost.target.name == good.target.name:
        pytest.fail("the two runs must be on different targets")
    [parked] = dead(broker)
    assert parked.body == lost.order().encode()
    assert f"names target {lost.target.name!r} by digest {target_digest(lost.target)}" in parked.dead_letter_reason
    assert "which the control log does not hold" in parked.dead_letter_reason
    assert fake.calls == [(good.run_id, 1)]


def test_a_definition_the_worker_no_longer_keeps_is_read_again_from_the_log(broker):
    """A worker that keeps one definition has forgotten the first target by the time its runs come:
    it reads the log again, outside the broker's callbacks, and runs them."""
    planned = runs()
    define(broker, planned)
    publish_runs(broker, [r.order().encode() for r in planned])
    fake = SeenTargets()
    with serving(worker(broker, fake, known_targets=1)):
        broker.join(broker.names.runs_queue(POOL))
        wait_until(lambda: len(results(broker)) == 8, "8 results")
    assert fake.targets == {r.run_id: r.target.model_dump_json() for r in planned} and dead(broker) == []
