"""The top thread count against a peak estimated with its uncertainty: a real collapse is
called with confidence, a noisy plateau is not (where "top below the largest mean" would be)."""

from __future__ import annotations

import math
import random

from services.reporting.peak import check_peak


def test_a_real_collapse_is_called_with_its_size():
    """16 threads peaks, 32 threads loses 20%: collapsed, sure, and the drop's interval holds 20%."""
    check = check_peak({1: [100, 101, 99], 8: [800, 810, 790], 16: [1500, 1490, 1510], 32: [1200, 1190, 1210]})
    assert check is not None and check.collapsed and check.sure > 0.99
    assert check.peak_threads == 16 and check.top_threads == 32
    assert check.drop_low < -0.2 < check.drop_high < -0.15
    assert "below the peak" in check.reason


def test_a_top_on_the_peak_is_not_a_collapse():
    check = check_peak({1: [100, 101, 99], 16: [1500, 1490, 1510], 32: [1500, 1520, 1480]})
    assert check is not None and not check.collapsed and check.sure < 0.5
    assert check.drop_high == 0.0


def test_too_few_repetitions_or_thread_counts_give_no_answer():
    """One repetition at the top, or a single thread count, cannot tell a collapse from noise."""
    assert check_peak({8: [800, 810], 32: [700]}) is None
    assert check_peak({32: [700, 710, 705]}) is None
    assert check_peak({8: [800, None, 790], 32: [700, None, 690]}) is not None


def test_a_noisy_plateau_is_rarely_called_a_collapse():
    """Eight thread counts on one plateau, 3 repetitions of 4% noise: the largest mean beats the
    top's by 3% in about half the campaigns, yet the check calls a collapse in under 5% of them,
    even with a margin of 0.1%."""
    rng = random.Random(32)
    naive = called = 0
    trials = 400
    for _ in range(trials):
        curve = {t: [1000 * math.exp(rng.gauss(0, 0.04)) for _ in range(3)] for t in (4, 8, 16, 24, 32, 48, 64, 128)}
        means = {t: sum(v) / 3 for t, v in curve.items()}
        naive += means[128] < 0.97 * max(means.values())
        check = check_peak(curve, margin=0.001)
        called += check is not None and check.collapsed
    assert naive / trials > 0.4
    assert called / trials <= 0.05
