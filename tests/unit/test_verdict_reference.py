"""The verdict statistics against scipy 1.17.1 / statsmodels 0.15.0, computed once in a scratch
script (pip install scipy statsmodels into a throwaway environment; neither is a dependency):
multipletests(p, method="fdr_bh"), ttest_rel and ttest_ind(equal_var=False) on np.log of the
samples with .confidence_interval(), and the 80%-power change solved with brentq on
nct.sf(c, df, nc) + nct.cdf(-c, df, nc)."""

from __future__ import annotations

import math

import pytest

from services.reporting.fdr import bh_qvalues, select
from services.reporting.log_ratio import log_ratio
from services.reporting.power import Noise, detectable_change

# The textbook 25 p-values (Benjamini & Hochberg 1995-style list), and their BH q-values.
P = [0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205, 0.212, 0.216, 0.222, 0.251, 0.269, 0.275,
     0.34, 0.341, 0.384, 0.569, 0.594, 0.696, 0.762, 0.94, 0.942, 0.975, 0.986]
Q = [0.025, 0.1, 0.21, 0.21, 0.21, 0.25, 0.264285714286, 0.491071428571, 0.491071428571, 0.491071428571,
     0.491071428571, 0.491071428571, 0.491071428571, 0.491071428571, 0.5328125, 0.5328125, 0.564705882353,
     0.781578947368, 0.781578947368, 0.87, 0.907142857143, 0.986, 0.986, 0.986, 0.986]

# Five q/s repetitions of a target 1.7% below its baseline, block by block.
TARGET = [1012.0, 1003.5, 998.2, 1020.1, 1007.7]
BASELINE = [1031.4, 1019.9, 1015.0, 1041.2, 1022.3]


def test_bh_qvalues_match_statsmodels():
    """The q-values a page marks by are the standard BH ones, ties and step-up included."""
    assert bh_qvalues(P) == pytest.approx(Q, abs=1e-11)
    assert bh_qvalues(list(reversed(P))) == pytest.approx(list(reversed(Q)), abs=1e-11)
    assert select(P, 0.25).n_selected == 6  # statsmodels rejects 6 at 0.25


def test_paired_log_ratio_matches_scipy_ttest_rel():
    """Block by block, the ratio's estimate, p and 95% interval are a paired t test on logs."""
    est = log_ratio(dict(enumerate(TARGET, 1)), dict(enumerate(BASELINE, 1)))
    assert est.method == "paired" and est.n_pairs == 5 and est.df == 4
    assert est.estimate == pytest.approx(-0.017349435427690806, rel=1e-12)
    assert est.t == pytest.approx(-16.190066017628773, rel=1e-9)  # the t the CSV and JSON print
    assert est.p == pytest.approx(8.51512403102245e-05, rel=1e-7)
    low, high = est.interval(0.95)
    assert (math.log(low), math.log(high)) == pytest.approx((-0.020324701558088732, -0.01437416929729288), rel=1e-8)


def test_unshared_blocks_fall_back_to_welch_on_logs_matching_scipy():
    """Without two shared blocks the test is Welch's on the logs, df and 99% interval included."""
    est = log_ratio({1: TARGET[0], 2: TARGET[1], 3: TARGET[2], 4: TARGET[3], 5: TARGET[4]},
                    {11: BASELINE[0], 12: BASELINE[1], 13: BASELINE[2], 14: BASELINE[3]})
    assert est.method == "welch" and est.n_pairs == 0
    two_campaigns = log_ratio(dict(enumerate(TARGET, 1)), dict(enumerate(BASELINE[:4], 1)), shared_blocks=False)
    assert two_campaigns.method == "welch" and two_campaigns.p == pytest.approx(est.p, rel=1e-12)
    assert est.estimate == pytest.approx(-0.018232646898576732, rel=1e-12)
    assert est.t == pytest.approx(-2.676282409829306, rel=1e-9)
    assert est.df == pytest.approx(5.329617662053276, rel=1e-9)
    assert est.p == pytest.approx(0.04127270021982731, rel=1e-7)
    low, high = est.interval(0.99)
    assert (math.log(low), math.log(high)) == pytest.approx((-0.04484839000500619, 0.008383096207852731), rel=1e-7)


@pytest.mark.parametrize(("run_sd", "block_sd", "repeat", "family", "paired", "expected"), [
    (0.02, 0.03, 3, 1, True, 0.09671691380966002),
    (0.02, 0.03, 5, 1, True, 0.04872386508053972),
    (0.02, 0.03, 5, 48, True, 0.14295729049819236),
    (0.02, 0.01, 5, 1, False, 0.04630806531642672),
    (0.02, 0.01, 10, 60, False, 0.050810937034645544),
])
def test_detectable_change_is_the_exact_noncentral_t_answer(run_sd, block_sd, repeat, family, paired, expected):
    """The 80%-power change comes from the noncentral t, not the optimistic sum of quantiles
    (which says 9.2% where 3 repetitions really need 9.7%)."""
    got = detectable_change(Noise(run_sd, block_sd), repeat, family_size=family, paired=paired)
    assert got == pytest.approx(expected, rel=1e-5)


def test_cells_without_a_p_value_are_not_in_the_family():
    """A missing cell neither dilutes the family nor gets a q; the interval level follows the
    number selected (BY), Bonferroni's when nothing is."""
    q = bh_qvalues([0.01, math.nan, 0.04])
    assert math.isnan(q[1]) and q[0] == pytest.approx(0.02) and q[2] == pytest.approx(0.04)
    chosen = select([0.01, math.nan, 0.03, 0.5], 0.05)
    assert chosen.family_size == 3 and chosen.n_selected == 2
    assert chosen.interval_level == pytest.approx(1 - 2 * 0.05 / 3)
    assert select([0.5, 0.9], 0.05).interval_level == pytest.approx(1 - 0.05 / 2)
    with pytest.raises(ValueError, match=r"pvalues\[1\]"):
        bh_qvalues([0.5, 1.5])
