"""The bisect walk on literal verdicts: a planted step is found in at most ⌈log₂ n⌉ decided steps, an
undecided step is measured again with more repetitions and never narrows the range."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

from services.scheduler.bisect_steps import Bisect, CellInterval, most_steps, step_decision

SLOW = CellInterval("oltp_point_select t=2", 0.80, 0.78, 0.82, 0.95)
SAME = CellInterval("oltp_point_select t=2", 1.00, 0.98, 1.02, 0.95)
WIDE = CellInterval("oltp_point_select t=2", 0.95, 0.85, 1.05, 0.95)
NONE = CellInterval("oltp_point_select t=2", math.nan, math.nan, math.nan, 0.95)


def names(n: int) -> list[str]:
    return [f"b{i}" for i in range(n)]


def walk(b: Bisect, slow_from: int, undecided_at: frozenset[int] = frozenset()) -> Bisect:
    """Run ``b`` against a series slower from position ``slow_from`` on; a step numbered in
    ``undecided_at`` gives an interval straddling the effect instead."""
    while (p := b.next_probe()) is not None:
        number = len(b.steps) + 1
        cell = WIDE if number in undecided_at else SLOW if p.position >= slow_from else SAME
        b = b.record(p, f"c{number}", [cell])
    return b


@settings(max_examples=300, deadline=None)
@given(st.integers(2, 200).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n - 1))))
def test_a_planted_step_is_found_within_log2_n_decided_steps(case):
    n, k = case
    b = walk(Bisect.start(names(n), 0.05, 3, 20), k)
    assert b.state == "found"
    assert b.first_slow == f"b{k}"
    assert b.decided_steps == len(b.steps) <= most_steps(n) <= math.ceil(math.log2(n))


@settings(max_examples=200, deadline=None)
@given(st.integers(3, 100).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n - 1))),
       st.frozensets(st.integers(1, 12), max_size=4))
def test_undecided_steps_never_narrow_and_retry_with_more_repetitions(case, undecided):
    n, k = case
    b = walk(Bisect.start(names(n), 0.05, 2, 64), k, undecided)
    assert b.state == "found" and b.first_slow == f"b{k}"
    for before, after in zip(b.steps, b.steps[1:]):
        if before.decision == "undecided":
            assert (after.position, after.repeat) == (before.position, min(2 * before.repeat, 64))
    assert b.decided_steps <= most_steps(n)


def test_a_step_undecided_at_the_cap_stops_the_walk_without_an_answer():
    b = Bisect.start(names(9), 0.05, 5, 20)
    while (p := b.next_probe()) is not None:
        b = b.record(p, f"c{len(b.steps) + 1}", [WIDE])
    assert b.state == "undecided" and b.first_slow is None
    assert [s.repeat for s in b.steps] == [5, 10, 20]
    assert {s.position for s in b.steps} == {4}
    assert b.verdict().startswith("undecided: b4 stayed undecided at the cap of 20 repetitions")
    assert "after b0 and at or before b8" in b.verdict()


def test_a_cell_without_figures_is_undecided_not_a_guess():
    assert step_decision([NONE], 0.05) == "undecided"
    assert step_decision([], 0.05) == "undecided"


def test_any_cell_beyond_the_effect_makes_the_step_slower_and_all_clear_ones_not_slower():
    assert step_decision([SAME, SLOW], 0.05) == "slower"
    assert step_decision([SAME, SAME], 0.05) == "not slower"
    assert step_decision([SAME, WIDE], 0.05) == "undecided"
    # 20% slower clears a 25% effect: the question is "slower by at least the effect".
    assert step_decision([SLOW], 0.25) == "not slower"


def test_the_path_prints_each_step_with_its_verdict_interval_and_campaign():
    b = walk(Bisect.start(["good", "x", "y", "slow"], 0.05, 3, 20), 2)
    text = "\n".join(b.lines())
    assert "step 1: x (build 2 of 4) beside good, repeat 3, campaign c1: not slower" in text
    assert "step 2: y (build 3 of 4) beside good, repeat 3, campaign c2: slower" in text
    assert "oltp_point_select t=2: 0.800 (-20.0% q/s, 95% interval -22.0% to -18.0%)" in text
    assert text.endswith("first slow build: y (build 3 of 4); last good: x; 2 decided step(s)")
    data = b.as_data()
    assert data["first_slow"] == "y" and [s["campaign_id"] for s in data["steps"]] == ["c1", "c2"]


def test_when_every_midpoint_is_good_the_answer_says_the_last_build_was_not_measured():
    b = walk(Bisect.start(names(4), 0.05, 3, 20), 3)
    assert b.first_slow == "b3"
    assert "b3 itself was not measured" in b.verdict()


@pytest.mark.parametrize("builds, effect, repeat, field", [
    (["a"], 0.05, 3, "builds"), (["a", "b", "a"], 0.05, 3, "builds"), (["a", "b"], 0, 3, "effect"),
    (["a", "b"], 0.05, 1, "repeat"), (["a", "b"], 0.05, 30, "repeat")])
def test_arguments_that_cannot_be_bisected_are_refused_naming_the_field(builds, effect, repeat, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        Bisect.start(builds, effect, repeat, 20)
