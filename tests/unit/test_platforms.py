"""The pools-compared verdict on literal figures: a slowdown on one pool only is platform
specific, the same slowdown on both is not, and the family is BH-controlled."""

import math

import pytest

from services.reporting.platforms import PoolCell, block_log_ratios, compare_pools, verdict_line

BASE = {1: 1000.0, 2: 1010.0, 3: 990.0, 4: 1005.0, 5: 995.0, 6: 1002.0}
# The target as fast as the baseline, within 1-2% per block.
SAME = {1: 1004.0, 2: 1000.0, 3: 1001.0, 4: 990.0, 5: 1003.0, 6: 1010.0}
# The target about 40% slower in every block.
SLOW = {1: 612.0, 2: 598.0, 3: 600.0, 4: 611.0, 5: 590.0, 6: 605.0}


def cell(pool, target_figures, target="B", threads=8):
    return PoolCell(pool=pool, target=target, workload="oltp_write_only", threads=threads,
                    target_figures=target_figures, baseline_figures=BASE)


def test_a_slowdown_on_one_pool_only_is_platform_specific():
    [c] = compare_pools([cell("suse", SAME), cell("rhel", SLOW)])
    assert (c.pool_a, c.pool_b) == ("rhel", "suse")
    assert c.verdict == "platform specific"
    assert c.on_a.ratio == pytest.approx(0.602, abs=0.005)
    assert c.on_b.ratio == pytest.approx(1.0, abs=0.01)
    # suse's ratio is about 1/0.6 times rhel's.
    assert c.ratio_of_ratios == pytest.approx(1.66, abs=0.03)
    assert c.q < 0.001
    assert "platform specific" in verdict_line(c) and "0.602 on rhel" in verdict_line(c)


def test_the_same_slowdown_on_both_pools_is_not():
    slow_too = {k: v * 1.01 for k, v in SLOW.items()}
    [c] = compare_pools([cell("suse", slow_too), cell("rhel", SLOW)])
    assert c.verdict == "same on both"
    assert c.on_a.ratio < 0.7 and c.on_b.ratio < 0.7
    assert c.q > 0.05


def test_a_weak_difference_alone_is_marked_but_not_among_many_unchanged_cells():
    # rhel's ratio about 1.5% lower, with 1% noise (p about 0.026): significant alone, not among 10 tests.
    rhel = {1: 986.0, 2: 988.0, 3: 983.0, 4: 978.0, 5: 985.0, 6: 998.0}
    alone = compare_pools([cell("suse", SAME), cell("rhel", rhel)])
    assert alone[0].interaction.p < 0.05 and alone[0].verdict == "platform specific"
    family = [cell("suse", SAME), cell("rhel", rhel)]
    for threads in range(16, 25):
        family += [cell("suse", SAME, threads=threads), cell("rhel", SAME, threads=threads)]
    judged = {c.threads: c for c in compare_pools(family)}
    assert len(judged) == 10
    assert judged[8].interaction.p == alone[0].interaction.p
    assert judged[8].q > 0.05 and judged[8].verdict == "same on both"


def test_each_pair_of_three_pools_is_one_test():
    judged = compare_pools([cell("suse", SAME), cell("rhel", SLOW), cell("debian", SAME)])
    verdicts = {(c.pool_a, c.pool_b): c.verdict for c in judged}
    assert verdicts == {("debian", "rhel"): "platform specific", ("debian", "suse"): "same on both",
                        ("rhel", "suse"): "platform specific"}


def test_one_repetition_per_pool_is_untested_and_not_in_the_family():
    judged = compare_pools([cell("suse", {1: 1000.0}), cell("rhel", {1: 600.0}),
                            cell("suse", SAME, threads=16), cell("rhel", SLOW, threads=16)])
    by_threads = {c.threads: c for c in judged}
    assert by_threads[8].verdict == "untested" and "fewer than 2" in by_threads[8].reason
    assert math.isnan(by_threads[8].q)
    # The untested cell is no member: the other test's q is its own p.
    assert by_threads[16].q == by_threads[16].interaction.p


def test_failed_runs_and_unshared_blocks_leave_the_block_out():
    assert block_log_ratios({1: 100.0, 2: None, 3: 50.0, 4: 10.0}, {1: 100.0, 2: 100.0, 3: 100.0}) == \
        [0.0, pytest.approx(math.log(0.5))]


def test_a_pool_given_twice_for_a_cell_names_the_field():
    with pytest.raises(ValueError, match=r"cells\[1\]\.pool: 'suse'"):
        compare_pools([cell("suse", SAME), cell("suse", SLOW)])
