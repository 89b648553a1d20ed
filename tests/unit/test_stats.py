"""Statistics over repetitions; reference numbers come from scipy 1.17 (scipy.stats.t,
scipy.special.betainc), computed once in a scratch script. The test behind every verdict is
``log_ratio``'s (test_verdict_reference.py)."""

from __future__ import annotations

import math
import unittest

import pytest

from services.reporting.stats import describe, side_by_side
from services.reporting.tdist import betainc, t_cdf, t_ppf, t_two_sided_p

# Three 5-minute q/s repetitions each: a clear 5% gain, and a noisy pair with no real difference.
FAST = [1050.2, 1047.8, 1053.1]
BASE = [1001.5, 998.7, 1003.9]
NOISY_A = [100.0, 112.0, 95.0]
NOISY_B = [104.0, 98.0, 109.0]


class TDistTest(unittest.TestCase):
    def test_quantiles_match_tables(self):
        """The 97.5% t quantiles used for 95% intervals are the textbook ones, fractional df too."""
        self.assertAlmostEqual(t_ppf(0.975, 1), 12.706204736174694, places=9)
        self.assertAlmostEqual(t_ppf(0.975, 2), 4.302652729749462, places=9)
        self.assertAlmostEqual(t_ppf(0.975, 2.5), 3.5746548420036817, places=9)
        self.assertAlmostEqual(t_ppf(0.975, 10), 2.228138851986274, places=9)
        self.assertAlmostEqual(t_ppf(0.025, 4), -2.7764451051977934, places=9)
        self.assertAlmostEqual(t_ppf(0.975, math.inf), 1.959963984540054, places=9)

    def test_cdf_and_tails(self):
        """CDF and two-sided p agree with scipy, including p-values far below 1e-5."""
        self.assertAlmostEqual(t_cdf(0.0, 3), 0.5)
        self.assertAlmostEqual(t_cdf(-1.5, 3.7), 0.10679908460100675, places=10)
        p = t_two_sided_p(22.832584169983527, 3.998473084003768)
        self.assertAlmostEqual(p / 2.1865437474676397e-05, 1.0, places=8)
        self.assertEqual(t_two_sided_p(math.inf, 3), 0.0)

    def test_betainc(self):
        """The incomplete beta behind the t CDF is right on both sides of its mean."""
        self.assertAlmostEqual(betainc(2.5, 0.5, 0.3), 0.018927124071945658, places=12)
        self.assertAlmostEqual(betainc(0.5, 2.5, 0.9), 0.9988855624584926, places=12)
        with pytest.raises(ValueError):
            betainc(1, 1, 1.5)


class DescribeTest(unittest.TestCase):
    def test_summary_of_three_runs(self):
        """A cell shows mean, sample stdev, CV and the 95% t interval of the mean."""
        s = describe(FAST)
        self.assertEqual(s.n, 3)
        self.assertAlmostEqual(s.mean, 1050.3666666666666, places=9)
        self.assertAlmostEqual(s.stdev, 2.653927906581713, places=9)
        self.assertAlmostEqual(s.cv, 0.0025266680586922474, places=12)
        self.assertAlmostEqual(s.ci_low, 1043.7739442696604, places=7)
        self.assertAlmostEqual(s.ci_high, 1056.9593890636727, places=7)

    def test_single_run_has_no_spread(self):
        """With one repetition the mean is known but spread and interval are not."""
        s = describe([500.0])
        self.assertEqual((s.n, s.mean), (1, 500.0))
        self.assertTrue(math.isnan(s.stdev) and math.isnan(s.ci_low) and math.isnan(s.cv))
        self.assertFalse(s.high_cv())

    def test_high_cv_flag_threshold(self):
        """The seeds' `*` appears when CV exceeds the threshold, which the user can change."""
        s = describe(NOISY_A)  # CV 8.5%
        self.assertTrue(s.high_cv())
        self.assertFalse(s.high_cv(0.10))
        self.assertFalse(describe(FAST).high_cv())

    def test_empty_is_an_error(self):
        """A cell without any value is a caller bug, not a zero."""
        with pytest.raises(ValueError):
            describe([])


class SideBySideTest(unittest.TestCase):
    def test_ratio_of_the_means_and_noise_of_either_side(self):
        """A target beside its baseline: the ratio of the means, and the seeds' `*` when either side is noisy."""
        c = side_by_side(describe(FAST), describe(BASE))
        self.assertAlmostEqual(c.ratio, 1.0489331247295361, places=12)
        self.assertFalse(c.high_cv())
        self.assertTrue(side_by_side(describe(FAST), describe(NOISY_A)).high_cv())

    def test_zero_baseline_has_no_ratio(self):
        """A baseline that measured nothing cannot be divided by: the ratio is NaN, never infinite."""
        self.assertTrue(math.isnan(side_by_side(describe([1.0, 2.0]), describe([0.0, 0.0])).ratio))
