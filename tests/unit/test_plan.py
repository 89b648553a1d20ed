"""Planning: the run matrix, its interleaved order, and run ids that survive redelivery."""

from __future__ import annotations

from services.common.spec.loading import parse_spec
from services.scheduler import plan

SPEC = parse_spec("""
name: seeds
targets: [{name: off, user: bench, database: a}, {name: 8, user: bench, database: b}, {name: "32", user: bench, database: c}]
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
    """A cell's targets run back to back (a block), cell after cell, and every cell of
    repetition 1 before repetition 2 (the order within a block is the next test's)."""
    runs = plan.expand(SPEC, "c1")
    first = [(r.cell.workload, r.cell.threads, r.repetition) for r in runs[:6]]
    assert first == [("oltp_point_select", 1, 1)] * 3 + [("oltp_point_select", 4, 1)] * 3
    assert {r.cell.target for r in runs[:3]} == {"off", "8", "32"}
    assert [r.position for r in runs[:6]] == [0, 1, 2, 0, 1, 2]
    reps = [r.repetition for r in runs]
    assert reps == sorted(reps)


def _blocks(spec, campaign="c1"):
    blocks: dict[tuple[str, int, int], list[str]] = {}
    for r in plan.expand(spec, campaign):
        blocks.setdefault(r.block, []).append(r.cell.target)
    return blocks


def test_the_baseline_is_not_always_first_in_its_block():
    """Issue #26: over as many repetitions as targets, each target runs once in each position of
    a cell's block, so warming or drift favours no target (the old plan put the baseline first)."""
    spec = SPEC.model_copy(update={"repeat": 3})
    blocks = _blocks(spec)
    for workload in ("oltp_point_select", "oltp_read_only"):
        for threads in (1, 4):
            orders = [blocks[(workload, threads, rep)] for rep in (1, 2, 3)]
            for position in range(3):
                assert sorted(o[position] for o in orders) == ["32", "8", "off"], orders
    assert any(order[0] != "off" for order in blocks.values())


def test_two_targets_alternate_from_block_to_block():
    """With two targets the order flips every repetition (A B, B A, A B), from a start the seed picks."""
    spec = SPEC.model_copy(update={"targets": SPEC.targets[:2], "repeat": 4})
    orders = [_blocks(spec)[("oltp_point_select", 1, rep)] for rep in (1, 2, 3, 4)]
    assert orders[0] == orders[2] and orders[1] == orders[3] and orders[0] == orders[1][::-1]


def test_the_order_is_the_seeds_and_only_the_seeds():
    """Planning again gives the same order (a resubmitted campaign measures alike); another seed
    may start elsewhere, and the campaign id never changes it."""
    assert _blocks(SPEC, "c1") == _blocks(SPEC, "c2")
    starts = {tuple(_blocks(SPEC.model_copy(update={"seed": s}))[("oltp_point_select", 1, 1)])
              for s in range(12)}
    assert len(starts) > 1


def test_run_ids_are_deterministic():
    """Planning the same campaign twice gives the same ids, so a redelivered run replaces its result."""
    a = [r.run_id for r in plan.expand(SPEC, "c1")]
    b = [r.run_id for r in plan.expand(SPEC, "c1")]
    assert a == b
    assert "c1.off.oltp_point_select.t1.r1" in a


def test_all_targets_of_a_cell_get_the_same_seed():
    """Targets of one cell and repetition answer the same query stream; repetitions differ."""
    runs = plan.expand(SPEC, "c1")
    cell1 = {r.seed for r in runs if r.cell.workload == "oltp_point_select" and r.cell.threads == 1 and r.repetition == 1}
    cell1_rep2 = {r.seed for r in runs if r.cell.workload == "oltp_point_select" and r.cell.threads == 1 and r.repetition == 2}
    assert len(cell1) == 1 and len(cell1_rep2) == 1 and cell1 != cell1_rep2


def test_run_specs_carry_the_whole_cell():
    """Each message holds the target, workload, data shape and timings a worker needs."""
    msgs = plan.run_specs(SPEC, "c1", now=0.0)
    m = next(m for m in msgs if m.cell.target == "8")
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


def test_plan_output_shows_each_runs_place_in_its_block(capsys):
    """`scheduler plan --json` lists the order with each run's repetition (block) and position."""
    import json

    from services.scheduler import cli

    assert cli.main(["plan", "examples/quickstart.yaml", "--json"]) == 0
    order = json.loads(capsys.readouterr().out)["order"]
    blocks: dict[tuple[str, int, int], list[tuple[int, str]]] = {}
    for row in order:
        blocks.setdefault((row["workload"], row["threads"], row["repetition"]), []).append((row["position"], row["target"]))
    assert all(sorted(p for p, _ in runs) == [0, 1] for runs in blocks.values())
    assert {runs[0][1] for runs in blocks.values()} == {"A", "B"}
