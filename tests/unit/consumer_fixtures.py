"""Literal campaigns, runs and results for the consumer tests (no servers)."""

from __future__ import annotations

import time
from typing import Callable

from services.common.messages.results import RunResult, Totals
from services.common.messages.runs import RunSpec
from services.common.messages.codec import decode
from services.common.spec.loading import parse_spec
from services.common.bus.stub import StubBroker
from services.scheduler import plan

SPEC = parse_spec("name: units\ntargets: [{name: A, user: bench, database: a}, {name: B, user: bench, database: b}]\n"
                  "workloads: [oltp_point_select]\nthreads: [1, 4]\nduration: 10s\nwarmup: 0\nrepeat: 2\n")


def runs(campaign_id: str = "c1") -> list[RunSpec]:
    """Eight runs: targets A and B, 1 and 4 threads, two repetitions."""
    return plan.run_specs(SPEC, campaign_id, now=1.0)


def result(run: RunSpec, status: str = "ok", *, attempt: int = 1, error: str | None = None,
           queries: int = 1000) -> RunResult:
    """What a worker measured for ``run``: ``queries`` reads over 10 s."""
    return RunResult(run_id=run.run_id, campaign_id=run.campaign_id, cell=run.cell, repetition=run.repetition,
                     status=status, error=error, worker="w1", host="h1", attempt=attempt, started_at=100.0,
                     ended_at=110.0, measured_s=10.0, totals=Totals(transactions=queries // 10, reads=queries))


def published(broker: StubBroker, queue: str) -> list:
    """The decoded messages waiting in ``queue``, oldest first."""
    return [decode(d.body) for d in broker.messages(queue)]


def publish_runs(broker: StubBroker, bodies: list[bytes], pool: str = "default") -> None:
    with broker.bus("scheduler") as bus:
        bus.declare((pool,))
        bus.publish_runs(pool, bodies)


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.005)
