"""Verdicts for a page of cells: decisions a reader acts on, missing figures, identical
repetitions, the gate, and (simulated with fixed seeds) interval coverage and the A/A false-alarm
rate of the gate under realistic noise."""

from __future__ import annotations

import math
import random

import pytest

from services.reporting.log_ratio import log_ratio
from services.reporting.verdicts import CellFigures, Page, Verdict, fails_gate, judge


def gate(page: Page, slower_pct: float) -> list[Verdict]:
    """The cells of a page that fail a gate of ``slower_pct`` percent, by the rule gate.regressions applies."""
    return [v for v in page.verdicts if fails_gate(v, page.higher_is_better, slower_pct)]


def reps(*values):
    return dict(enumerate(values, 1))


def _cell(key, target, baseline):
    return CellFigures(key, reps(*target), reps(*baseline))


BASE = (1000.0, 1012.0, 995.0, 1006.0)
QUIET = [_cell(f"q{i}", [v * (1 + 0.004 * ((i + j) % 3 - 1)) for j, v in enumerate(BASE)], BASE) for i in range(10)]


def _page(*cells, higher_is_better=True, min_effect=0.01):
    return judge(list(cells), family="q/s, every cell of the page", higher_is_better=higher_is_better,
                 min_effect=min_effect)


def _by_key(page):
    return {v.key: v for v in page.verdicts}


def test_a_clear_slowdown_is_slower_and_its_interval_excludes_no_change():
    """10% fewer q/s in every block is "slower", with an interval wholly below 1 and a small q."""
    slow = _cell("slow", [v * 0.9 * (1 + 0.003 * (-1) ** j) for j, v in enumerate(BASE)], BASE)
    v = _by_key(_page(slow, *QUIET))["slow"]
    assert v.decision == "slower" and v.selected and v.q < 0.05
    assert v.high < 1 and v.low < v.ratio < v.high
    assert v.ratio == pytest.approx(0.9, rel=0.01)


def test_latency_going_up_is_slower_and_a_counter_only_differs():
    """Direction comes from the metric: higher latency is slower; a counter has no better side."""
    up = _cell("up", [v * 1.1 * (1 + 0.003 * (-1) ** j) for j, v in enumerate(BASE)], BASE)
    assert _by_key(_page(up, *QUIET, higher_is_better=False))["up"].decision == "slower"
    assert _by_key(_page(up, *QUIET, higher_is_better=None))["up"].decision == "differs"


def test_intervals_agree_with_marks():
    """Across the page, a cell is marked exactly when its (BY-level) interval excludes 1."""
    rng = random.Random(7)
    cells = [_cell(f"c{i}", [v * math.exp(rng.gauss(-0.01 * (i % 4), 0.01)) for v in BASE], BASE) for i in range(40)]
    page = _page(*cells)
    assert 0 < page.selection.n_selected < 40
    for v in page.verdicts:
        assert v.selected == (not v.low <= 1 <= v.high), v


def test_a_tight_small_difference_is_equivalent_and_a_noisy_one_undecided():
    """Within +-1% with a narrow interval: equivalent; the same mean with wide noise: undecided."""
    tight = _cell("tight", [v * (1.002 + 0.0005 * (-1) ** j) for j, v in enumerate(BASE)], BASE)
    noisy = _cell("noisy", [v * (1.002 + 0.06 * (-1) ** j) for j, v in enumerate(BASE)], BASE)
    page = _by_key(_page(tight, noisy, *QUIET))
    assert page["tight"].decision == "equivalent"
    assert page["noisy"].decision == "undecided"


def test_missing_figures_are_missing_not_zero():
    """A failed repetition (None) is left out, not read as 0 q/s; a side with no figures, or one
    repetition against one, is "missing"; a 0 figure is named, never turned into a ratio."""
    one_failed = CellFigures("gap", {1: 1000.0, 2: None, 3: 1001.0, 4: 999.0}, reps(*BASE[:3], 1004.0))
    empty = CellFigures("empty", {1: None, 2: math.nan}, reps(*BASE))
    single = CellFigures("single", {1: 900.0}, {2: 1000.0})
    zero = CellFigures("zero", reps(1000.0, 0.0, 990.0), reps(*BASE[:3]))
    page = _by_key(_page(one_failed, empty, single, zero, *QUIET))
    assert page["gap"].estimate.n_pairs == 3 and page["gap"].decision != "slower"
    assert page["gap"].ratio == pytest.approx(1.0, abs=0.01)
    assert page["empty"].decision == "missing" and "no figures for the target" in page["empty"].reason
    assert page["single"].decision == "missing"
    assert page["zero"].decision == "missing" and "repetition 2 is 0" in page["zero"].reason
    assert all(math.isnan(page[k].q) for k in ("empty", "single", "zero"))


def test_identical_repetitions_claim_no_p_value():
    """Zero spread is no evidence: equal sides are "identical", an exact gap in a timing is
    "undecided" with no p (capped or synthetic figures), a counter's exact gap "differs";
    none of them joins the BH family or fails the gate."""
    same = _cell("same", [500.0] * 3, [500.0] * 3)
    gap = _cell("gap", [450.0] * 3, [500.0] * 3)
    page = _page(same, gap, *QUIET)
    by = _by_key(page)
    assert by["same"].decision == "identical" and by["gap"].decision == "undecided"
    assert math.isnan(by["gap"].estimate.p) and by["gap"].ratio == pytest.approx(0.9)
    assert page.selection.family_size == len(QUIET)
    assert gate(page, 0) == []
    assert _by_key(_page(same, gap, *QUIET, higher_is_better=None))["gap"].decision == "differs"


def test_the_gate_fails_only_beyond_its_percentage():
    """A confirmed 10% slowdown fails a 5% gate but not a 15% one; faster cells never fail."""
    slow = _cell("slow", [v * 0.9 * (1 + 0.003 * (-1) ** j) for j, v in enumerate(BASE)], BASE)
    fast = _cell("fast", [v * 1.2 * (1 + 0.003 * (-1) ** j) for j, v in enumerate(BASE)], BASE)
    page = _page(slow, fast, *QUIET)
    assert [v.key for v in gate(page, 5)] == ["slow"]
    assert gate(page, 15) == []
    assert gate(_page(slow, fast, *QUIET, higher_is_better=None), 0) == []


# Realistic noise: 2% run-to-run on the log scale, a 1.5% block part shared by a block's targets.
RUN_SD, BLOCK_SD = 0.02, 0.015


def _simulated_cell(rng, key, repeat, true_log_ratio, *, shared=True):
    """A cell's figures; ``shared`` False measures the baseline in blocks of its own (another
    campaign), numbered apart so nothing pairs."""
    blocks = [rng.gauss(0, BLOCK_SD) for _ in range(repeat)]
    own = blocks if shared else [rng.gauss(0, BLOCK_SD) for _ in range(repeat)]
    level = math.log(rng.uniform(200, 20000))
    target = {b + 1: math.exp(level + true_log_ratio + blocks[b] + rng.gauss(0, RUN_SD)) for b in range(repeat)}
    first = 1 if shared else 101
    baseline = {b + first: math.exp(level + own[b] + rng.gauss(0, RUN_SD)) for b in range(repeat)}
    return CellFigures(key, target, baseline)


def test_unchanged_pages_fail_the_gate_at_most_5_percent_of_the_time():
    """A/A: 400 compared pages of 24-60 cells and 3-5 repetitions, nothing changed. The gate
    at 0% fails at most 5% of pages; a per-cell p < 0.05 rule (what marks did before) fails
    most of them."""
    rng = random.Random(20261202)
    pages = failed = naive = 0
    for _ in range(400):
        cells, repeat = rng.randint(24, 60), rng.randint(3, 5)
        page = _page(*[_simulated_cell(rng, f"c{i}", repeat, 0.0) for i in range(cells)])
        pages += 1
        failed += bool(gate(page, 0))
        naive += any(v.estimate.p < 0.05 and v.estimate.estimate < 0 for v in page.verdicts)
    assert failed / pages <= 0.05
    assert naive / pages > 0.3


def test_paired_and_welch_intervals_cover_the_true_ratio_95_percent_of_the_time():
    """3-5 blocks, a true 3% slowdown: the 95% interval holds it about 95% of the time, paired
    or (blocks not shared) Welch."""
    rng = random.Random(26)
    paired = welch = 0
    trials = 3000
    truth = math.exp(-0.03)
    for i in range(trials):
        cell = _simulated_cell(rng, "c", rng.randint(3, 5), -0.03)
        low, high = log_ratio(cell.target, cell.baseline).interval(0.95)
        paired += low <= truth <= high
        apart = _simulated_cell(rng, "c", rng.randint(3, 5), -0.03, shared=False)
        low, high = log_ratio(apart.target, apart.baseline).interval(0.95)
        welch += low <= truth <= high
    assert 0.935 <= paired / trials <= 0.965
    assert 0.93 <= welch / trials <= 0.97


def test_selected_intervals_keep_the_false_coverage_rate_under_5_percent():
    """Benjamini-Yekutieli: among the cells a page marks, the share whose interval misses the
    true ratio averages at most 5% (give or take two simulation standard errors) on pages where
    half the cells really changed; plain 95% intervals of the same marked cells miss more often."""
    rng = random.Random(5)
    adjusted, plain = [], []
    for _ in range(250):
        repeat = rng.randint(3, 5)
        truths = [rng.choice([0.0, 0.0, -0.08, 0.06]) for _ in range(rng.randint(24, 60))]
        page = _page(*[_simulated_cell(rng, f"c{i}", repeat, t) for i, t in enumerate(truths)])
        marked = [(v, math.exp(t)) for v, t in zip(page.verdicts, truths) if v.selected]
        if not marked:
            adjusted.append(0.0)
            plain.append(0.0)
            continue
        adjusted.append(sum(not v.low <= t <= v.high for v, t in marked) / len(marked))
        misses = 0
        for v, t in marked:
            low, high = v.estimate.interval(0.95)
            misses += not low <= t <= high
        plain.append(misses / len(marked))

    def mean_se(xs):
        m = sum(xs) / len(xs)
        return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1) / len(xs))

    fcr, se = mean_se(adjusted)
    assert fcr <= 0.05 + 2 * se
    unadjusted, _ = mean_se(plain)
    assert unadjusted > 0.05 + 2 * se
