"""Statistics over repetitions; reference numbers come from scipy 1.17 (scipy.stats.t,
scipy.stats.ttest_ind(equal_var=False), scipy.special.betainc), computed once in a scratch script."""

from __future__ import annotations

import math
import unittest

import pytest

from services.reporting.stats import CellStats, compare, compare_stats, describe, ratio_interval, welch_t_test
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


class WelchTest(unittest.TestCase):
    def test_significant_case_matches_scipy(self):
        """A 5% gain over three tight runs gives scipy's Welch t, df and a tiny p."""
        r = welch_t_test(FAST, BASE)
        self.assertAlmostEqual(r.t, 22.8326, places=4)
        self.assertAlmostEqual(r.df, 3.9985, places=4)
        self.assertAlmostEqual(r.p, 2.1865437474676397e-05, places=9)

    def test_noise_case_matches_scipy(self):
        """Overlapping noisy runs give scipy's small t and a large p."""
        r = welch_t_test(NOISY_A, NOISY_B)
        self.assertAlmostEqual(r.t, -0.2236, places=4)
        self.assertAlmostEqual(r.df, 3.3727, places=4)
        self.assertAlmostEqual(r.p, 0.8359, places=4)

    def test_unequal_sizes_and_variances(self):
        """Unequal repetition counts and spreads use the Welch–Satterthwaite df as scipy does."""
        r = welch_t_test([20.1, 22.4, 19.8, 21.7, 23.0], [18.2, 18.4, 18.1])
        self.assertAlmostEqual(r.t, 4.9896, places=4)
        self.assertAlmostEqual(r.df, 4.1559, places=4)
        self.assertAlmostEqual(r.p, 0.0068, places=4)

    def test_identical_repetitions(self):
        """Runs without any spread are either certainly different or certainly not."""
        self.assertEqual(welch_t_test([5.0, 5.0], [5.0, 5.0]).p, 1.0)
        r = welch_t_test([6.0, 6.0], [5.0, 5.0])
        self.assertEqual((r.t, r.p), (math.inf, 0.0))


class CompareTest(unittest.TestCase):
    def test_faster_with_ratio_interval(self):
        """A real gain is "faster", with the mean ratio and a 95% interval around it."""
        c = compare(FAST, BASE)
        self.assertEqual(c.verdict, "faster")
        self.assertAlmostEqual(c.ratio, 1.0489331247295361, places=12)
        self.assertAlmostEqual(c.ratio_low, 1.042854142929925, places=9)
        self.assertAlmostEqual(c.ratio_high, 1.0550475419924579, places=9)

    def test_slower_is_the_mirror(self):
        """Swapping target and baseline turns "faster" into "slower"."""
        self.assertEqual(compare(BASE, FAST).verdict, "slower")

    def test_noise_is_same(self):
        """Overlapping noisy runs are "same", and the interval straddles 1."""
        c = compare(NOISY_A, NOISY_B)
        self.assertEqual(c.verdict, "same")
        self.assertLess(c.ratio_low, 1.0)
        self.assertGreater(c.ratio_high, 1.0)
        self.assertTrue(c.high_cv())
        self.assertAlmostEqual(c.ratio_low, 0.8291687063156847, places=9)
        self.assertAlmostEqual(c.ratio_high, 1.175203482922728, places=9)

    def test_tiny_significant_difference_is_same(self):
        """A significant 0.3% difference is below the 1% minimum effect, so it reads "same"."""
        a, b = [1000.0, 1000.5, 1001.0], [1003.0, 1003.5, 1004.0]
        c = compare(a, b)
        self.assertLess(c.test.p, 0.05)
        self.assertEqual(c.verdict, "same")
        self.assertIn("smaller than 1%", c.reason)
        self.assertEqual(compare(a, b, min_effect=0.001).verdict, "slower")

    def test_alpha_is_a_parameter(self):
        """A stricter alpha turns a borderline gain into "same"."""
        a, b = [20.1, 22.4, 19.8, 21.7, 23.0], [18.2, 18.4, 18.1]  # p = 0.0068
        self.assertEqual(compare(a, b).verdict, "faster")
        self.assertEqual(compare(a, b, alpha=0.001).verdict, "same")

    def test_not_enough_repetitions(self):
        """One run on a side gives a ratio but verdict "n/a" with the reason."""
        c = compare([110.0], [100.0, 101.0])
        self.assertEqual((c.verdict, c.reason), ("n/a", "not enough repetitions"))
        self.assertAlmostEqual(c.ratio, 110.0 / 100.5)
        self.assertTrue(math.isnan(c.test.p) and math.isnan(c.ratio_low))

    def test_lower_is_better_for_latency(self):
        """For latencies a smaller target mean is the "faster" one."""
        self.assertEqual(compare(BASE, FAST, higher_is_better=False).verdict, "faster")

    def test_zero_baseline(self):
        """A baseline that measured nothing cannot be divided by, so the cell is "n/a"."""
        c = compare([1.0, 2.0], [0.0, 0.0])
        self.assertEqual(c.verdict, "n/a")
        self.assertEqual(c.reason, "baseline mean is zero")

    def test_compare_stats_equals_compare(self):
        """Comparing from summaries gives the same answer as from raw samples."""
        self.assertEqual(compare_stats(describe(FAST), describe(BASE)), compare(FAST, BASE))

    def test_ratio_interval_needs_positive_means(self):
        """A ratio interval is undefined for non-positive means rather than wrong."""
        neg = CellStats(3, -1.0, 0.1, 0.1, -1.2, -0.8)
        low, high = ratio_interval(neg, describe(BASE))
        self.assertTrue(math.isnan(low) and math.isnan(high))
