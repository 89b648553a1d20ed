"""Run seeds: valid for both drivers whatever the spec seed, the same for every target of a cell."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.common.errors import LoadError
from services.common.messages.base import MAX_RUN_SEED
from services.common.spec.campaign import MAX_SEED as MAX_SPEC_SEED
from services.common.spec.campaign import CampaignSpec
from services.common.spec.workloads import DataShape, WorkloadSpec
from services.scheduler import plan
from services.worker.driver.sysbench import driver as sd

spec_seeds = st.integers(min_value=0, max_value=MAX_SPEC_SEED)
workload_keys = st.sampled_from(["oltp_point_select", "oltp_read_write", "select", "points_10", "ranges_delta_5"])
thread_counts = st.integers(min_value=1, max_value=65535)
repetitions = st.integers(min_value=1, max_value=1000)


@settings(max_examples=2000)
@given(spec_seeds, workload_keys, thread_counts, repetitions)
def test_every_derived_seed_is_one_sysbench_accepts(spec_seed, workload, threads, repetition):
    """A run seed is within 1..2^31-1: sysbench refuses larger ones and reads 0 as "use the clock"."""
    assert 1 <= plan.run_seed(spec_seed, workload, threads, repetition) <= MAX_RUN_SEED == 2**31 - 1


@settings(max_examples=300)
@given(spec_seeds, workload_keys, thread_counts, repetitions)
def test_the_sysbench_command_gets_the_derived_seed_as_a_valid_rand_seed(spec_seed, workload, threads, repetition):
    """For every derived seed, the sysbench command line carries it as --rand-seed, in sysbench's range."""
    seed = plan.run_seed(spec_seed, workload, threads, repetition)
    argv = sd.command(WorkloadSpec(name="oltp_read_write"), DataShape(), threads=threads, seed=seed, duration=10)
    given_seeds = [a.split("=", 1)[1] for a in argv if a.startswith("--rand-seed=")]
    assert given_seeds == [str(seed)]
    assert 1 <= int(given_seeds[0]) <= 2**31 - 1


@settings(max_examples=100, deadline=None)
@given(spec_seeds, st.lists(thread_counts, min_size=1, max_size=4, unique=True), st.integers(1, 4))
def test_targets_of_a_cell_share_a_seed_and_every_run_spec_carries_a_valid_one(spec_seed, threads, repeat):
    """All targets of one cell and repetition get one seed (one query stream); every run message
    holds a seed within sysbench's range, and repetitions of a cell differ."""
    spec = CampaignSpec(name="s", seed=spec_seed, threads=threads, repeat=repeat, duration=1,
                        targets=[{"name": "a", "user": "bench"}, {"name": "b", "user": "bench"}, {"name": "c", "user": "bench"}],
                        workloads=["oltp_point_select", {"name": "select_random_points", "label": "points_50",
                                                         "options": {"random_points": 50}}])
    by_cell: dict[tuple[str, int, int], set[int]] = {}
    for msg in plan.run_specs(spec, "c", now=0.0):
        assert 1 <= msg.seed <= MAX_RUN_SEED
        by_cell.setdefault((msg.cell.workload, msg.cell.threads, msg.repetition), set()).add(msg.seed)
    assert all(len(seeds) == 1 for seeds in by_cell.values())
    for workload in ("oltp_point_select", "points_50"):
        for t in threads:
            per_rep = [by_cell[(workload, t, r)] for r in range(1, repeat + 1)]
            assert len(set().union(*per_rep)) == repeat



def test_a_seed_outside_sysbench_range_is_refused_by_the_sysbench_command():
    """A run message with a seed sysbench would refuse (an older scheduler's) fails with the range named."""
    with pytest.raises(LoadError, match=r"outside sysbench's --rand-seed range 0\.\.2147483647"):
        sd.command(WorkloadSpec(name="oltp_read_write"), DataShape(), threads=1, seed=2806719650, duration=1)
