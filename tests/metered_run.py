"""The run a worker's metrics label a live test's figures with: one two-thread point-select run."""

from __future__ import annotations

from services.common.messages.runs import RunSpec


def metered_run(*, duration: float, seed: int) -> RunSpec:
    """Run c1.a.oltp_point_select.t2.r1 of a dsn target `a`, as the scheduler would publish it."""
    return RunSpec.model_validate({
        "schema": "benchfleet.run/1", "run_id": "c1.a.oltp_point_select.t2.r1", "campaign_id": "c1",
        "campaign_name": "c", "seq": 1, "total_runs": 1,
        "cell": {"target": "a", "workload": "oltp_point_select", "threads": 2}, "repetition": 1,
        "target": {"kind": "dsn", "name": "a", "user": "bench"}, "workload": {"name": "oltp_point_select"}, "data": {},
        "duration": duration, "warmup": 0, "seed": seed, "published_at": 0})
