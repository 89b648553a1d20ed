"""Planning: the run matrix, its interleaved order, and run ids that survive redelivery."""

from __future__ import annotations

from services.common.spec.loading import parse_spec
from services.scheduler import plan

SPEC = parse_spec("""
name: seeds
targets: [{name: off, database: a}, {name: 8, database: b}, {name: "32", database: c}]
workloads: [oltp_point_select, oltp_read_only]
threads: [1, 4]
duration: 10s
warmup: 5s
repeat: 2
seed: 303
""")


def test_matrix_size_is_targets_workloads_threads_repetitions():
    """Every cell of every repetition is planned exactly once."""
    runs = plan.expand(SPEC, "c1")
    assert len(runs) == 3 * 2 * 2 * 2
    assert len({r.run_id for r in runs}) == len(runs)
    assert [r.seq for r in runs] == list(range(len(runs)))


def test_targets_interleave_and_repetitions_follow_each_other():
    """A1 B1 C1 for each cell, and every cell of repetition 1 before repetition 2."""
    runs = plan.expand(SPEC, "c1")
    first = [(r.cell.target, r.cell.workload, r.cell.threads, r.repetition) for r in runs[:6]]
    assert first == [
        ("off", "oltp_point_select", 1, 1), ("8", "oltp_point_select", 1, 1), ("32", "oltp_point_select", 1, 1),
        ("off", "oltp_point_select", 4, 1), ("8", "oltp_point_select", 4, 1), ("32", "oltp_point_select", 4, 1),
    ]
    reps = [r.repetition for r in runs]
    assert reps == sorted(reps)


def test_run_ids_are_deterministic():
    """Planning the same campaign twice gives the same ids, so a redelivered run replaces its result."""
    a = [r.run_id for r in plan.expand(SPEC, "c1")]
    b = [r.run_id for r in plan.expand(SPEC, "c1")]
    assert a == b
    assert a[0] == "c1.off.oltp_point_select.t1.r1"


def test_all_targets_of_a_cell_get_the_same_seed():
    """Targets of one cell and repetition answer the same query stream; repetitions differ."""
    runs = plan.expand(SPEC, "c1")
    cell1 = {r.seed for r in runs if r.cell.workload == "oltp_point_select" and r.cell.threads == 1 and r.repetition == 1}
    cell1_rep2 = {r.seed for r in runs if r.cell.workload == "oltp_point_select" and r.cell.threads == 1 and r.repetition == 2}
    assert len(cell1) == 1 and len(cell1_rep2) == 1 and cell1 != cell1_rep2


def test_run_specs_carry_the_whole_cell():
    """Each message holds the target, workload, data shape and timings a worker needs."""
    msgs = plan.run_specs(SPEC, "c1", now=0.0)
    m = msgs[1]
    assert m.target.name == "8" and m.target.database == "b"
    assert m.duration == 10 and m.warmup == 5 and m.total_runs == len(msgs)


def test_rate_reaches_run_specs_and_closed_loop_leaves_it_out_of_the_message():
    """An open-loop spec's rate is in every run; a closed-loop run's JSON has no rate field,
    so workers that predate it still decode it."""
    assert b'"rate"' not in plan.run_specs(SPEC, "c1", now=0.0)[0].encode()
    open_loop = SPEC.model_copy(update={"rate": 250.0})
    assert {m.rate for m in plan.run_specs(open_loop, "c1", now=0.0)} == {250.0}


def test_estimate_scales_with_workers():
    """The wall-time estimate counts warm-up, measurement and overhead, shared by workers."""
    one = plan.estimated_seconds(SPEC, 1)
    assert one == 24 * (5 + 10 + plan.RUN_OVERHEAD_S)
    assert plan.estimated_seconds(SPEC, 2) == one / 2


def test_campaign_ids_are_unique_and_readable():
    """Two submissions of the same spec never share a campaign id."""
    a, b = plan.new_campaign_id(SPEC, 0), plan.new_campaign_id(SPEC, 0)
    assert a.startswith("seeds-19700101T000000-") and a != b or a.startswith("seeds-")


def test_latency_by_kind_reaches_the_run_message_only_when_asked():
    """Run messages ask for per-statement latency only for campaigns that want it."""
    import json

    assert "latency_by_kind" not in json.loads(plan.run_specs(SPEC, "c1", now=0.0)[0].encode())
    spec = SPEC.model_copy(update={"latency_by_kind": True})
    assert json.loads(plan.run_specs(spec, "c1", now=0.0)[0].encode())["latency_by_kind"] is True
